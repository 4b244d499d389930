"""Pair-ranker training variants for the H200 cost model (issue 7), scored like EXPERIMENTS.md's table:
held-out graphs of split seed 0 (s0) and the mean over split seeds 0-4 (mean5).

    python -m benchmarks.costmodel_variants [--data PATH] [--repeats A.jsonl.gz B.jsonl.gz]
        [--extra EXPORT.jsonl.gz ...] [--seeds 0 1 2 3 4] [--only NAME ...] [--leaky-extra] [--out FILE]
    python -m benchmarks.costmodel_variants --breakdown costmodel/pretrained/cuda-nvidia-h200-sm90.pkl

Note: the ranker alone orders a group's configs (`CostModel.predict_log_us` hands the regressor's
times out in the ranker's order), so pairwise, peak@1/@5 and regret depend on the ranker only; the
regressor (gbr, as shipped) is fitted once per split and shared by all variants. Each variant
changes only what the ranker trains on: which pairs, with which weights (`rank.training_pairs`'s
pairs, the shipped HGB classifier's settings). The noise-aware variants take each measurement's
run-to-run sigma from its kernel time by the group-centred per-bin sigmas that
`benchmarks.costmodel_noise.run_to_run` measures on --repeats (two runs of one corpus); a pair's
label is then right with probability Phi(|d log t| / sqrt(sigma_a^2 + sigma_b^2)).
--extra adds measurement exports (kernels measured in several exports: geometric mean) to every
split's training side only; the held-out graphs stay those of --data, so the rows stay comparable.
Extra rows of a graph that the split holds out are left out (the session-12 exports re-measure 6 of
--data's graphs with newer codegen: same graph hashes, new groups); --leaky-extra keeps them, which
is how the first run of this script scored the "new exports" rows (a leak, kept for the record).
"""
from __future__ import annotations

import argparse
import json
import math
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from benchmarks.costmodel_noise import DEFAULT_DATA, load, run_to_run, sigma_by_time
from costmodel.evaluate import metrics, split_by_graph
from costmodel.features import FEATURE_NAMES, feature_matrix
from costmodel.model import REGRESSOR_NAMES, columns, fit_matrix, measured_us, predict_matrix, usable
from costmodel.rank import RANKER_PARAMS, PairRanker, group_indices, order_within_groups, training_pairs

ROOT = Path(__file__).resolve().parent.parent
NOISE = ROOT / "benchmarks" / "results" / "2026-11-29-h200-s12" / "noise"
DEFAULT_REPEATS = (NOISE / "a.jsonl.gz", NOISE / "b.jsonl.gz")
COLS = ("pairwise", "pairwise_sig", "peak1", "peak1_tol", "peak5", "regret")
TINY_US = 8.0
UNREAD_CONFIG = ("online", "fast_tanh")   # LaunchConfig flags with no feature in costmodel/features.py


def merge_exports(exports: Sequence[Sequence[Mapping[str, Any]]]) -> list[dict]:
    """One row per (kernel_key, device): the first export's row with the geometric mean median."""
    by: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for rows in exports:
        for r in usable(rows):
            by[(str(r.get("kernel_key")), str(r.get("device")))].append(r)
    out = []
    for rs in by.values():
        t = math.exp(np.mean([math.log(float(r["stats"]["median_us"])) for r in rs]))
        out.append(dict(rs[0], stats=dict(rs[0]["stats"], median_us=t)))
    return out


def extra_for(extra: Sequence[Mapping[str, Any]], test: Sequence[Mapping[str, Any]], leaky: bool = False) -> np.ndarray:
    """Indices of the extra rows that may train a model scored on `test`: those of graphs not held out
    (the exports may re-measure graphs of --data with newer codegen, and a held-out graph's kernels
    must not train the model); `leaky`: all of them."""
    if leaky:
        return np.arange(len(extra))
    held = {str(r["features"].get("graph")) for r in test}
    return np.array([i for i, r in enumerate(extra) if str(r["features"].get("graph")) not in held], dtype=np.int64)


def fit_pairs(x: np.ndarray, a: np.ndarray, b: np.ndarray, label: np.ndarray, weight: np.ndarray | None,
              seed: int = 0, **params: Any) -> PairRanker:
    """`rank.fit_ranker`'s classifier on given pairs and sample weights (`params`: other HGB settings)."""
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.pipeline import make_pipeline
    from threadpoolctl import threadpool_limits

    from costmodel.model import FillEmptyColumns
    est = make_pipeline(FillEmptyColumns(), HistGradientBoostingClassifier(
        **{**RANKER_PARAMS, "random_state": seed, **params}))
    ranker = PairRanker(tuple(FEATURE_NAMES), est)
    kw = {} if weight is None else {"histgradientboostingclassifier__sample_weight": weight}
    with threadpool_limits(1):
        est.fit(ranker.pair_rows(x, a, b), label, **kw)
    return ranker


# A variant: (log_us, sigma, group median µs per row, groups) -> pair selection and weights.
Pairs = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]


def _z(log_us: np.ndarray, sigma: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.abs(log_us[a] - log_us[b]) / np.maximum(np.sqrt(sigma[a] ** 2 + sigma[b] ** 2), 1e-9)


def _phi(z: np.ndarray) -> np.ndarray:
    from scipy.special import ndtr
    return ndtr(z)


def baseline(log_us, sigma, gmed, groups) -> Pairs:
    a, b, y = training_pairs(log_us, groups)
    return a, b, y, None


def noise_prob(log_us, sigma, gmed, groups) -> Pairs:
    """Weight 2 Phi(z) - 1: the label's margin of being right under the measured noise."""
    a, b, y = training_pairs(log_us, groups)
    return a, b, y, 2 * _phi(_z(log_us, sigma, a, b)) - 1


def soft_labels(log_us, sigma, gmed, groups) -> Pairs:
    """Each pair twice: its label with weight Phi(z), the other label with weight 1 - Phi(z) (the
    likelihood of the label under the measured noise, instead of a hard 0/1)."""
    a, b, y = training_pairs(log_us, groups)
    p = _phi(_z(log_us, sigma, a, b))
    return np.concatenate([a, a]), np.concatenate([b, b]), np.concatenate([y, 1 - y]), np.concatenate([p, 1 - p])


def noise_hard(k: float) -> Callable[..., Pairs]:
    def f(log_us, sigma, gmed, groups) -> Pairs:
        a, b, y = training_pairs(log_us, groups)
        keep = _z(log_us, sigma, a, b) > k
        return a[keep], b[keep], y[keep], None
    return f


def tiny_weight(w: float) -> Callable[..., Pairs]:
    """Pairs of groups whose median time is under TINY_US µs weighted `w` (0: dropped)."""
    def f(log_us, sigma, gmed, groups) -> Pairs:
        a, b, y = training_pairs(log_us, groups)
        weight = np.where(gmed[a] < TINY_US, w, 1.0)
        if w == 0:
            keep = weight > 0
            return a[keep], b[keep], y[keep], None
        return a, b, y, weight
    return f


def gap_weight(cap: float) -> Callable[..., Pairs]:
    """Weight min(|d log t| / cap, 1): near-ties count less, whatever the kernel time."""
    def f(log_us, sigma, gmed, groups) -> Pairs:
        a, b, y = training_pairs(log_us, groups)
        return a, b, y, np.minimum(np.abs(log_us[a] - log_us[b]) / cap, 1.0)
    return f


def noise_prob_tiny(w: float) -> Callable[..., Pairs]:
    def f(log_us, sigma, gmed, groups) -> Pairs:
        a, b, y, wt = noise_prob(log_us, sigma, gmed, groups)
        return a, b, y, wt * np.where(gmed[a] < TINY_US, w, 1.0)
    return f


@dataclass(frozen=True)
class Variant:
    pairs: Callable[..., Pairs]
    extra: bool = False                        # train on the --extra rows too
    bags: int = 0                              # > 0: mean score of rankers on bootstrap samples of the groups
    params: Mapping[str, Any] = field(default_factory=dict)   # HGB settings besides the shipped ones


VARIANTS: dict[str, Variant] = {
    "baseline (shipped recipe)": Variant(baseline),
    "pair weight 2Phi(z)-1, z = gap / measured pair sigma": Variant(noise_prob),
    "soft labels: label weight Phi(z), flipped label 1 - Phi(z)": Variant(soft_labels),
    "pairs with z > 1 only": Variant(noise_hard(1.0)),
    "pairs with z > 2 only": Variant(noise_hard(2.0)),
    "pair weight min(gap / 5%, 1)": Variant(gap_weight(0.05)),
    "groups < 8 us dropped from training": Variant(tiny_weight(0.0)),
    "groups < 8 us weighted 0.3": Variant(tiny_weight(0.3)),
    "2Phi(z)-1 and groups < 8 us weighted 0.3": Variant(noise_prob_tiny(0.3)),
    "+ two new exports (training only)": Variant(baseline, extra=True),
    "+ two new exports, 2Phi(z)-1": Variant(noise_prob, extra=True),
    "bagged: mean of 5 rankers on bootstrap samples of the training groups": Variant(baseline, bags=5),
    "ranker with max_features 0.5 (feature subsampling per split)": Variant(baseline, params={"max_features": 0.5}),
    "bagged 5 x max_features 0.5": Variant(baseline, bags=5, params={"max_features": 0.5}),
    "all exports, ranker as shipped": Variant(baseline, extra=True),
    "all exports, ranker of 300 trees x 31 leaves (shipped before session 15)":
        Variant(baseline, extra=True, params={"max_iter": 300, "max_leaf_nodes": 31}),
}


def _bootstrap(ix: np.ndarray, groups: Sequence[str], n: int, seed: int) -> list[tuple[np.ndarray, list[str]]]:
    """`n` resamples of the rows `ix` by whole groups, with each row's group label in the sample (a
    group drawn twice becomes two groups, so no pair is formed across its copies)."""
    by: dict[str, list[int]] = defaultdict(list)
    for i in ix:
        by[groups[i]].append(int(i))
    names = sorted(by)
    rng = np.random.default_rng(1000 + seed)
    out = []
    for _ in range(n):
        pick = rng.integers(0, len(names), len(names))
        out.append((np.concatenate([by[names[k]] for k in pick]),
                    [f"{j}:{names[k]}" for j, k in enumerate(pick) for _ in by[names[k]]]))
    return out


def run(rows: Sequence[Mapping[str, Any]], extra: Sequence[Mapping[str, Any]], rr: Mapping[str, Any],
        seeds: Sequence[int], only: Sequence[str] = (), leaky_extra: bool = False) -> dict[str, Any]:
    rows, extra = usable(rows), usable(extra)
    allrows = [*rows, *extra]
    x = feature_matrix([r["features"] for r in allrows], compile=False)
    y = measured_us(allrows)
    log_us = np.log(y)
    groups = [str(r["features"].get("group")) for r in allrows]
    gix = group_indices(groups)
    gmed = np.zeros(len(allrows))
    for ix in gix:
        gmed[ix] = np.median(y[ix])
    sigma = sigma_by_time(y, rr)
    index = {id(r): i for i, r in enumerate(allrows)}
    n_old = len(rows)
    out: dict[str, Any] = {"rows": n_old, "extra_rows": len(extra), "seeds": list(seeds), "variants": {}}
    names = [n for n in VARIANTS if not only or any(o in n for o in only)]
    for seed in seeds:
        train, test = split_by_graph(rows, 0.25, seed)
        tr = np.array([index[id(r)] for r in train])
        te = np.array([index[id(r)] for r in test])
        reg = fit_matrix(columns(x[tr], REGRESSOR_NAMES), y[tr], "gbr", 0, offset_x=x[tr])
        base_pred = predict_matrix(reg, x[te], columns=columns(x[te], REGRESSOR_NAMES))
        te_groups = [groups[i] for i in te]
        for name in names:
            v = VARIANTS[name]
            ix = np.concatenate([tr, n_old + extra_for(extra, test, leaky_extra)]) if v.extra else tr
            samples = [(ix, [groups[i] for i in ix])] if not v.bags else _bootstrap(ix, groups, v.bags, seed)
            score = np.zeros(len(te))
            for k, (sx, sub_groups) in enumerate(samples):
                a, b, lab, w = v.pairs(log_us[sx], sigma[sx], gmed[sx], sub_groups)
                ranker = fit_pairs(x[sx], a, b, lab, w, seed=k, **v.params)
                score += ranker.scores(x[te], te_groups) / len(samples)
            pred = order_within_groups(base_pred, score, te_groups)
            m = metrics(y[te], np.exp(pred), te_groups)
            out["variants"].setdefault(name, {})[seed] = {**{k: getattr(m, k) for k in COLS},
                                                         "train_pairs": int(len(a))}
            print(f"seed {seed} {name}: " + " ".join(f"{k} {getattr(m, k):.3f}" for k in COLS), flush=True)
    return out


def table(res: Mapping[str, Any]) -> str:
    seeds = res["seeds"]
    head = ["variant", *(f"s0 {k}" for k in COLS), *(f"mean{len(seeds)} {k}" for k in COLS)]
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for name, by_seed in res["variants"].items():
        s0 = by_seed.get(seeds[0], {})
        mean = {k: float(np.mean([by_seed[s][k] for s in seeds])) for k in COLS}
        cell = lambda k, v: f"{v * 100:.1f}%" if k == "regret" else f"{v:.3f}"  # noqa: E731
        lines.append(f"| {name} | " + " | ".join(cell(k, s0[k]) for k in COLS) + " | "
                     + " | ".join(cell(k, mean[k]) for k in COLS) + " |")
    return "\n".join(lines)


def breakdown(rows: Sequence[Mapping[str, Any]], model: Any, seed: int = 0) -> list[tuple[str, int, float]]:
    """Where a model's held-out pairs go wrong: (pair class, pairs, pairwise accuracy) by which config
    keys differ, kind and measured gap, with `evaluate.metrics`'s pairs (more than 1% apart)."""
    from costmodel.evaluate import TIE
    _, test = split_by_graph(usable(rows), 0.25, seed)
    p = model.predict_us([r["features"] for r in test])
    y = measured_us(test)
    acc: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for ix in group_indices([str(r["features"].get("group")) for r in test]):
        for u in range(len(ix)):
            for v in range(u + 1, len(ix)):
                i, j = ix[u], ix[v]
                gap = abs(y[i] - y[j]) / min(y[i], y[j])
                if gap <= TIE:
                    continue
                ok = int((p[i] < p[j]) == (y[i] < y[j])) if p[i] != p[j] else 0
                ci, cj = test[i]["features"]["config"], test[j]["features"]["config"]
                diff = sorted(k for k in set(ci) | set(cj) if ci.get(k) != cj.get(k))
                for cls in ("differ in " + ("+".join(diff) if len(diff) <= 2 else "3+ keys"),
                            "kind " + str(test[i]["features"].get("kind")),
                            "gap " + ("1-2%" if gap <= 0.02 else "2-5%" if gap <= 0.05 else "5-20%" if gap <= 0.2 else "> 20%")):
                    acc[cls][0] += ok
                    acc[cls][1] += 1
    return [(k, n, c / n) for k, (c, n) in sorted(acc.items())]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.costmodel_variants", description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(DEFAULT_DATA))
    ap.add_argument("--repeats", nargs="+", default=[str(p) for p in DEFAULT_REPEATS],
                    help="exports of repeated runs, for the per-bin run-to-run sigma")
    ap.add_argument("--extra", nargs="*", default=None,
                    help="exports added to training (default: the --repeats exports)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--only", nargs="*", default=[], help="run only the variants whose name contains one of these")
    ap.add_argument("--leaky-extra", action="store_true",
                    help="keep --extra rows of held-out graphs in training (a leak; for the record only)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--breakdown", metavar="PKL", default=None,
                    help="instead: the pairwise accuracy of this model's s0 held-out pairs by class of pair")
    a = ap.parse_args(argv)
    start = time.time()
    rows = load(a.data)
    if a.breakdown:
        from costmodel.model import CostModel
        model = CostModel.from_bytes(Path(a.breakdown).read_bytes())
        print(f"{model.version}, held-out pairs of split seed 0 (more than 1% apart; a predicted tie counts 0 here)")
        print("| pairs that | n | pairwise |\n|---|---|---|")
        for cls, n, acc in breakdown(rows, model):
            print(f"| {cls} | {n} | {acc:.3f} |")
        return 0
    reps = [load(p) for p in a.repeats]
    rr = run_to_run([rows, *reps])
    print("per-bin sigma: " + ", ".join(f"{b['bin']} {b['sigma_centred'] * 100:.2f}%" for b in rr["bins"]))
    raw_extra = reps if a.extra is None else [load(p) for p in a.extra]
    flagged = sum(any(k in (r["features"].get("config") or {}) for k in UNREAD_CONFIG) for e in raw_extra for r in e)
    print(f"extra exports: {sum(map(len, raw_extra))} rows, {flagged} with a config flag features.py does not read "
          f"({', '.join(UNREAD_CONFIG)})")
    extra = merge_exports(raw_extra)
    res = run(rows, extra, rr, a.seeds, a.only, a.leaky_extra)
    res["leaky_extra"] = a.leaky_extra
    res["seconds"] = round(time.time() - start, 1)
    print()
    print(table(res))
    print(f"\n({res['seconds']} s; {res['rows']} rows, {res['extra_rows']} extra rows"
          + (", all of them in training: leaky)" if a.leaky_extra else ", those of held-out graphs left out)"))
    if a.out:
        Path(a.out).write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
