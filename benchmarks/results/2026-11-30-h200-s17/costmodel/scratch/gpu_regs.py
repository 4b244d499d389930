"""Scratch (session 17): do the GPU loader's own compile numbers help the pair ranker?

Since session 16's call 2 every measurement records `stats.gpu_compile` = {registers, local_bytes,
shared_bytes} of the exact binary that was timed (Triton's n_regs, 4 * n_spills, metadata.shared on
the H200). Session 16 found CPU-compiled registers/spills/occupancy suggestive but inconclusive on the
session-15 data (EXPERIMENTS.md, scratch/compiled.py), with a CPU Triton that differs from the GPU's.
This tests the ground-truth numbers instead, with no compile at all.

Held out: graphs of the s16 export only (split_by_graph, fraction 0.3, split seeds 0-4). Training: the
other s16 graphs plus all older exports (graphs held out in s16 left out of them, as
costmodel_variants.extra_for does); `usable` merges twins. Older rows have no gpu_compile: NaN in the
new columns (HistGradientBoostingClassifier bins NaN natively; `FillEmptyColumns` zeroes only columns
that are NaN in every training row). The GPU numbers go into the existing compiled columns, so that
`PairRanker` treats them as config columns (a - b, a, b): registers, stack_bytes <- local_bytes,
shared_bytes, and from them (occupancy.blocks_per_sm) blocks_per_sm, occupancy, waves_per_sm;
spill_store/load stay NaN (the loader does not report them). Variants: the shipped ranker recipe
(`rank.fit_ranker`, all FEATURE_NAMES with compile=False) without / with the GPU columns, each trained
on all exports and on s16 only. Only the within-group order matters for the metrics, so the predicted
times are the ranker's order (`order_within_groups` over zeros); no regressor is fitted.
Run from the repository root: PYTHONPATH=. python benchmarks/results/2026-11-30-h200-s17/costmodel/scratch/gpu_regs.py
"""
import time
from multiprocessing import get_context
from pathlib import Path

import numpy as np

from benchmarks.costmodel_noise import load
from benchmarks.costmodel_variants import extra_for
from costmodel.evaluate import metrics, split_by_graph
from costmodel.features import FEATURE_NAMES, feature_matrix
from costmodel.model import measured_us, usable
from costmodel.occupancy import blocks_per_sm, nominal_blocks_per_sm
from costmodel.rank import fit_ranker, group_indices, order_within_groups

S16 = Path("costmodel/data/h200-2026-11-30-s16.jsonl.gz")
OLD = sorted(p for p in S16.parent.glob("*.jsonl.gz") if p != S16)
SEEDS, HELD = range(5), 0.3
COLS = ("pairwise", "peak1", "peak1_tol", "peak5", "regret")
t0 = time.time()
col = {n: i for i, n in enumerate(FEATURE_NAMES)}

new = usable(load(S16))
old = usable([r for p in OLD for r in load(p)])
allrows = [*new, *old]
x_base = feature_matrix([r["features"] for r in allrows], compile=False)
x_gpu = x_base.copy()
for i, r in enumerate(new):
    g = r["stats"]["gpu_compile"]
    warps, grid, sms = x_base[i, col["num_warps"]], x_base[i, col["grid"]], x_base[i, col["sm_count"]]
    blocks = blocks_per_sm(int(warps), g["registers"], g["shared_bytes"])
    x_gpu[i, [col[n] for n in ("registers", "stack_bytes", "shared_bytes", "blocks_per_sm", "occupancy", "waves_per_sm")]] = (
        g["registers"], g["local_bytes"], g["shared_bytes"], blocks, blocks * warps / 64.0,
        grid / (sms * blocks) if blocks > 0 else np.nan)
y = measured_us(allrows)
groups = [str(r["features"].get("group")) for r in allrows]
print(f"{len(new)} s16 rows (twins merged), {len(old)} older rows from {len(OLD)} exports; "
      f"s16 rows with gpu registers: {int(np.isfinite(x_gpu[:len(new), col['registers']]).sum())}")

# Sanity: do the GPU numbers vary within a group (one kernel, several configs)?
gix = group_indices(groups[:len(new)])
reg = x_gpu[:len(new), col["registers"]]
occ = x_gpu[:len(new), col["blocks_per_sm"]]
nominal = np.array([nominal_blocks_per_sm(int(w)) for w in x_base[:len(new), col["num_warps"]]])
pairs = [(a, b) for ix in gix for k, a in enumerate(ix) for b in ix[k + 1:]]
print(f"s16 groups with >= 2 configs: {len(gix)}; registers differ between configs in "
      f"{np.mean([len(set(reg[ix])) > 1 for ix in gix]):.1%} of groups, in {np.mean([reg[a] != reg[b] for a, b in pairs]):.1%} "
      f"of within-group pairs (mean {np.mean([len(set(reg[ix])) for ix in gix]):.1f} distinct counts per group); "
      f"registers/shared cut blocks/SM below the thread limit in {np.mean(occ < nominal):.1%} of rows, "
      f"local_bytes > 0 in {np.mean(x_gpu[:len(new), col['stack_bytes']] > 0):.1%}")

index = {id(r): i for i, r in enumerate(allrows)}
VARIANTS = {"baseline, all exports": (x_base, True), "+ gpu_compile, all exports": (x_gpu, True),
            "baseline, s16 only": (x_base, False), "+ gpu_compile, s16 only": (x_gpu, False)}
splits = {}
for seed in SEEDS:
    train, test = split_by_graph(new, HELD, seed)
    tr = np.array([index[id(r)] for r in train])
    te = np.array([index[id(r)] for r in test])
    splits[seed] = (tr, te, np.concatenate([tr, len(new) + extra_for(old, test)]))
    print(f"split {seed}: held out {len({r['features']['graph'] for r in test})} graphs, "
          f"{len(group_indices([groups[i] for i in te]))} groups, {len(te)} rows; "
          f"training rows {len(splits[seed][2])} all exports, {len(tr)} s16 only", flush=True)


def run(task):
    """One ranker fit (one split, one variant) scored on the split's held-out s16 groups."""
    seed, name = task
    (x, every), (tr, te, alltr) = VARIANTS[name], splits[seed]
    ix, te_groups, t = alltr if every else tr, [groups[i] for i in te], time.time()
    ranker = fit_ranker(x[ix], np.log(y[ix]), [groups[i] for i in ix], FEATURE_NAMES, seed=0)
    pred = order_within_groups(np.zeros(len(te)), ranker.scores(x[te], te_groups), te_groups)
    m = metrics(y[te], np.exp(pred), te_groups)
    print(f"  done split {seed} {name} ({time.time() - t:.0f} s)", flush=True)
    return [getattr(m, k) for k in COLS]


# Two processes (fork: they share the matrices above); the large fits first.
tasks = sorted(((s, n) for s in SEEDS for n in VARIANTS), key=lambda t: not VARIANTS[t[1]][1])
with get_context("fork").Pool(2) as pool:
    out = dict(zip(tasks, pool.map(run, tasks, chunksize=1)))
res = {n: [out[(s, n)] for s in SEEDS] for n in VARIANTS}
for s in SEEDS:
    for n in VARIANTS:
        print(f"split {s} {n:28s} " + " ".join(f"{k} {v:.3f}" for k, v in zip(COLS, out[(s, n)])))

print(f"\n| variant (mean of {len(SEEDS)} splits) | " + " | ".join(COLS) + " |")
print("|---" * (len(COLS) + 1) + "|")
for name, v in res.items():
    print(f"| {name} | " + " | ".join(f"{val:.3f}" for val in np.mean(v, axis=0)) + " |")
for base, new_ in (("baseline, all exports", "+ gpu_compile, all exports"), ("baseline, s16 only", "+ gpu_compile, s16 only")):
    d = np.array(res[new_]) - np.array(res[base])
    print(f"\n{new_} minus {base}, splits {list(SEEDS)}:")
    for j, k in enumerate(COLS):
        print(f"  {k:9s} " + " ".join(f"{v:+.3f}" for v in d[:, j]) + f"  mean {d[:, j].mean():+.3f}, sd {d[:, j].std(ddof=1):.3f}, "
              f"better in {int((d[:, j] < 0).sum() if k == 'regret' else (d[:, j] > 0).sum())} of {len(d)}")
print(f"({time.time() - t0:.0f} s)")
