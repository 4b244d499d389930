"""The session-17 suite export's long-row reductions (rnumel >= 8192), each predicted alone by the shipped model."""
import gzip, json
from pathlib import Path
import numpy as np
from costmodel.model import usable, CostModel, columns, REGRESSOR_NAMES, predict_matrix
from costmodel.features import feature_matrix, FEATURE_NAMES
from costmodel.predict import pretrained_path
model = CostModel.from_bytes(pretrained_path("cuda:NVIDIA H200:sm90").read_bytes())
rows = []
for p in sorted(Path("costmodel/data").glob("*.jsonl.gz")):
    with gzip.open(p, "rt") as f:
        for line in f:
            r = json.loads(line); r["export"] = p.name.split(".")[0][5:]; rows.append(r)
rows = usable(rows)
suite = [r for r in rows if r["export"].endswith("suite") and r["features"]["kind"]=="reduction" and r["features"]["rnumel"]>=8192]
x = feature_matrix([dict(r["features"], group=None) for r in suite], compile=False)
p = np.exp(predict_matrix(model.estimator, x, model.target, columns(x, REGRESSOR_NAMES)))
for r, pp in zip(suite, p):
    f = r["features"]
    print(f["graph"][:8], f["numel"], f["rnumel"], f["nodes"], {k:v for k,v in f["config"].items() if k!="num_stages"}, f["bytes_read"]/1e6, "meas %.1f pred %.1f" % (r["stats"]["median_us"], pp))
