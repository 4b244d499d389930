"""(Session 20) What a prediction costs a search that ranks 160 configs per kernel, on this CPU: cross-entropy's
loss-reduction kernel (the suite case at full size, compiled, not run), its first 160 candidate configs, the
shipped model. The tuner ranks them together once; every later plan total asks again for the chosen config.
GroupContextPredictor used to predict the whole group for each such ask (the first line's cost); it now
keeps the group's times until a new config joins it (the second line)."""
import time, warnings
warnings.simplefilter("ignore")
from autofuse.capture.trace import trace_aten
from autofuse.compiler import compile_graph
from autofuse.options import CompileOptions
from autofuse.plan.apply import node_id
from autofuse.runtime.program import KernelLaunch
from autofuse.search.evaluate import PlanEvaluator
from autofuse.search.kernels import candidate_configs, kernel_record
from benchmarks.cases import CASES
from costmodel.predict import GroupContextPredictor, resolve_predictor

TRAITS = {"name": "NVIDIA H200", "sm_count": 132, "cc": [9, 0], "copy_bw": 4.28e12}
case = next(c for c in CASES if c.name == "cross_entropy_bf16_8192x32000")
fn, args = case.build("cpu", 1.0)
gm = trace_aten(fn, args)
art = compile_graph(gm, list(args), CompileOptions(strict=True, use_db=False))
ev = PlanEvaluator(gm, list(args), tuner=None, options=CompileOptions(strict=True, use_db=False))
builder, arts, env, _ = ev._build(art.plan)
gi = [gi for gi, g in enumerate(builder.groups) if not g.is_extern][1]
info = [k for k in arts.kernels if k.kind != "fallback"][1]
ids = [node_id(n) for n in builder.groups[gi].nodes]
recs = []
for cfg in candidate_configs(builder.groups[gi], info.config, False, limit=160):
    lv, iv = builder.variant(gi, cfg)
    recs.append(dict(kernel_record(iv, lv, env, "g", "loss", TRAITS, ids), group="loss"))
model = resolve_predictor(None, "cuda:NVIDIA H200:sm90")
print(f"model {model.model.version}, {len(recs)} configs of one kernel")
t = time.perf_counter()
whole = model.predict_us(recs)
print(f"the group predicted together (each ask, before): {time.perf_counter() - t:.2f} s")
p = GroupContextPredictor(model)
p.predict_us(recs)
t = time.perf_counter()
again = [p.predict_us([r])[0] for r in recs[:20]]
print(f"20 asks for one config each, after the group was ranked once: {time.perf_counter() - t:.3f} s in all; "
      f"same times as together: {again == whole[:20]}")
