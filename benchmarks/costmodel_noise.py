"""Noise ceiling of the cost model's ranking metrics (issue 7): what would a perfect model, one that
knows every kernel's true time, score against labels that are single noisy measurements?

    python -m benchmarks.costmodel_noise [--data PATH] [--sims 200] [--seed 0] [--out FILE]
        [--rel 0.0025 0.005 ... 0.05] [--split-seed 0] [--test-fraction 0.25] [--model PKL|none]
        [--repeats EXPORT.jsonl.gz ...] [--bins 8 30]

Note: the recorded medians are taken as the true times t. Each simulation draws labels
y = t * exp(sigma * z), z ~ N(0, 1) independently per measurement, and scores the predictor p = t
against y with `costmodel.evaluate.metrics`'s definitions (pairwise, pairwise_sig, peak@1, peak1_tol,
peak@5, regret), over all groups and over the held-out groups of the split `autofuse retrain` uses
(`split_by_graph` of the usable rows, seed 0, test_fraction 0.25). Noise models (sigma relative):
  within-run  per row, the sigma of a median of `reps` samples from the row's own p10..p90 spread:
              (p90 - p10) / 2.563 / sqrt(reps) * 1.253 / median (normal samples assumed);
  rel X%      one log-normal run-to-run sigma for every row.
Run-to-run noise is not in the data (every (kernel_key, device) is measured once: decision 3 of
ARCHITECTURE.md); the script counts repeats and reports them, so the rel rows are a sensitivity scan.
--repeats adds exports that share kernels (two `benchmarks.collect` runs of one corpus into fresh
folders): their differences give the run-to-run sigma, raw and group-centred (`run_to_run`), overall
and by kernel-time bin (--bins, µs edges), and one more noise model:
  measured repeats  per row, the group-centred run-to-run sigma of its kernel-time bin (the row's
              recorded median picks the bin): what a perfect model scores under the measured noise.
Group-centred: a shift shared by all of a group's kernels in one run (its configs are measured back
to back) does not change their order, so each group's log(a/b) differences are centred on the group's
mean before the sigma is taken; the centring removes one degree of freedom per group, which the
estimator puts back (`centred_sigma`; per bin the group mean is weighted by 1/sigma^2, since a group's
kernels may fall in different bins and a noisy small kernel would otherwise blur its neighbours).
Two biases: the recorded medians already carry noise, so their near-ties are farther apart than the
true times' are, which makes the ceiling optimistic; and noise is drawn independently per row, while
drift shared by a group's configs (measured back to back) cancels in a ranking, so sigma stands for
the independent part only.

`evaluate.metrics` scores one label vector in 0.4 s here (Python loops over ~8,100 candidate pairs), too slow
for hundreds of draws x several noise models; `group_metrics` computes the same group metrics for
many draws at once with numpy, and the first draw of every noise model is checked against
`evaluate.metrics` (`check`), so both must agree to the last bit on the counts and to 1e-12 on means.
"""
from __future__ import annotations

import argparse
import gzip
import json
import math
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from costmodel.evaluate import SIGNIFICANT, TIE, evaluate, metrics, split_by_graph
from costmodel.model import measured_us, usable

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT / "costmodel" / "data" / "h200-2026-11-29.jsonl.gz"
DEFAULT_MODEL = ROOT / "costmodel" / "pretrained" / "cuda-nvidia-h200-sm90.pkl"
GROUP_METRICS = ("pairwise", "pairwise_sig", "peak1", "peak1_tol", "peak5", "regret")
TARGETS = {"pairwise": 0.90, "peak1": 0.90, "peak5": 0.96}
TIE_LEVELS = (0.005, 0.01, 0.02)
Z90 = 2.563  # p90 - p10 of a standard normal
MEDIAN_EFF = 1.253  # sd of a sample median / sd of a sample mean, normal samples


@dataclass(frozen=True)
class Groups:
    """Index structure of `evaluate.metrics`'s groups with >= 2 candidates: the pairs it scores and
    the members of each group (padded with -1), in its order (first appearance, row order within)."""

    pair_i: np.ndarray
    pair_j: np.ndarray
    members: np.ndarray
    sizes: np.ndarray

    @staticmethod
    def of(groups: Sequence[str]) -> "Groups":
        by_group: dict[str, list[int]] = defaultdict(list)
        for i, g in enumerate(groups):
            by_group[g].append(i)
        multi = [ix for ix in by_group.values() if len(ix) >= 2]
        pi = [ix[a] for ix in multi for a in range(len(ix)) for b in range(a + 1, len(ix))]
        pj = [ix[b] for ix in multi for a in range(len(ix)) for b in range(a + 1, len(ix))]
        width = max((len(ix) for ix in multi), default=0)
        members = np.full((len(multi), width), -1, dtype=np.int64)
        for k, ix in enumerate(multi):
            members[k, :len(ix)] = ix
        return Groups(np.array(pi, dtype=np.int64), np.array(pj, dtype=np.int64), members,
                      np.array([len(ix) for ix in multi], dtype=np.int64))


def group_metrics(labels: np.ndarray, predicted: np.ndarray, g: Groups) -> dict[str, np.ndarray]:
    """`evaluate.metrics`'s group metrics of `predicted` against each row of `labels` (draws x kernels)."""
    y = np.atleast_2d(np.asarray(labels, dtype=np.float64))
    p = np.asarray(predicted, dtype=np.float64)
    yi, yj, pi, pj = y[:, g.pair_i], y[:, g.pair_j], p[g.pair_i], p[g.pair_j]
    gap = np.abs(yi - yj) / np.minimum(yi, yj)
    score = np.where(pi == pj, 0.5, ((pi < pj) == (yi < yj)).astype(np.float64))
    scored, sig = gap > TIE, gap > SIGNIFICANT
    pairs, pairs_sig = scored.sum(axis=1), sig.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        pairwise = np.where(pairs > 0, (score * scored).sum(axis=1) / pairs, np.nan)
        pairwise_sig = np.where(pairs_sig > 0, (score * sig).sum(axis=1) / pairs_sig, np.nan)
    n = len(g.sizes)
    if n == 0:
        nan = np.full(len(y), np.nan)
        return dict(pairwise=pairwise, pairwise_sig=pairwise_sig, peak1=nan, peak1_tol=nan, peak5=nan, regret=nan,
                    pairs=pairs, pairs_sig=pairs_sig)
    valid = g.members >= 0
    safe = np.where(valid, g.members, 0)
    pm = np.where(valid, p[safe], np.inf)
    pick = safe[np.arange(n), np.argmin(pm, axis=1)]      # first minimum, as np.argmin(p[ix]) does
    ordered = np.sort(np.where(valid[None], y[:, safe], np.inf), axis=2)
    best = ordered[:, :, 0]
    fifth = np.take_along_axis(ordered, np.minimum(4, g.sizes - 1)[None, :, None], axis=2)[:, :, 0]
    y_pick = y[:, pick]
    return dict(pairwise=pairwise, pairwise_sig=pairwise_sig,
                peak1=(y_pick <= best * (1 + TIE)).mean(axis=1),
                peak1_tol=(y_pick <= best * (1 + SIGNIFICANT)).mean(axis=1),
                peak5=(y_pick <= fifth * (1 + TIE)).mean(axis=1),
                regret=(y_pick / best - 1).mean(axis=1), pairs=pairs, pairs_sig=pairs_sig)


def check(labels: np.ndarray, predicted: np.ndarray, groups: Sequence[str], g: Groups) -> None:
    """Raise unless `group_metrics` agrees with `evaluate.metrics` on one label vector."""
    ref = metrics(labels, predicted, groups)
    got = group_metrics(labels[None], predicted, g)
    for k in (*GROUP_METRICS, "pairs", "pairs_sig"):
        a, b = float(getattr(ref, k)), float(got[k][0])
        if not (a == b or (math.isnan(a) and math.isnan(b)) or abs(a - b) <= 1e-12):
            raise AssertionError(f"group_metrics disagrees with evaluate.metrics on {k}: {b} vs {a}")


def within_run_sigma(rows: Sequence[Mapping[str, Any]]) -> np.ndarray:
    """Relative sigma of each row's median from its own p10..p90 spread over `reps` samples."""
    out = []
    for r in rows:
        s = r["stats"]
        reps = max(1, int(s.get("reps") or 1))
        spread = max(0.0, float(s.get("p90_us", s["median_us"])) - float(s.get("p10_us", s["median_us"])))
        out.append(spread / Z90 / math.sqrt(reps) * MEDIAN_EFF / float(s["median_us"]))
    return np.array(out, dtype=np.float64)


def repeats(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Rows measured more than once (same kernel_key and device), and their relative differences."""
    seen: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in rows:
        if r["stats"].get("median_us"):  # a failed measurement has none
            seen[(str(r.get("kernel_key")), str(r.get("device")))].append(float(r["stats"]["median_us"]))
    twice = [v for v in seen.values() if len(v) > 1]
    diffs = [abs(math.log(v[a] / v[b])) for v in twice for a in range(len(v)) for b in range(a + 1, len(v))]
    return {"keys": len(seen), "measured_more_than_once": len(twice),
            "abs_log_diff_median": float(np.median(diffs)) if diffs else None,
            "sigma_rel_from_repeats": float(np.sqrt(np.mean(np.square(diffs)) / 2)) if diffs else None}


DEFAULT_BINS = (8.0, 30.0)


def _bin_of(us: np.ndarray, edges: Sequence[float]) -> np.ndarray:
    return np.searchsorted(np.asarray(edges, dtype=np.float64), us, side="right")


def _bin_labels(edges: Sequence[float]) -> list[str]:
    e = [0.0, *edges]
    return [f"< {edges[0]:g} us" if k == 0 else f">= {e[k]:g} us" if k == len(edges) else f"{e[k]:g}-{e[k + 1]:g} us"
            for k in range(len(edges) + 1)]


def centred_sigma(d: np.ndarray, groups: np.ndarray, bins: np.ndarray, nbins: int,
                  iters: int = 200) -> tuple[np.ndarray, float | None]:
    """Group-centred run-to-run sigma per bin, and one sigma for all (NaN / None without data).

    Model: d_i = s_g + e_i, e_i ~ N(0, 2 sigma_{bin i}^2) independent, s_g a group's common shift.
    One sigma: r_i = d_i - mean_g(d), sigma^2 = sum r^2 / 2 / sum_g (n_g - 1) (groups of one kernel
    carry nothing). Per bin: a plain group mean would carry a noisy small kernel's error into every
    residual of its group, so the mean is weighted by w_i = 1 / sigma_i^2 and
    sigma_b^2 = sum_{i in b} r_i^2 / 2 / sum_{i in b} (1 - w_i / W_g) (E[r_i^2] = 2 sigma_i^2 (1 - w_i / W_g)
    with the right weights), iterated from equal weights to its fixed point (REML-like). With one
    sigma for all it is the one-sigma formula."""
    _, gi = np.unique(groups, return_inverse=True)
    n = np.bincount(gi)[gi]
    multi = n >= 2
    out = np.full(nbins, np.nan)
    if not multi.any():
        return out, None
    d, gi, bins = d[multi], np.unique(gi[multi], return_inverse=True)[1], bins[multi]
    r = d - (np.bincount(gi, d) / np.bincount(gi))[gi]
    dof = 1 - 1 / np.bincount(gi)[gi]
    one = float(np.sqrt(np.sum(r * r) / 2 / np.sum(dof)))
    present = np.bincount(bins, minlength=nbins) > 0
    var = np.full(nbins, one * one)
    for _ in range(iters):
        w = 1 / np.maximum(var[bins], 1e-12)
        wsum = np.bincount(gi, w)
        r = d - (np.bincount(gi, w * d) / wsum)[gi]
        dof = 1 - w / wsum[gi]
        new = np.bincount(bins, r * r, minlength=nbins) / 2 / np.maximum(np.bincount(bins, dof, minlength=nbins), 1e-300)
        new = np.where(present, new, one * one)
        done = np.allclose(new, var, rtol=1e-9, atol=1e-16)
        var = new
        if done:
            break
    out[present] = np.sqrt(var[present])
    return out, one


def _centre(d: np.ndarray, groups: np.ndarray) -> np.ndarray:
    _, gi = np.unique(groups, return_inverse=True)
    return d - (np.bincount(gi, d) / np.bincount(gi))[gi]


def run_to_run(runs: Sequence[Sequence[Mapping[str, Any]]], edges: Sequence[float] = DEFAULT_BINS,
               boot: int = 200, seed: int = 0) -> dict[str, Any]:
    """Run-to-run sigma (relative, log) from kernels measured in two or more runs (exports).

    For each pair of runs, each shared (kernel_key, device) gives d = log(t_run1 / t_run2) at the
    kernel time sqrt(t1 t2). Raw: sqrt(mean d^2 / 2). Group-centred: d minus its (group, run pair)
    mean, degrees of freedom restored (`centred_sigma`); kernels alone in their group carry no
    information on it. Both overall and per bin of kernel time (`edges`, µs); 90% intervals from
    resampling the groups (`boot` times)."""
    per_run = []
    for rows in runs:
        by_key: dict[tuple[str, str], Mapping[str, Any]] = {}
        for r in usable(rows):
            by_key.setdefault((str(r.get("kernel_key")), str(r.get("device"))), r)
        per_run.append(by_key)
    d, us, grp = [], [], []
    for a in range(len(per_run)):
        for b in range(a + 1, len(per_run)):
            for key in sorted(per_run[a].keys() & per_run[b].keys()):
                ta, tb = (float(per_run[x][key]["stats"]["median_us"]) for x in (a, b))
                d.append(math.log(ta / tb))
                us.append(math.sqrt(ta * tb))
                grp.append(f"{a}:{b}:{per_run[a][key]['features'].get('group')}")
    labels = _bin_labels(edges)
    out: dict[str, Any] = {"pairs": len(d), "bins_us": list(edges), "bin_labels": labels}
    if not d:
        return out
    d_, us_, grp_ = np.array(d), np.array(us), np.array(grp)
    bins = _bin_of(us_, edges)
    nb = len(labels)
    sizes = {g: int(n) for g, n in zip(*np.unique(grp_, return_counts=True))}
    multi = np.array([sizes[g] >= 2 for g in grp_])
    sig_bins, one = centred_sigma(d_, grp_, bins, nb)
    out.update(groups=len(sizes), groups_multi=sum(n >= 2 for n in sizes.values()), pairs_in_multi=int(multi.sum()),
               mean_log_diff=float(d_.mean()),
               sigma_raw=float(np.sqrt(np.mean(d_ ** 2) / 2)),
               sigma_centred_uncorrected=float(np.sqrt(np.sum(_centre(d_, grp_)[multi] ** 2) / 2 / multi.sum()))
               if multi.any() else None,
               sigma_centred=one)
    rng = np.random.default_rng(seed)
    names = np.array(sorted(sizes))
    members = {g: np.flatnonzero(grp_ == g) for g in names}
    boot_all, boot_bins = [], []
    for _ in range(boot):
        pick = rng.integers(0, len(names), len(names))
        ix = np.concatenate([members[names[k]] for k in pick])
        tags = np.concatenate([np.full(len(members[names[k]]), j) for j, k in enumerate(pick)])
        sb, ob = centred_sigma(d_[ix], tags, bins[ix], nb)
        boot_all.append(np.nan if ob is None else ob)
        boot_bins.append(sb)
    q = lambda v, p: float(np.nanquantile(v, p)) if np.isfinite(v).any() else None  # noqa: E731
    out["sigma_centred_ci90"] = [q(np.array(boot_all), 0.05), q(np.array(boot_all), 0.95)]
    bb = np.array(boot_bins).reshape(-1, nb)
    out["bins"] = [{"bin": labels[k], "pairs": int(np.sum(bins == k)), "pairs_in_multi": int(np.sum((bins == k) & multi)),
                    "sigma_raw": float(np.sqrt(np.mean(d_[bins == k] ** 2) / 2)) if np.any(bins == k) else None,
                    "sigma_centred": None if math.isnan(sig_bins[k]) else float(sig_bins[k]),
                    "sigma_centred_ci90": [q(bb[:, k], 0.05), q(bb[:, k], 0.95)]} for k in range(nb)]
    return out


def sigma_by_time(us: np.ndarray, rr: Mapping[str, Any], upper: bool = False) -> np.ndarray:
    """Each kernel's run-to-run sigma from its time: its bin's group-centred sigma (`run_to_run`), or
    the overall group-centred sigma for a bin without data; `upper`: the bins' upper 90% bounds."""
    def pick(b: Mapping[str, Any]) -> float:
        v = b["sigma_centred_ci90"][1] if upper else b["sigma_centred"]
        return v if v is not None else (rr["sigma_centred_ci90"][1] if upper else rr["sigma_centred"])
    per_bin = np.array([pick(b) for b in rr["bins"]], dtype=np.float64)
    return per_bin[_bin_of(np.asarray(us, dtype=np.float64), rr["bins_us"])]


def tie_structure(t: np.ndarray, g: Groups) -> dict[str, Any]:
    """Share of groups whose second-best recorded time is within each level of the best, and the mean
    number of a group's configs within that level of its best (the best included)."""
    if not len(g.sizes):
        return {"groups": 0}
    valid = g.members >= 0
    y = np.sort(np.where(valid, t[np.where(valid, g.members, 0)], np.inf), axis=1)
    out: dict[str, Any] = {"groups": int(len(g.sizes))}
    for lv in TIE_LEVELS:
        out[f"second_within_{lv:g}"] = float(np.mean(y[:, 1] <= y[:, 0] * (1 + lv)))
        out[f"configs_within_{lv:g}"] = float(np.mean(np.sum(y <= y[:, :1] * (1 + lv), axis=1)))
    return out


def summarize(values: np.ndarray) -> dict[str, float]:
    v = np.asarray(values, dtype=np.float64)
    return {"mean": float(np.nanmean(v)), "p5": float(np.nanpercentile(v, 5)), "p95": float(np.nanpercentile(v, 95))}


def load(path: str | Path) -> list[Mapping[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def run(rows: Sequence[Mapping[str, Any]], sims: int = 200, seed: int = 0, rel: Sequence[float] = (0.005, 0.01, 0.02),
        split_seed: int = 0, test_fraction: float = 0.25, model: Any = None,
        runs: Sequence[Sequence[Mapping[str, Any]]] = (), bins: Sequence[float] = DEFAULT_BINS) -> dict[str, Any]:
    """The ceiling of a perfect predictor under each noise model, on all groups and on the held-out ones.
    `runs`: more exports (see `run_to_run`); with them, `rows` and `runs` give the measured run-to-run
    sigma and the "measured repeats" noise model."""
    rr = run_to_run([rows, *runs], bins) if runs else None
    rep = repeats([*rows, *(r for run_ in runs for r in run_)]) if runs else None
    rows = usable(rows)
    _, held = split_by_graph(rows, test_fraction, split_seed)
    held_graphs = {str(r["features"].get("graph")) for r in held}
    held_mask = np.array([str(r["features"].get("graph")) in held_graphs for r in rows])
    t = measured_us(rows)
    groups = [str(r["features"].get("group")) for r in rows]
    sets = {"all": np.arange(len(rows)), "heldout": np.flatnonzero(held_mask)}
    index = {name: (ix, [groups[i] for i in ix], Groups.of([groups[i] for i in ix])) for name, ix in sets.items()}
    sig_a = within_run_sigma(rows)
    noise = {"within-run": sig_a}
    if rr is not None and rr.get("sigma_centred") is not None:
        noise["measured repeats"] = sigma_by_time(t, rr)
        noise["measured repeats, bins' upper 90% bound"] = sigma_by_time(t, rr, upper=True)
        for name, ix in sets.items():
            rr.setdefault("rows_by_bin", {})[name] = np.bincount(_bin_of(t[ix], rr["bins_us"]),
                                                                 minlength=len(rr["bins"])).tolist()
    noise.update({f"rel {x * 100:g}%": np.full(len(rows), x) for x in rel})
    z = np.random.default_rng(seed).standard_normal((sims, len(rows)))
    out: dict[str, Any] = {
        "data": {"rows": len(rows), "graphs": len({str(r["features"].get("graph")) for r in rows}),
                 "heldout_rows": int(held_mask.sum()), "heldout_graphs": len(held_graphs),
                 "split_seed": split_seed, "test_fraction": test_fraction, "sims": sims, "seed": seed},
        "within_run_sigma_rel": {"p10": float(np.quantile(sig_a, 0.1)), "median": float(np.median(sig_a)),
                                 "mean": float(np.mean(sig_a)), "p90": float(np.quantile(sig_a, 0.9))},
        "repeats": rep or repeats(rows),
        "ties": {name: tie_structure(t[ix], g) for name, (ix, _, g) in index.items()},
        "groups": {name: {"groups": int(len(g.sizes)), "pairs": int(len(g.pair_i))} for name, (_, _, g) in index.items()},
        "ceiling": {},
    }
    if rr is not None:
        out["run_to_run"] = rr
    for label, sigma in noise.items():
        y = t * np.exp(sigma * z)
        out["ceiling"][label] = {}
        for name, (ix, gs, g) in index.items():
            check(y[0, ix], t[ix], gs, g)
            res = group_metrics(y[:, ix], t[ix], g)
            out["ceiling"][label][name] = {k: summarize(res[k]) for k in (*GROUP_METRICS, "pairs", "pairs_sig")}
    if model is not None:
        from costmodel.predict import LearnedPredictor
        m = evaluate(LearnedPredictor(model), held)
        out["model"] = {"version": getattr(model, "version", "?"), "heldout": m.to_json()}
    return out


def _cell(s: Mapping[str, float]) -> str:
    return f"{s['mean']:.3f} [{s['p5']:.3f}, {s['p95']:.3f}]"


def table(res: Mapping[str, Any], name: str) -> str:
    """Markdown: one row per noise model (mean [5%, 95%] over the simulations), the shipped model's
    single-measurement score and the targets below the held-out one."""
    cols = [("pairwise", "pairwise"), ("pairwise_sig", "pw >2%"), ("peak1", "peak@1"), ("peak1_tol", "peak@1 (2%)"),
            ("peak5", "peak@5"), ("regret", "regret")]
    lines = [f"| perfect model, {name} | " + " | ".join(c for _, c in cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for label, by_set in res["ceiling"].items():
        lines.append(f"| {label} | " + " | ".join(_cell(by_set[name][k]) for k, _ in cols) + " |")
    if name == "heldout" and res.get("model"):
        m = res["model"]["heldout"]
        lines.append(f"| shipped {res['model']['version']}, recorded labels | "
                     + " | ".join("-" if m.get(k) is None else f"{m[k]:.3f}" for k, _ in cols) + " |")
    if name == "heldout":
        lines.append("| issue 7 target | " + " | ".join(f">= {TARGETS[k]:.2f}" if k in TARGETS else "" for k, _ in cols) + " |")
    return "\n".join(lines)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:.2f}%"


def _run_to_run_lines(rr: Mapping[str, Any] | None) -> list[str]:
    if not rr or not rr.get("pairs"):
        return [] if rr is None else ["run-to-run: no kernel measured in two runs"]
    lo, hi = rr["sigma_centred_ci90"]
    lines = [f"run-to-run (kernels in two runs): {rr['pairs']} pairs in {rr['groups']} groups; mean log(a/b) "
             f"{rr['mean_log_diff'] * 100:+.2f}%; raw sigma {_pct(rr['sigma_raw'])}; group-centred ({rr['groups_multi']} "
             f"groups, {rr['pairs_in_multi']} pairs with >= 2 shared kernels) {_pct(rr['sigma_centred'])} "
             f"[90%: {_pct(lo)}, {_pct(hi)}] ({_pct(rr['sigma_centred_uncorrected'])} before the degrees-of-freedom correction)",
             "", "| kernel time | pairs | in groups >= 2 | raw sigma | group-centred sigma [90%] |", "|---|---|---|---|---|"]
    for k, b in enumerate(rr["bins"]):
        lo, hi = b["sigma_centred_ci90"]
        lines.append(f"| {b['bin']} | {b['pairs']} | {b['pairs_in_multi']} | {_pct(b['sigma_raw'])} | "
                     f"{_pct(b['sigma_centred'])} [{_pct(lo)}, {_pct(hi)}] |")
    if rr.get("rows_by_bin"):
        lines.append("\n--data rows per bin (all / held out): " + ", ".join(
            f"{lab} {a} / {h}" for lab, a, h in zip(rr["bin_labels"], rr["rows_by_bin"]["all"], rr["rows_by_bin"]["heldout"])))
    return lines


def report(res: Mapping[str, Any]) -> str:
    d, s, rp = res["data"], res["within_run_sigma_rel"], res["repeats"]
    parts = [f"data: {d['rows']} usable rows, {d['graphs']} graphs; held out (split seed {d['split_seed']}, "
             f"fraction {d['test_fraction']}): {d['heldout_rows']} rows, {d['heldout_graphs']} graphs; "
             f"{d['sims']} simulations, seed {d['seed']}",
             f"groups >= 2 / candidate pairs (before the 1% tie rule): all {res['groups']['all']['groups']} / {res['groups']['all']['pairs']}, "
             f"held out {res['groups']['heldout']['groups']} / {res['groups']['heldout']['pairs']}",
             f"within-run sigma of a median (relative): p10 {s['p10'] * 100:.2f}%, median {s['median'] * 100:.2f}%, "
             f"mean {s['mean'] * 100:.2f}%, p90 {s['p90'] * 100:.2f}%",
             f"repeat measurements (same kernel_key + device): {rp['measured_more_than_once']} of {rp['keys']} keys"
             + ("" if rp["sigma_rel_from_repeats"] is None else f", sigma from their differences {rp['sigma_rel_from_repeats'] * 100:.2f}%"),
             *_run_to_run_lines(res.get("run_to_run")),
             "", "Tie structure (groups with >= 2 configs, recorded medians):", "",
             "| groups | n | 2nd best within 0.5% | within 1% | within 2% | configs within 0.5% / 1% / 2% of best |",
             "|---|---|---|---|---|---|"]
    for name, tie in res["ties"].items():
        if tie.get("groups"):
            parts.append(f"| {name} | {tie['groups']} | " + " | ".join(f"{tie[f'second_within_{lv:g}']:.3f}" for lv in TIE_LEVELS)
                         + " | " + " / ".join(f"{tie[f'configs_within_{lv:g}']:.2f}" for lv in TIE_LEVELS) + " |")
    for name in ("heldout", "all"):
        parts += ["", table(res, name)]
    return "\n".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.costmodel_noise", description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(DEFAULT_DATA), help="measurements, jsonl.gz (default: the H200 data)")
    ap.add_argument("--sims", type=int, default=200, help="noisy label draws per noise model")
    ap.add_argument("--seed", type=int, default=0, help="seed of the noise draws")
    ap.add_argument("--rel", type=float, nargs="+", default=[0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05],
                    help="relative run-to-run sigmas to scan (log-normal)")
    ap.add_argument("--split-seed", type=int, default=0, help="seed of the held-out split (retrain's default 0)")
    ap.add_argument("--test-fraction", type=float, default=0.25)
    ap.add_argument("--model", default=str(DEFAULT_MODEL), help="cost model pickle scored on the held-out graphs "
                                                                 "for comparison, or 'none'")
    ap.add_argument("--out", default=None, help="write the results as JSON here (default: stdout only)")
    ap.add_argument("--repeats", nargs="*", default=[], help="more measurement exports (e.g. two `benchmarks.collect` "
                    "runs of one corpus into fresh folders): kernels they share with each other or with --data "
                    "give the run-to-run sigma directly")
    ap.add_argument("--bins", type=float, nargs="+", default=list(DEFAULT_BINS),
                    help="kernel-time bin edges (µs) of the run-to-run sigma and the measured-repeats noise model")
    a = ap.parse_args(argv)
    start = time.time()
    model = None
    if a.model != "none" and Path(a.model).exists():
        from costmodel.model import CostModel
        model = CostModel.from_bytes(Path(a.model).read_bytes())
    rows = load(a.data)
    res = run(rows, a.sims, a.seed, a.rel, a.split_seed, a.test_fraction, model,
              runs=[load(f) for f in a.repeats], bins=a.bins)
    res["seconds"] = round(time.time() - start, 1)
    print(report(res))
    print(f"\n({res['seconds']} s)")
    if a.out:
        Path(a.out).write_text(json.dumps(res, indent=1) + "\n")
        print(f"wrote {a.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
