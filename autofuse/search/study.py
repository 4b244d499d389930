"""The Optuna side: a plan as trial parameters, the study in the tuning DB's storage.

Note: the space is define-by-run and conditional: first one `realize:<class>` boolean per class of
multi-use values and, in a graph with convolutions, one `conv_layout` choice, which fix the
lowering; then one `fuse:<class a>+<class b>` boolean per class of fusion candidates legal in *that*
lowering (so the candidates a trial sees depend on its realize choices). A class is the node's
repeated structure (`plan.repeats`): a decoder's eight layers take one decision per layer kind. Chosen
pairs are merged greedily with a legality re-check (CandidateSpace.plan_from_choices), so every
trial is a legal plan. Default strategies' plans enter as enqueued trials carrying their exact
plan (user attribute "baseline") and parameters that describe them, so the sampler learns from them.
"""
from __future__ import annotations

import hashlib
import os
import random
import socket
import time
import warnings
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, Iterator, Sequence

import torch

from ..plan.plan import CONV_LAYOUTS, FusionPlan
from ..plan.repeats import class_of, structural_classes
from ..plan.space import CandidateSpace, build_space, multi_use_values
from ..schedule.heuristics import Heuristics


class SpaceCache:
    """Candidate spaces of one graph, one per realize assignment."""

    def __init__(self, gm: torch.fx.GraphModule, args: Sequence[Any], heuristics: Heuristics) -> None:
        self.gm, self.args, self.heuristics = gm, args, heuristics
        self.choices: tuple[str, ...] = tuple(sorted(set(multi_use_values(gm, args, heuristics))))
        self.has_conv = any(n.op == "call_function" and n.target is torch.ops.aten.convolution.default
                            for n in gm.graph.nodes)
        self.classes = structural_classes(gm)
        self._spaces: dict[tuple, CandidateSpace] = {}

    def space(self, decisions: dict[str, bool], conv_layout: str | None = None) -> CandidateSpace:
        key = (tuple(sorted(decisions.items())), conv_layout)
        if key not in self._spaces:
            heur = self.heuristics if conv_layout is None else replace(self.heuristics, conv_layout=conv_layout)
            self._spaces[key] = build_space(self.gm, self.args, heur, decisions)
        return self._spaces[key]

    def decisions_of(self, plan: FusionPlan) -> dict[str, bool]:
        """Which multi-use values the plan's lowering realized (a realized value owns a buffer node)."""
        ids = {n for k in plan.kernels for n in k.nodes}
        roots = {i.split(".")[0] for i in ids}
        return {n: n in roots for n in self.choices}

    def realize_param(self, name: str) -> str:
        return f"realize:{class_of(name, self.classes)}"

    def fuse_param(self, a: str, b: str) -> str:
        return f"fuse:{class_of(a, self.classes)}+{class_of(b, self.classes)}"

    def params_of(self, plan: FusionPlan) -> dict[str, Any]:
        """The parameters that describe plan; where the sites of one class differ, the majority's."""
        decisions = self.decisions_of(plan)
        votes: dict[str, list[bool]] = {}
        for n, v in decisions.items():
            votes.setdefault(self.realize_param(n), []).append(v)
        layout = plan.conv_layout if self.has_conv else None
        kernel_of = {n: i for i, k in enumerate(plan.kernels) for n in k.nodes}
        for c in self.space(decisions, layout).legal:
            votes.setdefault(self.fuse_param(c.a, c.b), []).append(kernel_of.get(c.a, -1) == kernel_of.get(c.b, -2))
        params: dict[str, Any] = {k: 2 * sum(v) >= len(v) for k, v in votes.items()}
        if layout is not None:
            params["conv_layout"] = layout
        return params

    def suggest(self, trial: Any) -> FusionPlan:
        """A trial's plan: a name suggested again returns its first value, so a class's sites agree."""
        decisions = {n: trial.suggest_categorical(self.realize_param(n), [True, False]) for n in self.choices}
        layout = trial.suggest_categorical("conv_layout", list(CONV_LAYOUTS)) if self.has_conv else None
        space = self.space(decisions, layout)
        chosen = [c for c in space.legal if trial.suggest_categorical(self.fuse_param(c.a, c.b), [True, False])]
        plan = space.plan_from_choices(chosen)
        return replace(plan, conv_layout=layout) if layout is not None else plan


def study_name(graph_hash: str, device: str) -> str:
    return f"autofuse:{graph_hash}:{device}"


@contextmanager
def quiet_optuna() -> Iterator[None]:
    """Optuna's per-trial INFO lines off while a search runs; the user's setting comes back after."""
    import optuna
    before = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        yield
    finally:
        optuna.logging.set_verbosity(before)


def open_study(storage_url: str, name: str, seed: int, resume: bool) -> Any:
    """The graph's study: with resume the latest one (created if there is none), else a new one.
    An earlier study is never deleted: a new search of the same graph is `name#2`, `name#3`, …"""
    import optuna
    kwargs = {"engine_kwargs": {"connect_args": {"timeout": 60}}} if storage_url.startswith("sqlite") else {}
    storage = _rdb_storage(storage_url, kwargs)
    name = run_name(name, optuna.get_all_study_names(storage), resume)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=6, multivariate=True, group=True,
                                             constant_liar=True)
    return optuna.create_study(study_name=name, storage=storage, sampler=sampler, direction="minimize",
                               load_if_exists=True)


def run_name(name: str, existing: Sequence[str], resume: bool) -> str:
    """The study to open among the graph's `existing` ones: the latest (resume) or the next new one."""
    runs = [1 if n == name else int(n.rsplit("#", 1)[1]) for n in existing
            if n == name or (n.startswith(name + "#") and n.rsplit("#", 1)[1].isdigit())]
    if not runs:
        return name
    k = max(runs) if resume else max(runs) + 1
    return name if k == 1 else f"{name}#{k}"


def _rdb_storage(url: str, kwargs: dict[str, Any], attempts: int = 6) -> Any:
    """Optuna's storage; workers starting together on a fresh DB race to create its tables, and
    the loser retries once the winner's schema is there."""
    import optuna
    for k in range(attempts):
        try:
            return optuna.storages.RDBStorage(url, **kwargs)
        except Exception:  # noqa: BLE001 - a lost race looks like any SQL error; the last try raises
            if k == attempts - 1:
                raise
            time.sleep(0.2 * (k + 1) + random.random() * 0.3)
    raise AssertionError("unreachable")


def enqueue_baselines(study: Any, spaces: SpaceCache, baselines: dict[str, FusionPlan]) -> None:
    """The default strategies' plans are the first trials: the result is never worse than they are.
    Workers opening one study at the same moment enqueue them one at a time (`study_lock`), so each
    is enqueued once."""
    with study_lock(study):
        done = {t.user_attrs.get("baseline") for t in study.get_trials(deepcopy=False)}
        for name, plan in baselines.items():
            if name not in done:
                study.enqueue_trial(spaces.params_of(plan), user_attrs={"baseline": name}, skip_if_exists=True)


@contextmanager
def study_lock(study: Any) -> Iterator[None]:
    """Held by one process at a time per study: a PostgreSQL advisory lock keyed by the study's name,
    or an exclusive flock on a SQLite database's file (SQLite's own locks are POSIX record locks,
    which a flock neither takes nor waits for); no lock on other storages.

    Note: Optuna's `skip_if_exists` reads the trials and then inserts: without the lock, two workers
    starting together can both find no baseline and both enqueue it, and the copy left waiting when
    the budget runs out stays in the study."""
    storage = getattr(study, "_storage", None)
    engine = getattr(getattr(storage, "_backend", storage), "engine", None)
    backend = engine.url.get_backend_name() if engine is not None else ""
    if backend == "postgresql":
        from sqlalchemy import text
        key = int.from_bytes(hashlib.sha256(study.study_name.encode()).digest()[:8], "big", signed=True)
        with engine.connect() as conn:
            conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": key})
            try:
                yield
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})
        return
    path = engine.url.database if backend == "sqlite" else None
    try:
        import fcntl
    except ImportError:   # no flock (Windows)
        fcntl = None
    if not path or path == ":memory:" or path.startswith("file:") or fcntl is None or not os.path.exists(path):
        yield
        return
    with open(path, "rb") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def trials_taken(study: Any) -> int:
    """Trials of the study that count against its budget: finished ones and those a worker is running.
    Several workers on one study stop together once it holds the budget's trials."""
    import optuna
    states = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.RUNNING)
    return len(study.get_trials(deepcopy=False, states=states))


STALE_AFTER_S = 6 * 3600.0  # a RUNNING trial of another host (or of no recorded worker) older than this is dead


def worker_id() -> str:
    """host:pid of this process, recorded on each trial it runs."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def is_stale(trial: Any, now: float | None = None) -> bool:
    """A RUNNING trial whose worker is gone: a dead process of this host, or, when its worker is
    elsewhere or unknown, one started more than STALE_AFTER_S ago."""
    host, _, pid = str(trial.user_attrs.get("worker", "")).rpartition(":")
    if host == socket.gethostname() and pid.isdigit():
        return int(pid) != os.getpid() and not _alive(int(pid))
    start = trial.datetime_start.timestamp() if trial.datetime_start is not None else None
    return start is not None and (now if now is not None else time.time()) - start > STALE_AFTER_S


def fail_stale_trials(study: Any) -> int:
    """Mark RUNNING trials of dead workers FAIL (a killed tune leaves its trial RUNNING); how many."""
    import optuna
    n = 0
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        if is_stale(t):
            try:
                study._storage.set_trial_state_values(t._trial_id, optuna.trial.TrialState.FAIL)
                n += 1
            except (RuntimeError, ValueError):  # finished meanwhile
                pass
    return n
