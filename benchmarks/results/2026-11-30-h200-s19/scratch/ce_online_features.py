import gzip, json
from pathlib import Path
import numpy as np
from costmodel.model import usable, CostModel, columns, REGRESSOR_NAMES, predict_matrix
from costmodel.features import feature_matrix, FEATURE_NAMES
from costmodel.predict import pretrained_path
import sys; model = CostModel.from_bytes(open(sys.argv[1], "rb").read()) if len(sys.argv) > 1 else CostModel.from_bytes(pretrained_path("cuda:NVIDIA H200:sm90").read_bytes())
rows = []
for p in sorted(Path("costmodel/data").glob("*.jsonl.gz")):
    with gzip.open(p, "rt") as f:
        for line in f:
            r = json.loads(line); r["export"] = p.name.split(".")[0][5:]; rows.append(r)
rows = usable(rows)
ce = [r for r in rows if r["features"]["graph"].startswith("0e3582af") and r["features"]["config"].get("online") and r["features"]["config"]["RBLOCK"]==2048 and r["features"]["config"]["num_warps"]==8 and not r["features"]["config"].get("cache_hints") and r["features"]["config"]["XBLOCK"]==1][0]
sm = [r for r in rows if r["features"]["graph"].startswith("8e055006") and r["features"]["config"].get("online")][0]
x = feature_matrix([ce["features"], sm["features"]], compile=False)
base = predict_matrix(model.estimator, x, model.target, columns(x, REGRESSOR_NAMES))
print("pred", np.exp(base), "meas", ce["stats"]["median_us"], sm["stats"]["median_us"])
deltas = []
for n in REGRESSOR_NAMES:
    k = FEATURE_NAMES.index(n)
    x2 = x.copy(); x2[0, k] = x[1, k]
    p = predict_matrix(model.estimator, x2, model.target, columns(x2, REGRESSOR_NAMES))
    deltas.append((p[0] - base[0], n, x[0, k], x[1, k]))
for d in sorted(deltas)[:15]: print("%.3f %s CE=%g softmax=%g" % d)
# log(t/roof) by feature bins in training
import collections
X = feature_matrix([r["features"] for r in rows], compile=False)
y = np.log(np.array([r["stats"]["median_us"] for r in rows]) / (X[:, FEATURE_NAMES.index("ideal_us")] + 2))
for n in ["log_bytes_read","log_elements","rnumel","log_op_elements","op_intensity"]:
    print(n, "CE value", x[0, FEATURE_NAMES.index(n)], "train max", np.nanmax(X[:, FEATURE_NAMES.index(n)]))
src = ce["features"]["source"]; print(src[src.index("def KERNEL"):])
