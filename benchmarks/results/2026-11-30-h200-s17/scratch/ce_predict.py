"""Per-kernel predictions of the shipped model for benchmark cases at full scale, built on the CPU
without running the kernels: why the model-only search put cross-entropy at ~1100 µs (s17 call 3)."""
import sys
from dataclasses import replace
import torch
from autofuse.capture.trace import trace_aten
from autofuse.compiler import compile_graph
from autofuse.options import CompileOptions
from autofuse.search.kernels import kernel_record
from benchmarks.cases import CASES
from costmodel.predict import LearnedPredictor, pretrained_path, _load_blob

model = _load_blob(pretrained_path("cuda:NVIDIA H200:sm90").read_bytes(), "shipped")
pred = LearnedPredictor(model) if not hasattr(model, "predict_us") else model
traits = {"name": "NVIDIA H200", "sm_count": 132, "cc": [9, 0], "copy_bw": 4.28e12}
for name in sys.argv[1:]:
    case = next(c for c in CASES if c.name == name)
    fn, args = case.build("cpu", 1.0)
    art = compile_graph(trace_aten(fn, args), list(args), CompileOptions(strict=True, use_db=False))
    prog = art.program
    env = prog.new_env(args)
    recs, k = [], 0
    for step in prog.steps:
        if hasattr(step, "_launch"):
            recs.append(kernel_record(art.kernels[k], step, env, "", f"g{k}", traits))
            k += 1
        else:
            step.run(env)
    us = pred.predict_us(recs)
    print(f"## {name}: predicted total {sum(us):.1f} us")
    for r, u in zip(recs, us):
        print(f"  {u:9.1f} us  {r['name'] if 'name' in r else ''} numel={r.get('numel')} rnumel={r.get('rnumel')} cfg={r.get('config')}")
    for r in recs:
        print("   bytes_read", r.get("bytes_read"), "written", r.get("bytes_written"), "nodes", r.get("nodes"))
