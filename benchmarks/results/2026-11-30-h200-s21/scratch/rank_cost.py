"""What ranking one kernel's 160 candidates costs (cross-entropy's loss reduction, shipped model), with the
pair classifier on one thread and on all of this machine's cores; and whether the times are identical."""
import os, time, warnings
warnings.simplefilter("ignore")
from threadpoolctl import threadpool_limits
from autofuse.capture.trace import trace_aten
from autofuse.compiler import compile_graph
from autofuse.options import CompileOptions
from autofuse.plan.apply import node_id
from autofuse.search.evaluate import PlanEvaluator
from autofuse.search.kernels import candidate_configs, kernel_record
from benchmarks.cases import CASES
from costmodel.predict import resolve_predictor
import costmodel.rank as rank

TRAITS = {"name": "NVIDIA H200", "sm_count": 132, "cc": [9, 0], "copy_bw": 4.28e12}
case = next(c for c in CASES if c.name == "cross_entropy_bf16_8192x32000")
fn, args = case.build("cpu", 1.0)
gm = trace_aten(fn, args)
art = compile_graph(gm, list(args), CompileOptions(strict=True, use_db=False))
ev = PlanEvaluator(gm, list(args), tuner=None, options=CompileOptions(strict=True, use_db=False))
builder, arts, env, _ = ev._build(art.plan)
model = resolve_predictor(None, "cuda:NVIDIA H200:sm90")
print(f"model {model.model.version}; cores here {os.cpu_count()}")
for which in (0, 1):
    gi = [gi for gi, g in enumerate(builder.groups) if not g.is_extern][which]
    info = [k for k in arts.kernels if k.kind != "fallback"][which]
    ids = [node_id(n) for n in builder.groups[gi].nodes]
    recs = []
    for cfg in candidate_configs(builder.groups[gi], info.config, False, limit=160):
        lv, iv = builder.variant(gi, cfg)
        recs.append(dict(kernel_record(iv, lv, env, "g", "k", TRAITS, ids), group="k"))
    res = {}
    for label, limit in (("1 thread", 10**9), ("all cores", 4096)):
        rank.PARALLEL_PAIRS = limit
        t = time.perf_counter()
        res[label] = list(model.predict_us(recs))
        print(f"kernel {which}: {len(recs)} configs, {label}: {time.perf_counter() - t:.2f} s")
    print(f"kernel {which}: identical times: {res['1 thread'] == res['all cores']}")
