"""One kernel's launch config, tuned once: candidates ranked by the predictor, the top-k measured.

Note: kernels run one after another, so a plan's time is close to the sum of its kernels' times,
and a kernel (the same fused nodes generating the same code) has one best config whatever plan
contains it. A kernel is identified by its `group` key (default-config source, sizes, dtypes);
each (source, config) variant by its `kernel_key`, under which its measurement is stored once per
device. Variants are built from the running program (same buffers) and timed in place; each is
checked against the default config's outputs first — a variant that fails to compile, runs out
of resources, runs too long or computes wrong values scores infinity, with the reason kept.
"""
from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch

from ..codegen.config import LaunchConfig, next_pow2
from ..measure.timing import Benchmarker, Timing
from ..measure.verify import compare
from ..plan.apply import node_id
from ..runtime.precompile import compiler_prints_dropped, compiling_ahead
from ..schedule.fusion import reduction_hint
from .candidates import (best_config, candidate_configs, candidate_limit, interleave_families, legal_options,
                         neighbour_configs)
from .records import group_key, kernel_key, kernel_record
from .reference import reference_configs
from .settings import KernelTuneSettings


@dataclass(frozen=True)
class KernelChoice:
    """The outcome of tuning one kernel: its best config and time (inf when nothing ran)."""

    group: str
    config: LaunchConfig
    median_us: float
    spread_us: float
    record: dict[str, Any]
    tried: int
    measured: int
    failures: tuple[tuple[str, str], ...] = ()  # (config, reason)
    close: tuple[LaunchConfig, ...] = ()       # runners-up within CLOSE_SHARE of the best, fastest first


# A kernel's configs within 1% of its best are told apart by one measurement each only as far as the
# run-to-run noise allows (0.2% above 30 µs, 0.7% at 8-30 µs: docs/costmodel.md);
# the best plan's runners-up are timed again end to end with the finalists (search/graph_tuner.py).
CLOSE_SHARE = 0.01
CLOSE_KEEP = 2


Variant = tuple[Any, Any, dict[str, Any]]   # (launch, kernel info, record) of one config, built
Result = tuple[float, float, str | None, dict[str, Any]]  # (median µs, spread µs, error, record)


class PastDeadline(Exception):
    """A kernel search would start after the search's deadline: its trial ends unfinished."""


class KernelTuner:
    """Tunes each kernel's config once per tune; measurements come from and go to the tuning DB."""

    def __init__(self, benchmarker: Benchmarker, predictor: Any, db: Any, device: str, traits: dict[str, Any],
                 graph: str, settings: KernelTuneSettings = KernelTuneSettings(), interpret: bool = False,
                 on_measure: Callable[[dict[str, Any], Timing | None, str | None], None] | None = None,
                 select: frozenset[int] | None = None, deadline: float | None = None) -> None:
        self.bench, self.predictor, self.db, self.device = benchmarker, predictor, db, device
        # select: the group indices searched (None: all); deadline (time.perf_counter()): a kernel
        # reached after it keeps its default config. Both bound the compile-time autotune.
        self.select, self.deadline = select, deadline
        # abort_after (time.monotonic()): a kernel search that would start after it raises PastDeadline
        # instead, so that a search's trial ends within one kernel of its time budget
        self.abort_after: float | None = None
        self.traits, self.graph, self.settings, self.interpret = traits, graph, settings, interpret
        self.choices: dict[tuple, KernelChoice] = {}
        self.on_measure = on_measure
        self.rng = random.Random(settings.seed)
        self.new_measurements = 0
        self.reused_measurements = 0  # variants whose time the tuning DB already held
        self.reused_choices = 0       # kernels that took the config chosen for an identical kernel
        # where the tuning time goes (seconds): what sets the variants measured per second
        self.seconds = {"kernels": 0.0, "codegen": 0.0, "compile_and_check": 0.0, "timing": 0.0, "store": 0.0,
                        "ranking": 0.0}

    def tune(self, builder: Any, gi: int, launch: Any, info: Any, env: list) -> KernelChoice:
        """Best config of group gi's kernel; leaves env as the default config's launch left it. A kernel
        of a kind the settings leave out, outside `select` or reached after the deadline keeps its
        default config, untimed (time 0), unless an identical kernel was tuned already."""
        if self.settings.kinds is not None and info.kind not in self.settings.kinds:
            return self._untimed(launch, info, env)
        ids = [node_id(n) for n in builder.groups[gi].nodes]
        gkey = group_key(kernel_record(info, launch, env, self.graph, "", self.traits, ids))
        group = builder.groups[gi]
        # the same code can come from groups on which different configs are legal (a kernel-local
        # f32 member makes fast_tanh illegal without changing the source): a choice is reused
        # only where the same options are legal
        ckey = (gkey, legal_options(group))
        if ckey in self.choices:
            launch.run(env)
            self.reused_choices += 1
            return self.choices[ckey]
        if (self.select is not None and gi not in self.select) or \
                (self.deadline is not None and time.perf_counter() > self.deadline):
            return self._untimed(launch, info, env)
        self.check_deadline(f"kernel {info.name}")
        t0 = time.perf_counter()
        search = KernelSearch(self, builder, gi, launch, info, env, ids, gkey)
        refs = reference_configs(group, info.config, reduction_hint(group)) \
            if self.settings.reference and info.kind == "reduction" else []
        ranked = candidate_configs(group, info.config, self.interpret,
                                   limit=candidate_limit(self.settings, self.predictor))
        search.build_candidates(ranked + [c for c in refs if c not in ranked])
        chosen = search.select()
        if self.bench.measures:   # Inductor's own few: the floor whatever the ranking (search/reference.py)
            chosen += [c for c in refs if c not in chosen and not isinstance(search.variants[c], str)]
        search.take_reference()
        with compiler_prints_dropped():
            with compiling_ahead(self.to_compile(chosen, search.variants)):   # compiles overlap the first timings
                for cfg in chosen:
                    search.measure(cfg)
            search.refine()
        search.leave_reference()
        choice = search.choose()
        self.choices[ckey] = choice
        self.seconds["kernels"] += time.perf_counter() - t0
        return choice

    def check_deadline(self, what: str) -> None:
        """Raise PastDeadline once `abort_after` has passed."""
        if self.abort_after is not None and time.monotonic() > self.abort_after:
            raise PastDeadline(f"{what} reached after the search's time budget")

    @staticmethod
    def _untimed(launch: Any, info: Any, env: list) -> KernelChoice:
        launch.run(env)
        return KernelChoice("", info.config, 0.0, 0.0, {}, 0, 0)

    def to_compile(self, configs: Sequence[LaunchConfig], variants: dict) -> list[Any]:
        """The launches of the configs whose variant is built and not yet measured in the DB."""
        out = []
        for c in configs:
            v = variants.get(c)
            if not isinstance(v, tuple):
                continue
            if self.bench.measures and self.db is not None and self.db.get_measurement(kernel_key(v[2]), self.device):
                continue
            out.append(v[0])
        return out

    def predict(self, records: list[dict[str, Any]]) -> list[float]:
        t0 = time.perf_counter()
        try:
            return [float(p) for p in self.predictor.predict_us(records)]
        except Exception:  # noqa: BLE001 - ranking is advice: without it, nearest the default first
            return [0.0] * len(records)
        finally:
            self.seconds["ranking"] += time.perf_counter() - t0

    def measure_variant(self, launch: Any, rec: dict[str, Any], env: list, outs: list[int],
                        ref: list[torch.Tensor], reset: Callable[[], None] | None = None
                        ) -> tuple[float, float, str | None, int]:
        """(median µs, spread µs, error, 1 if newly measured) of one variant; `reset` puts back what
        the kernel's outputs held before it ran, where it adds into them."""
        key = kernel_key(rec)
        if self.bench.measures and self.db is not None:
            got = self.db.get_measurement(key, self.device)
            if got is not None:
                self.reused_measurements += 1
                st = got["stats"]
                med = st.get("median_us")
                return (math.inf if med is None else float(med), float(st.get("p90_us", 0) or 0) - float(st.get("p10_us", 0) or 0),
                        st.get("error"), 0)
        err: str | None = None
        timing: Timing | None = None
        try:
            t0 = time.perf_counter()
            if reset is not None:
                reset()
            launch.run(env)
            if outs and env[outs[0]].is_cuda:
                torch.cuda.synchronize()
            took = time.perf_counter() - t0
            err = compare([env[s] for s in outs], ref, "kernel output")
            self.seconds["compile_and_check"] += time.perf_counter() - t0
            if err is None and took > self.settings.kernel_timeout_s and not self.interpret:
                err = f"timed out: one run took {took:.1f} s"
            if err is None:
                t1 = time.perf_counter()
                timing = self.bench.time(lambda: launch.run(env), rec)
                self.seconds["timing"] += time.perf_counter() - t1
        except KeyboardInterrupt:
            raise
        except Exception as e:  # noqa: BLE001 - compile errors, out of resources: the tune goes on
            msg = str(e).strip().splitlines()
            err = f"{type(e).__name__}: {msg[0][:300] if msg else ''}"
        if self.on_measure is not None:
            self.on_measure(rec, timing, err)
        if self.bench.measures and self.db is not None:
            stats = dict(timing.to_json()) if timing else {"median_us": None, "reps": 0, "measured": False}
            stats["error"] = err
            compiled = getattr(launch, "compiled_stats", None)
            gpu = compiled() if callable(compiled) else None
            if gpu is not None:  # recorded beside the timing, not a feature: see FastLauncher.compiled_stats
                stats["gpu_compile"] = gpu
            t2 = time.perf_counter()
            self.db.put_measurement(key, self.device, rec, stats)
            self.seconds["store"] += time.perf_counter() - t2
            self.new_measurements += 1
        if timing is None:
            return math.inf, 0.0, err, 1
        return timing.median_us, timing.spread_us, None, 1


class KernelSearch:
    """The config search of one kernel (group gi of a running program): each config's variant (built,
    or why it cannot be), each measured config's result, the failures and how many variants were
    newly measured. The tuner-wide parts (ranking, the DB, the timer) are the KernelTuner's."""

    def __init__(self, tuner: KernelTuner, builder: Any, gi: int, launch: Any, info: Any, env: list,
                 ids: list[str], gkey: str) -> None:
        self.tuner, self.builder, self.gi, self.launch, self.info, self.env = tuner, builder, gi, launch, info, env
        self.ids, self.gkey = ids, gkey
        self.group = builder.groups[gi]
        self.default: LaunchConfig = info.config
        self.candidates: list[LaunchConfig] = []
        self.variants: dict[LaunchConfig, Variant | str] = {}   # a str: why the codegen cannot build it
        self.results: dict[LaunchConfig, Result] = {}
        self.failures: list[tuple[str, str]] = []
        self.measured = 0                                       # variants newly measured (not from the DB)
        self.outs: list[int] = []                               # the kernel's output slots
        self.ref: list[torch.Tensor] = []                       # the default config's outputs

    def build(self, cfg: LaunchConfig) -> None:
        """cfg's variant (launch, info, record), or why the codegen cannot build it (it scores infinity)."""
        t = self.tuner
        t0 = time.perf_counter()
        try:
            lv, iv = (self.launch, self.info) if cfg == self.default else self.builder.variant(self.gi, cfg)
            self.variants[cfg] = (lv, iv, kernel_record(iv, lv, self.env, t.graph, self.gkey, t.traits, self.ids))
        except Exception as e:  # noqa: BLE001 - a config the codegen cannot build scores infinity
            self.variants[cfg] = f"codegen failed: {type(e).__name__}: {e}"
        t.seconds["codegen"] += time.perf_counter() - t0

    def build_candidates(self, configs: list[LaunchConfig]) -> None:
        self.candidates = configs
        for cfg in configs:
            self.tuner.check_deadline(f"kernel {self.info.name}'s config sources")   # 48 sources can take minutes
            self.build(cfg)

    def select(self) -> list[LaunchConfig]:
        """The configs measured first: the default, the top-k built candidates by predicted time
        (nearest-default breaks ties, the families interleaved), some explored."""
        tuner, default = self.tuner, self.default
        ok = [c for c in self.candidates if not isinstance(self.variants[c], str)]
        rest = [c for c in ok if c != default]
        if not rest:
            return [default]
        # the default is ranked with the rest: a predictor that ranks a kernel's configs together
        # (GroupContextPredictor) would rank the whole group again when the default is timed next
        pred_of = dict(zip(ok, tuner.predict([self.variants[c][2] for c in ok])))
        preds = [pred_of[c] for c in rest]
        rfull = next_pow2(max(self.group.rnumel, 1)) if self.group.is_reduction else 0
        ranked = interleave_families([c for _, _, c in sorted(((p, i, c) for i, (p, c) in enumerate(zip(preds, rest))),
                                                               key=lambda t: t[:2])], rfull)
        k = tuner.settings.top_k if tuner.bench.measures else 1
        n_explore = int(round(k * tuner.settings.explore)) if tuner.bench.measures else 0
        top = ranked[: max(0, k - n_explore)]
        pool = ranked[len(top):]
        explore = tuner.rng.sample(pool, min(n_explore, len(pool)))
        return [default] + top + explore

    def take_reference(self) -> None:
        """Run the default config: its outputs are what every variant is checked against. An output
        the kernel adds into (a scatter's, ScatterBody) keeps its content from before the run, put
        back before each variant's checked run."""
        self.outs = [self.builder.slot(w) for w in self.info.writes]
        by_name = self.builder.graph.by_name
        self.initial = {s: self.env[s].clone() for w, s in zip(self.info.writes, self.outs)
                        if w in by_name and by_name[w].is_scatter}
        self.launch.run(self.env)
        self.ref = [self.env[s].clone() for s in self.outs]

    def reset(self) -> None:
        """The outputs the kernel adds into as they were before it ran."""
        for s, before in self.initial.items():
            self.env[s].copy_(before)

    def leave_reference(self) -> None:
        """env as the default config's run left it (timed runs added into a scatter's output again)."""
        for s, r in zip(self.outs, self.ref):
            if s in self.initial:
                self.env[s].copy_(r)

    def measure(self, cfg: LaunchConfig) -> None:
        """cfg's result: from the DB or timed (its variant built first if it is a neighbour outside
        the candidates); infinity with the reason when it cannot be built, fails or is wrong."""
        if cfg not in self.variants:
            self.build(cfg)
        v = self.variants[cfg]
        if isinstance(v, str):
            self.results[cfg] = (math.inf, 0.0, v, {})
            return
        lv, _, rec = v
        us, spread, err, new = self.tuner.measure_variant(lv, rec, self.env, self.outs, self.ref, self.reset)
        self.measured += new
        self.results[cfg] = (us, spread, err, rec)
        if err:
            self.failures.append((str(cfg), err))

    def refine(self) -> None:
        """Best-first local search from the measured configs, as Inductor's max-autotune runs a
        coordinate descent after its candidates: the fastest measured config not yet expanded has
        its untried neighbours (`neighbour_configs`) measured, best predicted first, while
        `settings.refine` lasts; then the next fastest. A faster neighbour is expanded next (descent);
        when none is faster the runner-up is (a plain descent stops there, yet the seed example's
        best row config is two moves from the default across a tie: RBLOCK 2048 -> 1024 at 8 warps
        is level, then 16 warps is 1% faster). Knobs interact (rmsnorm's looped rows beat its
        persistent ones only with cache hints; docs/defaults.md), so a
        search that stops at the ranked top-k can leave a few percent behind."""
        t = self.tuner
        left = t.settings.refine if t.bench.measures else 0
        expanded: set[LaunchConfig] = set()
        while left > 0:
            open_ = {c: r[0] for c, r in self.results.items() if c not in expanded and math.isfinite(r[0])}
            if not open_:
                return
            centre = best_config(open_, self.default)
            expanded.add(centre)
            near = [c for c in neighbour_configs(centre, self.group) if c not in self.results]
            if not near:
                continue
            # a neighbour not generated yet is ranked by the centre's record with its own config
            # (the op mix is the centre's; the predictor reads sizes, bytes and the config)
            centre_rec = self.results[centre][3]
            recs = [self.variants[c][2] if isinstance(self.variants.get(c), tuple) else {**centre_rec, "config": c.to_json()}
                    for c in near]
            preds = t.predict(recs)
            order = sorted(range(len(near)), key=lambda i: (preds[i], i))
            batch = [near[i] for i in order[:left]]
            with compiling_ahead(t.to_compile(batch, self.variants)):
                for cfg in batch:
                    self.measure(cfg)
                    left -= 1

    def choose(self) -> KernelChoice:
        """The fastest measured config and its close runners-up; runs the default again, so that the
        kernels that follow read its outputs."""
        for cfg, v in self.variants.items():
            if isinstance(v, str):
                self.failures.append((str(cfg), v))
        self.launch.run(self.env)  # leave the default's outputs for the kernels that follow
        results = self.results
        best = best_config({c: r[0] for c, r in results.items()}, self.default)
        us, spread, _, rec = results[best]
        close = sorted((r[0], str(c), c) for c, r in results.items()
                       if c != best and math.isfinite(r[0]) and r[0] <= us * (1 + CLOSE_SHARE))
        return KernelChoice(self.gkey, best, us, spread, rec, len(results), self.measured, tuple(self.failures),
                            tuple(c for _, _, c in close[:CLOSE_KEEP]))
