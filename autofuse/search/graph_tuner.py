"""Tuning one captured graph: baselines, the study, finalists, the stored plan.

Note: the order of work is what keeps a tune safe to interrupt. Every kernel measurement is
written to the tuning DB as it is made; a Ctrl-C during the search ends the search only, and the
finalists (best trials so far plus the default plan) are still verified and the winner stored.
Without a GPU nothing is measured: kernels run in Triton's interpreter for correctness, the
predictor ranks, and the plan is stored as "predicted" for this device key only.
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch

from ..capture.fresh import compile_fresh
from ..capture.graph_hash import Versions, device_key, graph_hash
from ..compiler import compile_graph
from ..measure.timing import Benchmarker, CudaEventBenchmarker, PredictingBenchmarker
from ..options import CompileOptions
from ..plan.plan import FusionPlan
from ..report import nbytes
from .evaluate import PlanEvaluator, runner_up_plans
from .finalists import CONFIRM_MIN_ROUNDS, Finalist, needs_confirmation, pick, time_rounds, verify
from .kernels import KernelTuner, device_traits
from .progress import Progress
from .settings import TuneSettings
from .study import SpaceCache, enqueue_baselines, fail_stale_trials, open_study, quiet_optuna, study_name, worker_id

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
        with quiet_optuna():
            return self._run(gm, args, label, deadline)

    def _run(self, gm: torch.fx.GraphModule, args: Sequence[Any], label: str, deadline: float | None = None) -> GraphResult:
        s = self.settings
        args = list(args)
        key, dev, versions = graph_hash(gm, args), device_key(args), Versions.current()
        self.db.put_graph(key, _describe(label, args))
        expected = _as_list(gm(*args))
        from costmodel.predict import GroupContextPredictor
        predictor = GroupContextPredictor(load_predictor(self.db, dev))  # consistent kernel times without a GPU
        bench = self.benchmarker or default_benchmarker(args, predictor)
        interpret = not any(isinstance(a, torch.Tensor) and a.is_cuda for a in args)
        device = next((a.device for a in args if isinstance(a, torch.Tensor)), torch.device("cpu"))
        failures: list[tuple[str, str]] = []
        tuner = KernelTuner(bench, predictor, self.db, dev, device_traits(device, self.copy_bw), key, s.kernel,
                            interpret, on_measure=lambda rec, t, err: err and failures.append((_kname(rec), err)))
        options = CompileOptions(heuristics=s.heuristics, use_db=False, strict=True)
        evaluator = PlanEvaluator(gm, args, tuner, options)

        baselines: dict[str, Finalist] = {}
        for name in BASELINES:
            arts = compile_graph(gm, args, options.with_(strategy=name))
            baselines[name] = Finalist(name, arts.plan)
        spaces = SpaceCache(gm, args, s.heuristics)
        study = open_study(self.db.storage_url, study_name(key, dev), s.seed, s.resume)
        if s.resume:
            fail_stale_trials(study)
        enqueue_baselines(study, spaces, {n: f.plan for n, f in baselines.items()})

        done_before = sum(1 for t in study.get_trials(deepcopy=False) if t.state.name == "COMPLETE") if s.resume else 0
        remaining = max(0, s.trials - done_before)
        progress = Progress(f"{label} graph {key[:12]}", s.trials, deadline, enabled=s.progress)
        state = {"done": done_before, "best": None, "default": None}

        def objective(trial: Any) -> float:
            base = trial.user_attrs.get("baseline")
            trial.set_user_attr("worker", worker_id())
            try:
                plan = spaces.suggest(trial)
            except Exception as e:  # noqa: BLE001 - a candidate that cannot be built scores infinity
                why = f"{type(e).__name__}: {e}"
                trial.set_user_attr("error", why[:500])
                failures.append((f"trial {trial.number}", why))
                state["done"] += 1
                return 1e30
            if base in baselines:
                plan = baselines[base].plan
            ev = evaluator.evaluate(plan)
            trial.set_user_attr("plan", json.dumps(ev.plan.to_json(), sort_keys=True))
            trial.set_user_attr("kernels", ev.num_kernels)
            if ev.error:
                trial.set_user_attr("error", ev.error[:500])
                failures.append((f"trial {trial.number}", ev.error))
            state["done"] += 1
            if math.isfinite(ev.est_us) and (state["best"] is None or ev.est_us < state["best"]):
                state["best"] = ev.est_us
            if base == "inductor":
                state["default"] = ev.est_us
            progress.update(state["done"], state["best"], state["default"])
            return ev.est_us if math.isfinite(ev.est_us) else 1e30

        interrupted = False
        try:
            _ask_tell(study, objective, remaining, deadline)
        except KeyboardInterrupt:
            interrupted = True
        except Exception as e:  # noqa: BLE001 - the search ends; what it measured and found is kept
            failures.append(("search", f"stopped: {type(e).__name__}: {e}"))
        finally:
            progress.close()

        finalists = self._finalists(study, evaluator, baselines)
        if finalists and s.runner_ups:
            best = evaluator.evaluate(finalists[0].plan)
            finalists += [Finalist(name, plan, best.est_us) for name, plan in runner_up_plans(best, s.runner_ups)]
        incumbent = Finalist("default (inductor)", baselines["inductor"].plan)
        for f in [incumbent, *finalists]:
            verify(f, gm, args, expected, options)
            if f.error is None:
                f.kernel_records = evaluator.records(f.plan)
            if f.error and f is not incumbent:
                failures.append((f.name, f"rejected: {f.error}"))
        time_rounds([incumbent, *finalists], args, bench, s.rounds)
        close = needs_confirmation(incumbent, finalists)
        if close is not None:   # within the spread: more paired rounds of the two decide
            time_rounds([incumbent, close], args, bench, CONFIRM_MIN_ROUNDS - len(close.rounds_us))
        winner, why = pick(incumbent, finalists)
        source = "tuned" if bench.measures else "predicted"
        rows = self._rows(gm, args, bench, incumbent, baselines["tvm"].plan, winner, evaluator, options, expected)
        stored = None
        if winner.error is None and winner.rounds_us:
            from tuning_db import PlanRecord
            baseline_times = {r.variant: r.us for r in rows if r.us is not None and math.isfinite(r.us)}
            stored = self.db.put_plan(PlanRecord(
                graph_hash=key, device=dev, torch_version=versions.torch, triton_version=versions.triton,
                plan_schema=versions.plan_schema, plan_json=winner.plan.dumps(), time_us=winner.median_us,
                baselines=baseline_times, source=source))
        return GraphResult(label, key, dev, winner.plan, source, why, rows, nbytes(args) + nbytes(expected),
                           state["done"], tuner.new_measurements, failures, interrupted, stored,
                           tuner.reused_measurements, tuner.reused_choices)

    def _finalists(self, study: Any, evaluator: PlanEvaluator, baselines: dict[str, Finalist]) -> list[Finalist]:
        """The best distinct completed trials (from every worker of the study), with their kernel records."""
        seen: set[str] = set()
        out: list[Finalist] = []
        trials = [t for t in study.get_trials(deepcopy=False)
                  if t.state.name == "COMPLETE" and t.value is not None and t.value < 1e30 and "plan" in t.user_attrs]
        for t in sorted(trials, key=lambda t: (t.value, t.number)):
            plan = FusionPlan.from_json(json.loads(t.user_attrs["plan"]))
            ident = json.dumps(plan.to_json(), sort_keys=True)
            if ident in seen:
                continue
            seen.add(ident)
            ev = evaluator.evaluate(plan)  # cached when this process ran it; re-tunes kernels from DB otherwise
            base = t.user_attrs.get("baseline")
            name = f"tuned ({base} grouping)" if base else f"tuned (trial {t.number})"
            out.append(Finalist(name, ev.plan if ev.error is None else plan, ev.est_us))
            if len(out) >= self.settings.finalists:
                break
        return out

    def _rows(self, gm: torch.fx.GraphModule, args: list, bench: Benchmarker, incumbent: Finalist,
              tvm_plan: FusionPlan, winner: Finalist, evaluator: PlanEvaluator, options: CompileOptions,
              expected: list[Any]) -> list[Row]:
        rows: list[Row] = []
        if bench.measures and self.settings.compare_torch_compile:
            rows.append(_time_callable("eager", lambda: gm(*args), bench))
            try:
                compiled = compile_fresh(gm, "inductor")
                compiled(*args)
                rows.append(_time_callable("torch.compile", lambda: compiled(*args), bench))
            except Exception as e:  # noqa: BLE001 - a baseline that fails is reported, not fatal
                rows.append(Row("torch.compile", None, note=f"failed: {type(e).__name__}"))
        rows.append(Row("autofuse inductor", incumbent.median_us if incumbent.rounds_us else None,
                        incumbent.num_kernels, incumbent.measured, incumbent.error or ""))
        tvm = Finalist("tvm", tvm_plan)
        verify(tvm, gm, args, expected, options)
        if tvm.error is None:
            tvm.kernel_records = evaluator.records(tvm.plan)
        time_rounds([tvm], args, bench, 1)
        rows.append(Row("autofuse tvm", tvm.median_us if tvm.rounds_us else None, tvm.num_kernels, tvm.measured,
                        tvm.error or ""))
        rows.append(Row("autofuse tuned", winner.median_us if winner.rounds_us else None, winner.num_kernels,
                        winner.measured, winner.name))
        return rows


def _ask_tell(study: Any, objective: Any, n_trials: int, deadline: float | None) -> None:
    """Run n_trials trials (or until the deadline). Another worker may have finished a trial this one
    also took (enqueued trials on storages without row locks, such as SQLite): that trial is skipped,
    whether the other worker finished it before this one's objective wrote to it or before its tell."""
    import optuna
    for _ in range(n_trials):
        if deadline is not None and time.monotonic() > deadline:
            return
        trial = study.ask()
        try:
            value = objective(trial)
        except optuna.exceptions.UpdateFinishedTrialError:
            continue  # the other worker's result stands; the kernels measured here are in the DB
        except BaseException:  # interrupted or failed: the trial must not stay RUNNING
            _tell_quietly(study, trial, state=optuna.trial.TrialState.FAIL)
            raise
        _tell_quietly(study, trial, value)


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
