"""(Session 20: DB names a tuning DB whose latest model ranks; default the shipped one.)
Cross-entropy (full size, compiled on the CPU, kernels not run): for each kernel of the default plan,
the tuner's candidate configs (up to 48), ranked by the shipped model (a) over the whole candidate set,
(b) over only the configs measured in session 17 for a kernel of the same nodes and size (the suite export; the first such measurement): each pick, with
its session-17 time where measured. LIMIT (env, default 48: the tuner's max_candidates) caps the candidates; ALL=1 lists every candidate of the loss reduction."""
import gzip, json, warnings
warnings.simplefilter("ignore")
import numpy as np
from autofuse.capture.trace import trace_aten
from autofuse.compiler import compile_graph
from autofuse.options import CompileOptions
from autofuse.plan.apply import node_id
from autofuse.runtime.program import KernelLaunch
from autofuse.search.evaluate import PlanEvaluator
from autofuse.search.kernels import candidate_configs, kernel_record, group_key
from benchmarks.cases import CASES
from costmodel.predict import resolve_predictor

TRAITS = {"name": "NVIDIA H200", "sm_count": 132, "cc": [9, 0], "copy_bw": 4.28e12}
case = next(c for c in CASES if c.name == "cross_entropy_bf16_8192x32000")
fn, args = case.build("cpu", 1.0)
gm = trace_aten(fn, args)
art = compile_graph(gm, list(args), CompileOptions(strict=True, use_db=False))
ev = PlanEvaluator(gm, list(args), tuner=None, options=CompileOptions(strict=True, use_db=False))
builder, arts, env, _ = ev._build(art.plan)
import os
from tuning_db import TuningDB
DB = os.environ.get("DB")   # a retrain's DB: its latest model (default: the shipped one)
model = resolve_predictor(TuningDB.open(DB) if DB else None, "cuda:NVIDIA H200:sm90")
print("model", model.model.version)
measured = {}
with gzip.open("costmodel/data/h200-2026-11-30-s17-suite.jsonl.gz", "rt") as f:
    for line in f:
        r = json.loads(line)
        if r["features"]["graph"].startswith("0e3582af") and r["stats"].get("median_us"):
            c = dict(r["features"]["config"], num_stages=1)
            key = (tuple(r["features"]["nodes"]), r["features"]["numel"], json.dumps(c, sort_keys=True))
            measured.setdefault(key, r["stats"]["median_us"])
launch_groups = [gi for gi, g in enumerate(builder.groups) if not g.is_extern]
infos = [k for k in arts.kernels if k.kind != "fallback"]
k = 0
for step in arts.program.steps:
    if not isinstance(step, KernelLaunch):
        step.run(env)
        continue
    gi, info = launch_groups[k], infos[k]
    k += 1
    ids = [node_id(n) for n in builder.groups[gi].nodes]
    default_rec = kernel_record(info, step, env, "g", "", TRAITS, ids)
    gkey = group_key(default_rec)
    cfgs = candidate_configs(builder.groups[gi], info.config, False, limit=int(__import__("os").environ.get("LIMIT", "48")))
    recs = []
    for cfg in cfgs:
        try:
            lv, iv = (step, info) if cfg == info.config else builder.variant(gi, cfg)
            recs.append(dict(kernel_record(iv, lv, env, "g", gkey, TRAITS, ids), group=gkey))
        except Exception:
            pass
    def meas(r):
        return measured.get((tuple(r["nodes"]), r["numel"], json.dumps(dict(r["config"], num_stages=1), sort_keys=True)))
    known = [r for r in recs if meas(r) is not None]
    print(f"kernel {ids[:3]} numel {info.numel} rnumel {info.rnumel}: {len(recs)} candidates, {len(known)} measured in session 17"
          + (f", best measured {min(meas(r) for r in known):.1f} us" if known else ""))
    for name, pool in (("all candidates", recs), ("measured only", known)):
        if len(pool) < 2:
            continue
        p = model.predict_us(pool)
        i = int(np.argmin(p))
        t = meas(pool[i])
        print(f"   pick over {name}: {{{', '.join(f'{a}: {b}' for a, b in pool[i]['config'].items() if a != 'num_stages')}}} "
              f"predicted {p[i]:.1f} us, measured {'%.1f us' % t if t is not None else 'not measured'}")
    if known:   # session 20: every kernel's measured configs, fastest measured first, with the ranking's times
        p = model.predict_us(known)
        order = sorted(range(len(known)), key=lambda i: meas(known[i]))
        rank = {i: r for r, i in enumerate(np.argsort(p))}
        for i in order:
            c = known[i]["config"]
            print(f"      measured {meas(known[i]):6.1f}  predicted {p[i]:6.1f} (rank {rank[i] + 1:2d})  "
                  + ", ".join(f"{a}={b}" for a, b in c.items() if a != "num_stages"))
    if info.numel == 1 and os.environ.get("ALL"):
        p = model.predict_us(recs)
        for i in np.argsort(p):
            c = recs[i]["config"]; t = meas(recs[i])
            print(f"      {p[i]:6.1f} us  measured {'%5.1f' % t if t else '  -  '}  " + ", ".join(f"{a}={b}" for a, b in c.items() if a != "num_stages"))
