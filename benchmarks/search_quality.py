"""Search quality: does model-guided search reach, with few measured trials,
the plan that a long unguided search finds, and does the model alone, measuring nothing, come close?

    python3 -m benchmarks.search_quality [--cases NAME ...] [--programs NAME ...] [--categories CAT ...]
        [--out DIR] [--budget SECONDS]
        [--ref-trials 32] [--ref-top-k 16] [--ref-explore 1.0] [--guided-trials 8 32]
        [--model-only-trials 32] [--max-candidates N] [--guided-refine 0 [24]] [--rounds 5] [--reps 50]

Cases are the suite's (`benchmarks/cases.py`, five by default) and, with --programs / --categories,
programs of the broad corpus (`benchmarks/programs/`, run without gradients).

Per case, four searches, each in a fresh tuning DB (so "kernels measured" counts everything):
  model only    — the learned cost model's predictions alone pick the plan and the configs, no
                  kernel measured: the package's no-GPU path (graph_tuner.default_benchmarker's
                  PredictingBenchmarker over the tuner's own predictor), forced on the GPU;
  guided 8, 32  — the learned cost model (the package's default predictor), 8 and 32 trials,
                  the default top-k and exploration share; the model's ranking alone decides what
                  is measured (no refine). With --guided-refine R (R > 0) also "guided 8 refine R"
                  and "guided 32 refine R": the same, then up to R one-knob neighbours of each
                  kernel's fastest measured config, best predicted first: the kernel search of
                  `autofuse tune` (KernelTuneSettings.refine, 24), which the claims are about;
  unguided long — byte-count ranking (it cannot tell configs apart), many trials, a wide kernel
                  search (top-k large, all of it drawn at random): the reference best plan.
Then the stored winners (and the default plan, for context) are compiled with
`autofuse.compile(fn, db=..., on_miss="error")`, checked against eager, and re-timed side by side
in interleaved rounds with benchmarks.run's CUDA-event timer, so every number compares alike.
The claims hold for a case when guided 8 is within 5% of the reference, guided 32 within 1%, and
model only ("without a GPU, the model's first pick") within 10%.

Note: --budget (seconds) is split over the cases still to run (quick cases first, so what they leave
goes to the slow ones), and within a case over the searches by weight. The model-only search runs
first and is never cut short: its trials cost predictions and a correctness run of each kernel's
default and predicted-best configs, nothing is timed, and its claim is the model's pick, not a time
(cut by it, softmax's, the first case, stops at 15 of 32 trials; the time it takes still
comes out of its case's budget); the guided searches next: they stop
at their few trials, and the reference gets all the time they leave (and the compile caches they
warmed). A search cut short by its budget is marked so. Results (results.json, results.md) are
rewritten after every search, so a run killed at its time limit keeps what it finished. The core
(`run_all`, `run_case`) takes the benchmarker, the re-timer and the predictors as arguments: tests
drive it on the CPU with a fake timer.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import math
import platform
import statistics
import subprocess
import sys
import time
import traceback
import warnings
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import torch

from autofuse.search.candidates import DEFAULT_CANDIDATES
from autofuse.search.settings import KernelTuneSettings

PredictorFactory = Callable[[Any, str], Any]          # (tuning DB, device key) -> predictor
Retimer = Callable[[Any, tuple, list["Contender"]], dict[str, list[float]]]  # µs per round, by name
DEFAULT_CASES = ("softmax_f32_16384x4096", "rmsnorm_bf16_32768x4096", "layernorm_bf16_32768x4096",
                 "cross_entropy_bf16_8192x32000")   # quick ones first: what they leave goes to the later ones
REFERENCE = "unguided long"
DEFAULT_PLAN = "default plan"
MODEL_ONLY = "model only"
MIN_CASE_S = 20.0      # a case is skipped when less than this is left of the budget
MIN_SEARCH_S = 4.0     # no search gets less than this
RETIME_SHARE = 0.12    # of a case's budget kept for compiling and re-timing the winners


@dataclass(frozen=True)
class Variant:
    """One search of a case: which predictor ranks, how many trials, how wide each kernel's search is,
    and whether kernels are measured at all (measures=False: times are the predictor's, as without a GPU)."""

    name: str
    predictor: str                  # "byte-count" | "learned" (a key of the predictor factories)
    trials: int
    kernel: KernelTuneSettings = KernelTuneSettings()
    target: float | None = None     # the ratio to the reference it must reach (1.05: within 5%)
    weight: float = 1.0             # share of the case's search budget
    measures: bool = True

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "predictor": self.predictor, "trials": self.trials, "kernel": asdict(self.kernel),
                "target": self.target, "weight": self.weight, "measures": self.measures}


def default_variants(ref_trials: int = 32, ref_top_k: int = 16, ref_explore: float = 1.0,
                     guided_trials: Sequence[int] = (8, 32), model_only_trials: int = 32,
                     max_candidates: int | None = None,
                     guided_refine: Sequence[int] = (0,)) -> list[Variant]:
    """In the order they run: the model-only search (no measurement, must reach 10%; 0 trials leaves
    it out), the guided searches (≤ 8 trials must reach 5%, longer ones 1%), then the
    reference, which gets whatever the others left of the case's search budget. `max_candidates`:
    how many configs of each kernel the model ranks in the model-only and guided searches (None: the
    tuner's own, `kernels.candidate_limit`; the reference keeps DEFAULT_CANDIDATES: byte counts cannot
    tell more configs apart, and the reference stays the one of earlier runs). `guided_refine`:
    one set of guided searches per value, each measuring up to that many neighbours of a kernel's
    fastest measured config after its ranked top-k (0: the ranking alone, named "guided N")."""
    roots = [math.sqrt(n) for n in guided_trials]
    guided = KernelTuneSettings(refine=0, max_candidates=max_candidates)   # the model's ranking alone decides what is measured
    out = [Variant(MODEL_ONLY, "learned", model_only_trials, guided, 1.10, 0.2, measures=False)
           ] if model_only_trials > 0 else []
    for refine in guided_refine:
        name = "guided {}" + (f" refine {refine}" if refine else "")
        out += [Variant(name.format(n), "learned", n, replace(guided, refine=refine), 1.05 if n <= 8 else 1.01,
                        0.6 * r / sum(roots) / len(guided_refine))
                for n, r in zip(guided_trials, roots)]
    out.append(Variant(REFERENCE, "byte-count", ref_trials,
                       KernelTuneSettings(top_k=ref_top_k, explore=ref_explore, max_candidates=DEFAULT_CANDIDATES),
                       None, 0.4 if out else 1.0))
    return out


def default_factories() -> dict[str, PredictorFactory]:
    from autofuse.search import graph_tuner
    from costmodel.predict import ByteCountPredictor
    learned = graph_tuner.load_predictor       # the package's own: DB model, else the pretrained one
    return {"byte-count": lambda db, dev: ByteCountPredictor(), "learned": learned}


class PredictorProbe:
    """Wraps a search's predictor: what it turned out to be, and whether a learned model failed and
    fell back to byte counts (costmodel.predict warns when it does) — that would void the comparison."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.calls, self.problems = inner, 0, []

    @property
    def ranks_configs(self) -> bool:
        return bool(getattr(self.inner, "ranks_configs", False))

    def predict_us(self, records: Sequence[dict]) -> list[float]:
        self.calls += 1
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = self.inner.predict_us(records)
        for w in caught:
            msg = str(w.message)
            if "cost model" in msg and msg[:300] not in self.problems:
                self.problems.append(msg[:300])
        return out

    def describe(self) -> str:
        p = self.inner
        with warnings.catch_warnings(record=True):
            p = p.resolve() if hasattr(p, "resolve") else p
        model = getattr(p, "model", None)
        return f"learned {getattr(model, 'version', '?')}" if model is not None else type(p).__name__


@contextlib.contextmanager
def searching_with(factory: PredictorFactory, measures: bool = True):
    """The search loads its predictor through graph_tuner.load_predictor, and picks its benchmarker
    through graph_tuner.default_benchmarker (CUDA events on a GPU, the predictor's times without
    one); swap them for one search. measures=False takes the no-GPU choice on any device, so the
    search is the package's own without a GPU, kernels run (natively) only to be checked."""
    from autofuse.measure.timing import PredictingBenchmarker
    from autofuse.search import graph_tuner
    old = graph_tuner.load_predictor, graph_tuner.default_benchmarker
    graph_tuner.load_predictor = factory
    if not measures:
        graph_tuner.default_benchmarker = lambda args, predictor: PredictingBenchmarker(predictor)
    try:
        yield
    finally:
        graph_tuner.load_predictor, graph_tuner.default_benchmarker = old


def _err(e: BaseException) -> str:
    msg = str(e).strip().splitlines()
    return f"{type(e).__name__}: {msg[0][:300] if msg else ''}"


def run_search(fn: Callable[..., Any], args: tuple, v: Variant, db_path: Path, budget_s: float,
               factory: PredictorFactory, benchmarker: Any = None, seed: int = 0) -> dict[str, Any]:
    """One search in a fresh DB; what it did and what it stored. A variant that measures nothing
    ignores `benchmarker` (an injected one would take the place of the predicting one)."""
    import autofuse
    from autofuse.search.graph_tuner import TuneSettings
    for p in db_path.parent.glob(db_path.name + "*"):
        p.unlink()                                       # fresh: nothing measured before
    probes: list[PredictorProbe] = []

    def make(db: Any, dev: str) -> PredictorProbe:
        probes.append(PredictorProbe(factory(db, dev)))
        return probes[-1]

    out: dict[str, Any] = {**v.describe(), "db": str(db_path), "budget_s": round(budget_s, 1)}
    settings = TuneSettings(trials=v.trials, time_budget=budget_s if v.measures else None, db=str(db_path), seed=seed,
                            progress=False,
                            compare_torch_compile=False, kernel=v.kernel)
    t0 = time.monotonic()
    try:
        with searching_with(make, v.measures):
            res = autofuse.tune(fn, args, settings=settings, benchmarker=benchmarker if v.measures else None)
    except Exception as e:  # noqa: BLE001 - a failed search is reported; the others still run
        out.update(error=_err(e), seconds=round(time.monotonic() - t0, 1), traceback=traceback.format_exc()[-2000:])
        return out
    graphs = res.graphs
    tuned = [next((r.us for r in g.rows if r.variant == "autofuse tuned"), None) for g in graphs]
    out.update(
        seconds=round(time.monotonic() - t0, 1),
        graphs=len(graphs),
        trials=max((g.trials for g in graphs), default=0),            # per graph: the claim's unit
        trials_per_graph=[g.trials for g in graphs],
        kernels_measured=sum(g.new_measurements for g in graphs),
        cut_by_budget=any(g.trials < v.trials for g in graphs),
        stored=all(g.stored_id is not None for g in graphs) and bool(graphs),
        measured=res.measured,                                        # False: every time was a prediction
        source=sorted({g.source for g in graphs}),
        tune_us=sum(tuned) if tuned and all(t is not None for t in tuned) else None,
        why=[g.why for g in graphs],
        failures=sum(len(g.failures) for g in graphs),
        interrupted=res.interrupted,
        plans=[g.plan.to_json() for g in graphs],
        predictor_used=sorted({p.describe() for p in probes}),
        predictor_calls=sum(p.calls for p in probes),
        predictor_problems=[m for p in probes for m in p.problems][:5],
    )
    return out


@dataclass
class Contender:
    """A stored plan (or the default one) compiled as a user gets it, checked against eager."""

    name: str
    fn: Callable[..., Any] | None
    artifacts: list[Any] = field(default_factory=list)    # CompiledArtifacts of each graph
    error: str | None = None

    @property
    def kernels(self) -> int:
        return sum(1 for a in self.artifacts for k in a.kernels if k.kind != "fallback")


def compile_contenders(fn: Callable[..., Any], args: tuple, expected: Any, dbs: Mapping[str, Path],
                       with_default: bool = True) -> list[Contender]:
    import autofuse
    from autofuse.api import Recorder
    from autofuse.measure.verify import compare
    torch._dynamo.reset()
    builds: dict[str, tuple[dict[str, Any], str | None]] = {n: ({"db": str(p), "on_miss": "error"}, "tuning DB")
                                                           for n, p in dbs.items()}
    if with_default:
        builds[DEFAULT_PLAN] = ({"strategy": "inductor"}, None)
    out: list[Contender] = []
    for name, (kw, want_source) in builds.items():
        rec = Recorder()
        c = Contender(name, None)
        try:
            f = autofuse.compile(fn, recorder=rec, **kw)
            with torch.no_grad():
                why = compare(f(*args), expected)
            c.artifacts = [a for _, _, a in rec.graphs]
            sources = {a.source for a in c.artifacts}
            if why:
                c.error = f"wrong: {why}"
            elif not c.artifacts:
                c.error = "compiled no graph"
            elif want_source and sources != {want_source}:
                c.error = f"plan not read from the tuning DB ({sorted(sources)})"
            else:
                c.fn = f
        except Exception as e:  # noqa: BLE001 - reported in the table
            c.error = _err(e)
        out.append(c)
    return out


def split(left_s: float, weight: float, weights_left: float) -> float:
    """This search's share of what is left of the case's search budget."""
    return max(MIN_SEARCH_S, left_s * weight / max(weights_left, 1e-9))


def run_case(name: str, fn: Callable[..., Any], args: tuple, variants: Sequence[Variant], workdir: Path,
             budget_s: float, *, factories: Mapping[str, PredictorFactory], retime: Retimer,
             benchmarker_for: Callable[[Variant], Any] = lambda v: None, seed: int = 0,
             on_progress: Callable[[dict[str, Any]], None] = lambda row: None) -> dict[str, Any]:
    """The case's searches in the given order, then the stored winners re-timed side by side."""
    from autofuse.report import nbytes
    t0 = time.monotonic()
    with torch.no_grad():
        expected = fn(*args)
    row: dict[str, Any] = {"case": name, "budget_s": round(budget_s, 1),
                           "min_bytes": nbytes(args) + nbytes(expected),
                           "searches": [], "retimed": {}, "rows": []}
    search_end = t0 + budget_s * (1 - RETIME_SHARE)
    workdir.mkdir(parents=True, exist_ok=True)
    for i, v in enumerate(variants):
        share = split(search_end - time.monotonic(), v.weight, sum(w.weight for w in variants[i:]))
        db = workdir / (v.name.replace(" ", "_") + ".db")
        print(f"[{name}] {v.name}: {v.trials} trials, " + (f"top_k {v.kernel.top_k}, explore {v.kernel.explore}, "
              if v.measures else "nothing measured, ") + f"{v.predictor} ranking, {share:.0f} s", flush=True)
        s = run_search(fn, args, v, db, share, factories[v.predictor], benchmarker_for(v), seed)
        print(f"[{name}] {v.name}: " + (s["error"] if "error" in s else
              f"{s['trials']} trials, {s['kernels_measured']} kernels measured, {s['seconds']} s, "
              f"tuner's own time {s['tune_us']} us, predictor {s['predictor_used']}"), flush=True)
        row["searches"].append(s)
        on_progress(row)
    dbs = {s["name"]: Path(s["db"]) for s in row["searches"] if s.get("stored")}
    contenders = compile_contenders(fn, args, expected, dbs)
    ok = [c for c in contenders if c.error is None]
    try:
        rounds = retime(fn, args, ok) if ok else {}
    except Exception as e:  # noqa: BLE001 - the searches' results are still worth keeping
        rounds, row["retime_error"] = {}, _err(e)
    for c in contenders:
        r = rounds.get(c.name, [])
        row["retimed"][c.name] = {"us": statistics.median(r) if r else None, "rounds_us": r, "kernels": c.kernels,
                                  "error": c.error}
    row["rows"] = summarize(variants, row)
    row["seconds"] = round(time.monotonic() - t0, 1)
    return row


def summarize(variants: Sequence[Variant], row: dict[str, Any]) -> list[dict[str, Any]]:
    """One line per search (and the default plan): re-timed µs, ratio to the reference, the verdict."""
    ref = row["retimed"].get(REFERENCE, {}).get("us")
    searches = {s["name"]: s for s in row["searches"]}
    out = []
    for v in sorted(variants, key=lambda v: v.name != REFERENCE):
        s, t = searches.get(v.name, {}), row["retimed"].get(v.name, {})
        us = t.get("us")
        ratio = us / ref if us is not None and ref else None
        rounds = t.get("rounds_us") or []
        out.append({"variant": v.name, "predictor": v.predictor, "trials_asked": v.trials, "trials": s.get("trials"),
                    "kernels_measured": s.get("kernels_measured"), "seconds": s.get("seconds"),
                    "cut_by_budget": s.get("cut_by_budget"), "us": us, "tuner_us": s.get("tune_us"),
                    "spread_pct": 100 * (max(rounds) - min(rounds)) / us if us and len(rounds) > 1 else None,
                    "kernels": t.get("kernels"), "ratio": ratio, "target": v.target,
                    "within": None if v.target is None or ratio is None else ratio <= v.target,
                    "note": s.get("error") or t.get("error") or _predictor_warning(v, s)})
    d = row["retimed"].get(DEFAULT_PLAN)
    if d is not None:
        out.append({"variant": DEFAULT_PLAN, "predictor": "", "us": d["us"], "kernels": d["kernels"],
                    "ratio": d["us"] / ref if d["us"] is not None and ref else None, "target": None, "within": None,
                    "note": d.get("error") or ""})
    return out


def _predictor_warning(v: Variant, s: dict[str, Any]) -> str:
    """A guided search that did not rank with the learned model measures nothing of interest: say so."""
    if v.predictor != "learned":
        return ""
    if s.get("predictor_problems"):
        return f"learned model failed: {s['predictor_problems'][0][:80]}"
    if any(p == "ByteCountPredictor" for p in s.get("predictor_used", [])):
        return "no learned model for this device: ranked by byte counts"
    return ""


def markdown(results: dict[str, Any]) -> str:
    lines = [f"Search quality. Device: {results.get('device')}; torch {results.get('torch')}, "
             f"triton {results.get('triton')}, optuna {results.get('optuna')}, scikit-learn {results.get('sklearn')}; "
             f"{results.get('date')}; budget {results.get('budget_s')} s; learned model "
             f"{results.get('model', {}).get('version')}.", "",
             "| case | search | ranking | trials | kernels measured | search s | µs (re-timed) | × unguided | "
             "kernels | goal | met |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    verdicts: dict[str, list[bool]] = {}
    for case in results["cases"]:
        if case.get("skipped"):
            lines.append(f"| {case['case']} | skipped: {case['skipped']} | | | | | | | | | |")
            continue
        for r in case["rows"]:
            trials = "" if r.get("trials_asked") is None else f"{r.get('trials')}/{r['trials_asked']}" + (
                " (budget)" if r.get("cut_by_budget") else "")
            us = "—" if r.get("us") is None else f"{r['us']:.1f}" + (
                f" ±{r['spread_pct']:.1f}%" if r.get("spread_pct") is not None else "")
            ratio = "—" if r.get("ratio") is None else f"{r['ratio']:.3f}"
            goal = "" if r.get("target") is None else f"≤ {r['target']:.2f}"
            met = {True: "yes", False: "NO", None: ""}[r.get("within")]
            if r.get("target") is not None:
                verdicts.setdefault(f"{r['variant']} {goal}", []).append(bool(r.get("within")))
            note = f" {r['note'][:60]}" if r.get("note") else ""
            lines.append(f"| {case['case']} | {r['variant']} | {r.get('predictor', '')} | {trials} | "
                         f"{r.get('kernels_measured') if r.get('kernels_measured') is not None else ''} | "
                         f"{r.get('seconds') if r.get('seconds') is not None else ''} | {us}{note} | {ratio} | "
                         f"{r.get('kernels') if r.get('kernels') is not None else ''} | {goal} | {met} |")
    if verdicts:
        lines.append("")
        lines.append("Met: " + "; ".join(f"{k}: {sum(v)}/{len(v)} cases" for k, v in verdicts.items()) +
                     ". Re-timed: the stored winners compiled with autofuse.compile, median of interleaved rounds "
                     "(± spread over rounds).")
    return "\n".join(lines) + "\n"


def write(results: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=1, default=str))
    (out / "results.md").write_text(markdown(results))


def run_all(cases: Sequence[Any], variants: Sequence[Variant], out: Path, budget_s: float, *, device: str,
            factories: Mapping[str, PredictorFactory], retime: Retimer,
            benchmarker_for: Callable[[Variant], Any] = lambda v: None, meta: Mapping[str, Any] | None = None,
            seed: int = 0, scale: float = 1.0) -> dict[str, Any]:
    """Every case in turn on `device`, the budget split over the cases left; results written as they come."""
    start = time.monotonic()
    results: dict[str, Any] = {**(meta or {}), "budget_s": budget_s, "seed": seed,
                               "variants": [v.describe() for v in variants], "cases": []}
    write(results, out)
    for i, case in enumerate(cases):
        left = budget_s - (time.monotonic() - start)
        if left < MIN_CASE_S:
            results["cases"].append({"case": case.name, "skipped": f"budget spent ({left:.0f} s left)"})
            write(results, out)
            continue
        partial = {"case": case.name, "rows": [], "searches": []}
        results["cases"].append(partial)
        try:
            fn, args = case.build(device, scale)

            def progress(row: dict[str, Any]) -> None:
                results["cases"][-1] = {**row, "rows": summarize(variants, row), "partial": True}
                write(results, out)

            row = run_case(case.name, fn, args, variants, out / "dbs" / case.name, left / (len(cases) - i),
                           factories=factories, retime=retime, benchmarker_for=benchmarker_for, seed=seed,
                           on_progress=progress)
            results["cases"][-1] = row
        except Exception as e:  # noqa: BLE001 - one case failing does not stop the others
            results["cases"][-1] = {**partial, "error": _err(e), "traceback": traceback.format_exc()[-2000:]}
        finally:
            fn = args = None
            torch._dynamo.reset()
            if device.startswith("cuda"):
                torch.cuda.empty_cache()
        write(results, out)
    results["seconds"] = round(time.monotonic() - start, 1)
    write(results, out)
    return results


def program_case(program: Any) -> Any:
    """A broad-corpus program (`benchmarks.programs`) as a search-quality case: its module run
    without gradients, as the corpus runs it; a scale below 1 builds its CPU sizes."""
    from .cases import Case

    def build(device: str, scale: float) -> tuple[Callable[..., Any], tuple]:
        module, args = program.make(device, shrink=scale < 1.0)

        def fn(*xs: Any) -> Any:
            with torch.no_grad():
                return module(*xs)
        return fn, args
    return Case(program.name, build)


def select_cases(names: Sequence[str], programs: Sequence[str], categories: Sequence[str]) -> list[Any]:
    """Suite cases by name, then corpus programs by name and by category; ValueError names the unknown."""
    from .cases import CASES
    from .programs import categories as corpus_categories
    from .programs import PROGRAMS, select
    unknown = [c for c in names if c not in {k.name for k in CASES}]
    unknown += [c for c in categories if c not in corpus_categories()]
    known = {p.name for p in PROGRAMS}
    picked = (select(names=[n for n in programs if n in known]) if programs else []) + \
        (select(only=list(categories)) if categories else [])
    picked = list({p.name: p for p in picked}.values())
    unknown += [n for n in programs if n not in {p.name for p in picked}]
    if unknown:
        raise ValueError(f"unknown cases, programs or categories: {unknown}")
    return [next(k for k in CASES if k.name == n) for n in names] + [program_case(p) for p in picked]


def cuda_retimer(reps: int, rounds: int) -> Retimer:
    """benchmarks.run's timer (CUDA events, calls queued back to back, inputs rotated past the L2),
    the contenders interleaved within each round so drift hits them alike."""
    from autofuse.report import nbytes

    from .run import input_set_count, time_fn

    def retime(fn: Callable[..., Any], args: tuple, contenders: list[Contender]) -> dict[str, list[float]]:
        with torch.no_grad():
            out = fn(*args)
        min_bytes = nbytes(args) + nbytes(out)
        sets = input_set_count(min_bytes, 8)
        input_sets = [args] + [tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)
                               for _ in range(sets - 1)]
        times: dict[str, list[float]] = {c.name: [] for c in contenders}
        with torch.no_grad():
            for _ in range(rounds):
                for c in contenders:
                    times[c.name].append(1e3 * time_fn(c.fn, input_sets, reps))
        return times
    return retime


def _version(module: str) -> str | None:
    try:
        return __import__(module).__version__
    except Exception:  # noqa: BLE001
        return None


def model_info(device_key: str) -> dict[str, Any]:
    """The learned model the guided and model-only searches will load for this device (fresh DBs: the
    pretrained one)."""
    from costmodel.predict import pretrained_path
    path = pretrained_path(device_key)
    info: dict[str, Any] = {"path": str(path), "exists": path.is_file()}
    meta = path.with_suffix(".json")
    if meta.is_file():
        m = json.loads(meta.read_text())
        info.update(version=m.get("version"), heldout=m.get("metrics", {}).get("heldout"),
                    trained_on={k: m.get("trained_on", {}).get(k) for k in ("measurements", "graphs", "sklearn")})
    return info


def _git() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10).stdout.strip() or None
    except Exception:  # noqa: BLE001
        return None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", nargs="*", default=None,
                   help=f"suite cases (default: {' '.join(DEFAULT_CASES)}, unless corpus programs are chosen)")
    p.add_argument("--programs", nargs="*", default=[], help="broad-corpus programs by name (benchmarks.programs)")
    p.add_argument("--categories", nargs="*", default=[], help="every broad-corpus program of these categories")
    p.add_argument("--out", default="benchmarks/results/search_quality")
    p.add_argument("--budget", type=float, default=420.0, help="seconds for everything (split over cases and searches)")
    p.add_argument("--ref-trials", type=int, default=32)
    p.add_argument("--ref-top-k", type=int, default=16)
    p.add_argument("--ref-explore", type=float, default=1.0)
    p.add_argument("--guided-trials", type=int, nargs="*", default=[8, 32])
    p.add_argument("--model-only-trials", type=int, default=32,
                   help="trials of the search that measures nothing, the model's picks alone (0: none)")
    p.add_argument("--max-candidates", type=int, default=None,
                   help="configs per kernel the model ranks in the model-only and guided searches "
                        "(nearest the tuner's default config first; default: the tuner's, "
                        "kernels.RANKED_CANDIDATES for a learned model)")
    p.add_argument("--guided-refine", type=int, nargs="*", default=[0],
                   help="one set of guided searches per value: after the ranked top-k, up to this many "
                        "neighbours of each kernel's fastest measured config (0: the ranking alone; "
                        "autofuse tune's default is KernelTuneSettings.refine)")
    p.add_argument("--rounds", type=int, default=5, help="interleaved re-timing rounds")
    p.add_argument("--reps", type=int, default=50)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("benchmarks.search_quality needs a CUDA GPU: it measures real plans (the CPU test is "
              "tests/test_search_quality.py)", file=sys.stderr)
        return 2
    import triton
    from autofuse.plan.graph_hash import device_key
    names = args.cases if args.cases is not None else ([] if args.programs or args.categories else DEFAULT_CASES)
    try:
        cases = select_cases(names, args.programs, args.categories)
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    dev = device_key([torch.empty(1, device="cuda")])
    meta = {"command": "python3 -m benchmarks.search_quality " + " ".join(argv if argv is not None else sys.argv[1:]),
            "device": torch.cuda.get_device_name(), "device_key": dev, "torch": torch.__version__,
            "triton": triton.__version__, "optuna": _version("optuna"), "sklearn": _version("sklearn"),
            "python": platform.python_version(), "git": _git(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(), "model": model_info(dev),
            "claim": "guided ≤ 8 trials within 5% of the unguided long search's best plan, ≤ 32 within 1%; "
                     "model only (the cost model's picks, no kernel measured, as without a GPU) within 10%"}
    variants = default_variants(args.ref_trials, args.ref_top_k, args.ref_explore, args.guided_trials,
                                args.model_only_trials, args.max_candidates, args.guided_refine)
    out = Path(args.out)
    results = run_all(cases, variants, out, args.budget, device="cuda", factories=default_factories(),
                      retime=cuda_retimer(args.reps, args.rounds), meta=meta, seed=args.seed)
    print(markdown(results), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
