"""Where a model-only search's time goes (CPU, interpreter): cProfile of search_quality's model-only
variant on one suite case at a reduced row count."""
import cProfile, pstats, sys, time, os
from pathlib import Path
os.environ.setdefault("TRITON_INTERPRET", "1")
from benchmarks import search_quality as sq
from benchmarks.cases import CASES
name, scale, trials = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
case = next(c for c in CASES if c.name == name)
fn, args = case.build("cpu", scale)
v = [x for x in sq.default_variants(max_candidates=160, model_only_trials=trials) if x.name == sq.MODEL_ONLY][0]
from costmodel.predict import resolve_predictor
_m = resolve_predictor(None, "cuda:NVIDIA H200:sm90")
fac = lambda db, dev: _m
pr = cProfile.Profile()
t0 = time.time()
pr.enable()
out = sq.run_search(fn, args, v, Path("/work/s21/prof.db"), 1e9, fac)
pr.disable()
print("seconds", time.time() - t0, out.get("error"), out.get("trials"), out.get("predictor_calls"))
st = pstats.Stats(pr); st.sort_stats("cumulative").print_stats(45)
st.sort_stats("cumulative").print_stats("predict|kernel_record|features|candidate_configs|_select|GroupContext|rank|source_ops", 30)
