"""The four cross-entropy plans of call 3's search_quality run, rebuilt on the CPU at full size and
predicted kernel by kernel (each kernel its own group) by a cost model: where the model-only search
went wrong. The kernels are not run.

    PYTHONPATH=. python benchmarks/results/2026-11-30-h200-s17/scratch/ce_plans.py [MODEL.pkl ...]

Without arguments: the shipped model. The session-17 readings used cm5-gbr+rank-e1268d194f
(`git show bbd531a:costmodel/pretrained/cuda-nvidia-h200-sm90.pkl > /tmp/e126.pkl`) and the shipped
cm5-gbr+rank-750c278a7e, at 2e5a5e3 or later (gathers counted by sector); at d0352ab, before that
fix, the same script gives the gather kernels' whole-buffer predictions.
"""
import json
import sys
from pathlib import Path

from autofuse.capture.trace import trace_aten
from autofuse.compiler import compile_graph
from autofuse.options import CompileOptions
from autofuse.plan.plan import FusionPlan
from autofuse.search.kernels import kernel_record
from benchmarks.cases import CASES
from costmodel.predict import LearnedPredictor, _load_blob, pretrained_path

HERE = Path(__file__).parent
TRAITS = {"name": "NVIDIA H200", "sm_count": 132, "cc": [9, 0], "copy_bw": 4.28e12}
res = json.loads((HERE.parent / "call3/search_quality/results.json").read_text())
case_row = next(c for c in res["cases"] if c["case"].startswith("cross_entropy"))
case = next(c for c in CASES if c.name == case_row["case"])
fn, args = case.build("cpu", 1.0)
gm = trace_aten(fn, args)
cpu_key = compile_graph(gm, list(args), CompileOptions(strict=True, use_db=False)).plan.graph_key
for path in sys.argv[1:] or [str(pretrained_path("cuda:NVIDIA H200:sm90"))]:
    model = _load_blob(Path(path).read_bytes(), path)
    pred = LearnedPredictor(model)
    print(f"## {model.version}")
    for s in case_row["searches"]:
        plan = FusionPlan.from_json({**s["plans"][0], "graph_key": cpu_key})
        art = compile_graph(gm, list(args), CompileOptions(strict=True, use_db=False, plan=plan))
        env, recs, k = art.program.new_env(args), [], 0
        for step in art.program.steps:
            if hasattr(step, "_launch"):
                recs.append(kernel_record(art.kernels[k], step, env, "", f"g{k}", TRAITS))
                k += 1
            else:
                step.run(env)
        us = pred.predict_us(recs)
        measured = case_row["retimed"].get(s["name"], {})
        mb = ", ".join(f"{r['bytes_read'] / 1e6:.1f}" for r in recs)
        print(f"{s['name']:14s} predicted {sum(us):7.1f} us = " + " + ".join(f"{u:.1f}" for u in us)
              + f"  (MB read per kernel: {mb}; re-timed on the GPU: {measured})")
