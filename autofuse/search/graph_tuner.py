"""Tuning one captured graph: baselines, the study, finalists, the stored plan.

Note: the order of work is what keeps a tune safe to interrupt. Every kernel measurement is
written to the tuning DB as it is made; a Ctrl-C during the search ends the search only, and the
finalists (best trials so far plus the default plan) are still verified and the winner stored.
Without a GPU nothing is measured: kernels run in Triton's interpreter for correctness, the
predictor ranks, and the plan is stored as "predicted" for this device key only.
"""
from __future__ import annotations

import functools
import json
import math
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch

from ..capture.fresh import compile_fresh
from ..plan.graph_hash import Versions, device_key, graph_hash
from ..compiler import compile_graph
from ..measure.float64 import float64_graph_outputs
from ..measure.rng import RngSnapshot
from ..measure.timing import Benchmarker, CudaEventBenchmarker, PredictingBenchmarker
from ..options import CompileOptions
from ..plan.plan import FusionPlan
from ..report import nbytes
from .evaluate import PlanEval, PlanEvaluator, runner_up_plans, unshared_mutated_inputs
from .finalists import CONFIRM_MIN_ROUNDS, Finalist, needs_confirmation, pick, time_rounds, verify
from .kernels import KernelTuner, PastDeadline
from .records import device_traits
from .progress import Progress
from .interrupts import deferred_interrupts, stop_requested
from .settings import TuneSettings
from .study import (SpaceCache, enqueue_baselines, fail_stale_trials, open_study, quiet_optuna, study_name,
                    trials_taken, worker_id)
from .table import error_line

BASELINES = ("inductor", "tvm", "none")


@dataclass
class Row:
    """One line of a closing table."""

    variant: str
    us: float | None
    kernels: int | None = None
    measured: bool = True
    note: str = ""


@dataclass
class GraphResult:
    label: str
    graph_hash: str
    device: str
    plan: FusionPlan
    source: str                         # "tuned" | "predicted"
    why: str
    rows: list[Row]
    min_bytes: int
    trials: int
    new_measurements: int
    failures: list[tuple[str, str]] = field(default_factory=list)
    interrupted: bool = False
    stored_id: int | None = None
    reused_measurements: int = 0  # kernel variants timed by an earlier tune (the DB's measurements)
    reused_choices: int = 0       # kernels of this graph that repeat one tuned before (repeated layers)
    search_s: float = 0.0         # wall seconds of the trials
    tuning_seconds: dict[str, float] = field(default_factory=dict)  # KernelTuner.seconds: where they went


def default_benchmarker(args: Sequence[Any], predictor: Any) -> Benchmarker:
    on_gpu = any(isinstance(a, torch.Tensor) and a.is_cuda for a in args)
    return CudaEventBenchmarker() if on_gpu else PredictingBenchmarker(predictor)


def load_predictor(db: Any, device: str) -> Any:
    from costmodel.predict import load_predictor as load
    return load(db, device)


class GraphTuner:
    """Searches one graph's plans; shares the DB, benchmarker and predictor across graphs."""

    def __init__(self, db: Any, settings: TuneSettings, benchmarker: Benchmarker | None = None,
                 copy_bw: float | None = None) -> None:
        self.db, self.settings, self.benchmarker, self.copy_bw = db, settings, benchmarker, copy_bw

    def run(self, gm: torch.fx.GraphModule, args: Sequence[Any], label: str, deadline: float | None = None) -> GraphResult:
        # a captured graph computes any gradients itself (a backward graph): it runs as it was captured,
        # without autograd recording, where an ATen op of it would refuse inputs that require grad
        # (attention's mask computed from a parameter)
        with quiet_optuna(), torch.no_grad():
            search = GraphSearch(self.db, self.settings, self.benchmarker, self.copy_bw, gm, args, label)
            search.open_study()
            search.search(deadline)
            return search.conclude()


class GraphSearch:
    """The search of one graph, step by step: open its study (the default strategies' plans enqueued
    first), ask and evaluate trials, keep the best distinct ones as finalists, verify and time them
    end to end, pick the winner and store it. Its fields are what the steps hand to one another."""

    def __init__(self, db: Any, settings: TuneSettings, benchmarker: Benchmarker | None, copy_bw: float | None,
                 gm: torch.fx.GraphModule, args: Sequence[Any], label: str) -> None:
        # every run of the search (reference, trials, finalists) updates copies of the inputs the graph
        # writes in place, never the caller's buffers
        self.db, self.settings, self.gm, self.label = db, settings, gm, label
        self.args = unshared_mutated_inputs(gm, list(args))
        self.key, self.dev, self.versions = graph_hash(gm, self.args), device_key(self.args), Versions.current()
        db.put_graph(self.key, _describe(label, self.args))
        self.rng = RngSnapshot.take()   # a graph that samples (dropout) draws alike in every checked run
        with self.rng.replay():
            self.expected = _as_list(gm(*self.args))
        # the graph in float64, computed once and only if a plan's values differ from eager's
        self.reference = functools.cache(self._float64_outputs)
        from costmodel.predict import GroupContextPredictor
        predictor = GroupContextPredictor(load_predictor(db, self.dev))  # consistent kernel times without a GPU
        self.bench = benchmarker or default_benchmarker(self.args, predictor)
        interpret = not any(isinstance(a, torch.Tensor) and a.is_cuda for a in self.args)
        device = next((a.device for a in self.args if isinstance(a, torch.Tensor)), torch.device("cpu"))
        self.failures: list[tuple[str, str]] = []
        self.kernels = KernelTuner(self.bench, predictor, db, self.dev, device_traits(device, copy_bw), self.key,
                                   settings.kernel, interpret, on_measure=self._on_measure)
        self.options = CompileOptions(heuristics=settings.heuristics, use_db=False, strict=True)
        self.evaluator = PlanEvaluator(gm, self.args, self.kernels, self.options)
        self.baselines: dict[str, Finalist] = {}
        self.study: Any = None
        self.spaces: SpaceCache | None = None
        self.done = 0                          # trials finished in the study: every worker's and earlier runs' ones
        self.best_us: float | None = None      # the best estimate so far
        self.default_us: float | None = None   # the default (inductor) plan's estimate
        self.progress: Progress | None = None
        self.interrupted = False
        self.search_s = 0.0   # wall seconds of the trials (where the kernel variants are measured)
        self.deadline: float | None = None   # time.monotonic() at which the search stops (None: no limit)

    def _on_measure(self, rec: dict[str, Any], timing: Any, err: str | None) -> None:
        if err:
            self.failures.append((_kname(rec), err))

    # ---- the study --------------------------------------------------------------------------
    def open_study(self) -> None:
        """Build the default strategies' plans and open the study with them as its first trials."""
        s = self.settings
        for name in BASELINES:
            arts = compile_graph(self.gm, self.args, self.options.with_(strategy=name))
            self.baselines[name] = Finalist(name, arts.plan)
        self.spaces = SpaceCache(self.gm, self.args, s.heuristics)
        self.study = open_study(self.db.storage_url, study_name(self.key, self.dev), s.seed, s.resume)
        if s.resume:
            fail_stale_trials(self.study)
        enqueue_baselines(self.study, self.spaces, {n: f.plan for n, f in self.baselines.items()})
        if s.resume:
            self.done = sum(1 for t in self.study.get_trials(deepcopy=False) if t.state.name == "COMPLETE")

    def search(self, deadline: float | None) -> None:
        """Run the remaining trials (until the deadline); Ctrl-C or an error ends the search only."""
        self.progress = Progress(f"{self.label} graph {self.key[:12]}", self.settings.trials, deadline,
                                 enabled=self.settings.progress)
        t0 = time.perf_counter()
        self.deadline = deadline
        try:
            _ask_tell(self.study, self.objective, self.settings.trials, deadline)
        except KeyboardInterrupt:
            self.interrupted = True
        except Exception as e:  # noqa: BLE001 - the search ends; what it measured and found is kept
            self.failures.append(("search", f"stopped: {type(e).__name__}: {e}"))
        finally:
            self.kernels.abort_after = None   # the finalists' kernels are tuned whatever the time
            self.search_s = time.perf_counter() - t0
            self.progress.close()

    def objective(self, trial: Any) -> float:
        """One trial: its plan's estimated time (1e30 when the plan cannot be built or has no estimate)."""
        base = trial.user_attrs.get("baseline")
        trial.set_user_attr("worker", worker_id())
        plan = self.ask_plan(trial)
        if plan is None:
            self.done += 1
            return 1e30
        # the first trial (the default plan's) always finishes; a later one ends at the deadline
        self.kernels.abort_after = self.deadline if self.done > 0 else None
        ev = self.evaluator.evaluate(plan)
        self.record(trial, ev)
        self.done = max(self.done + 1, trials_taken(self.study))   # this trial is RUNNING: counted
        if math.isfinite(ev.est_us) and (self.best_us is None or ev.est_us < self.best_us):
            self.best_us = ev.est_us
        if base == "inductor":
            self.default_us = ev.est_us
        self.progress.update(self.done, self.best_us, self.default_us)
        return ev.est_us if math.isfinite(ev.est_us) else 1e30

    def ask_plan(self, trial: Any) -> FusionPlan | None:
        """The trial's plan: a baseline's exact plan for an enqueued one; None (the reason kept) when
        the sampled choices cannot be built."""
        try:
            plan = self.spaces.suggest(trial)
        except Exception as e:  # noqa: BLE001 - a candidate that cannot be built scores infinity
            why = f"{type(e).__name__}: {e}"
            trial.set_user_attr("error", why[:500])
            self.failures.append((f"trial {trial.number}", why))
            return None
        base = trial.user_attrs.get("baseline")
        return self.baselines[base].plan if base in self.baselines else plan

    def record(self, trial: Any, ev: PlanEval) -> None:
        """What the study keeps of an evaluated trial: its plan with the kernels' configs, and why it failed."""
        trial.set_user_attr("plan", json.dumps(ev.plan.to_json(), sort_keys=True))
        trial.set_user_attr("kernels", ev.num_kernels)
        if ev.error:
            trial.set_user_attr("error", ev.error[:500])
            self.failures.append((f"trial {trial.number}", ev.error))

    # ---- the end: finalists, verification, timing, the winner --------------------------------
    def _float64_outputs(self) -> list[Any]:
        with self.rng.replay():
            return float64_graph_outputs(self.gm, self.args)

    def finalists(self) -> list[Finalist]:
        """The best distinct completed trials (from every worker of the study), then the best one with a
        kernel's close runner-up configs."""
        seen: set[str] = set()
        out: list[Finalist] = []
        trials = [t for t in self.study.get_trials(deepcopy=False)
                  if t.state.name == "COMPLETE" and t.value is not None and t.value < 1e30 and "plan" in t.user_attrs]
        for t in sorted(trials, key=lambda t: (t.value, t.number)):
            plan = FusionPlan.from_json(json.loads(t.user_attrs["plan"]))
            ident = json.dumps(plan.to_json(), sort_keys=True)
            if ident in seen:
                continue
            seen.add(ident)
            ev = self.evaluator.evaluate(plan)  # cached when this process ran it; re-tunes kernels from DB otherwise
            base = t.user_attrs.get("baseline")
            name = f"tuned ({base} grouping)" if base else f"tuned (trial {t.number})"
            out.append(Finalist(name, ev.plan if ev.error is None else plan, ev.est_us))
            if len(out) >= self.settings.finalists:
                break
        if out and self.settings.runner_ups:
            best = self.evaluator.evaluate(out[0].plan)
            out += [Finalist(name, plan, best.est_us) for name, plan in runner_up_plans(best, self.settings.runner_ups)]
        return out

    def verify_plan(self, f: Finalist) -> None:
        """Check f against eager; a plan that passes gets its kernel records (what a fake or predicting
        benchmarker times it by)."""
        with self.rng.replay():
            verify(f, self.gm, self.args, self.expected, self.options, self.reference)
        if f.error is None:
            f.kernel_records = self.evaluator.records(f.plan)

    def time_finalists(self, incumbent: Finalist, finalists: list[Finalist]) -> None:
        """Interleaved end-to-end rounds; a challenger within the spread gets paired rounds more."""
        time_rounds([incumbent, *finalists], self.args, self.bench, self.settings.rounds)
        close = needs_confirmation(incumbent, finalists)
        if close is not None:   # within the spread: more paired rounds of the two decide
            time_rounds([incumbent, close], self.args, self.bench, CONFIRM_MIN_ROUNDS - len(close.rounds_us))

    def verify_finalists(self, incumbent: Finalist, finalists: list[Finalist]) -> None:
        """Check the default plan and the finalists; a rejected finalist is a failure of the tune."""
        for f in [incumbent, *finalists]:
            self.verify_plan(f)
            if f.error and f is not incumbent:
                self.failures.append((f.name, f"rejected: {f.error}"))

    def conclude(self) -> GraphResult:
        """Verify and time the finalists against the default plan, pick the winner, store it."""
        finalists = self.finalists()
        incumbent = Finalist("default (inductor)", self.baselines["inductor"].plan)
        self.verify_finalists(incumbent, finalists)
        self.time_finalists(incumbent, finalists)
        winner, why = pick(incumbent, finalists)
        source = "tuned" if self.bench.measures else "predicted"
        rows = self.rows(incumbent, winner)
        stored = self.store(winner, rows, source)
        return GraphResult(self.label, self.key, self.dev, winner.plan, source, why, rows,
                           nbytes(self.args) + nbytes(self.expected), self.done, self.kernels.new_measurements,
                           self.failures, self.interrupted, stored, self.kernels.reused_measurements,
                           self.kernels.reused_choices, self.search_s, dict(self.kernels.seconds))

    def store(self, winner: Finalist, rows: list[Row], source: str) -> int | None:
        """The winner's plan in the tuning DB, with the closing table's times; its id (None: nothing verified)."""
        if winner.error is not None or not winner.rounds_us:
            return None
        from tuning_db import PlanRecord
        baseline_times = {r.variant: r.us for r in rows if r.us is not None and math.isfinite(r.us)}
        v = self.versions
        return self.db.put_plan(PlanRecord(
            graph_hash=self.key, device=self.dev, torch_version=v.torch, triton_version=v.triton,
            plan_schema=v.plan_schema, plan_json=winner.plan.dumps(), time_us=winner.median_us,
            baselines=baseline_times, source=source))

    def rows(self, incumbent: Finalist, winner: Finalist) -> list[Row]:
        """The closing table: eager and torch.compile (measured on a GPU only), autofuse's default
        strategies, and the winner."""
        gm, args, bench = self.gm, self.args, self.bench
        rows: list[Row] = []
        if bench.measures and self.settings.compare_torch_compile:
            rows.append(_time_callable("eager", lambda: gm(*args), bench))
            try:
                compiled = compile_fresh(gm, "inductor")
                compiled(*args)
                rows.append(_time_callable("torch.compile", lambda: compiled(*args), bench))
            except Exception as e:  # noqa: BLE001 - a baseline that fails is reported, not fatal
                rows.append(Row("torch.compile", None, note=f"failed: {error_line(e)}"))
        rows.append(Row("autofuse inductor", incumbent.median_us if incumbent.rounds_us else None,
                        incumbent.num_kernels, incumbent.measured, incumbent.error or ""))
        tvm = Finalist("tvm", self.baselines["tvm"].plan)
        self.verify_plan(tvm)
        time_rounds([tvm], args, bench, 1)
        rows.append(Row("autofuse tvm", tvm.median_us if tvm.rounds_us else None, tvm.num_kernels, tvm.measured,
                        tvm.error or ""))
        rows.append(Row("autofuse tuned", winner.median_us if winner.rounds_us else None, winner.num_kernels,
                        winner.measured, winner.name))
        return rows


def _ask_tell(study: Any, objective: Any, n_trials: int, deadline: float | None) -> None:
    """Run trials until the study holds n_trials (finished or running, every worker's: workers split
    the budget), or until the deadline. Two workers asking at once may take one trial more. Another
    worker may have finished a trial this one also took (enqueued trials on storages without row
    locks, such as SQLite): that trial is skipped, whether the other worker finished it before this
    one's objective wrote to it or before its tell."""
    import optuna
    for _ in range(n_trials):   # a worker alone never runs more than the budget
        if stop_requested():   # an interrupt whose raise was swallowed (interrupts.py)
            raise KeyboardInterrupt
        if deadline is not None and time.monotonic() > deadline:
            return
        if trials_taken(study) >= n_trials:
            return
        trial, told = None, False
        try:
            # a held interrupt is delivered on leaving its block, after ask made the RUNNING row or
            # tell finished it: both blocks sit inside the try, so the handler knows which happened
            with deferred_interrupts():
                trial = study.ask()
            value = objective(trial)
            with deferred_interrupts():
                _tell_quietly(study, trial, value)
                told = True
        except optuna.exceptions.UpdateFinishedTrialError:
            continue  # the other worker's result stands; the kernels measured here are in the DB
        except PastDeadline:   # the trial is dropped, the kernels it measured stay in the DB
            if trial is not None and not told:
                with deferred_interrupts():
                    _tell_quietly(study, trial, state=optuna.trial.TrialState.FAIL)
            return
        except BaseException:  # interrupted or failed: the trial must not stay RUNNING
            if trial is not None and not told:
                with deferred_interrupts():
                    _tell_quietly(study, trial, state=optuna.trial.TrialState.FAIL)
            raise


def _tell_quietly(study: Any, trial: Any, value: float | None = None, state: Any = None) -> None:
    try:
        if state is not None:
            study.tell(trial, state=state)
        else:
            study.tell(trial, value)
    except (ValueError, RuntimeError) as e:  # finished by another worker of the study meanwhile
        if "Cannot tell" not in str(e) and "finished" not in str(e):
            raise


def _time_callable(name: str, fn: Any, bench: Benchmarker) -> Row:
    fn()
    t = bench.time(fn, {"kind": "plan", "kernels": [], "variant": name})
    return Row(name, t.median_us, None, t.measured)


def _as_list(out: Any) -> list[Any]:
    return list(out) if isinstance(out, (list, tuple)) else [out]


def _kname(rec: dict[str, Any]) -> str:
    return f"kernel {'+'.join(rec.get('nodes', []))[:60]} {rec.get('config')}"


def _describe(label: str, args: Sequence[Any]) -> str:
    shapes = ", ".join(f"{str(a.dtype).replace('torch.', '')}{list(a.shape)}" for a in args if isinstance(a, torch.Tensor))
    return f"{label}({shapes})"[:500]
