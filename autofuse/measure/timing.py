"""Benchmarkers: how long a kernel or a whole plan takes. Injected, so the search is testable.

Note: every benchmarker answers `time(fn, what)`, where `what` describes the thing timed (a
kernel's feature record, or {"kind": "plan", "kernels": [...]}) so that a fake or predicting
benchmarker can answer without running anything. `measures` says whether the answer is a
measurement (stored in the tuning DB, a fact) or a prediction (never stored as a measurement).
The CUDA benchmarker zeroes a buffer twice the L2 size before every rep, so no rep reads what
the previous one left in the cache, then queues a spin kernel longer than fn's host-side launch
time, so the events around fn measure the GPU's work and not the host's launch latency.
"""
from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence

import torch


@dataclass(frozen=True)
class Timing:
    median_us: float
    p10_us: float
    p90_us: float
    min_us: float
    reps: int
    measured: bool = True

    @staticmethod
    def of(samples_us: Sequence[float], measured: bool = True) -> "Timing":
        s = sorted(samples_us)
        n = len(s)
        return Timing(statistics.median(s), s[int(0.1 * (n - 1))], s[int(math.ceil(0.9 * (n - 1)))], s[0], n, measured)

    @staticmethod
    def predicted(us: float) -> "Timing":
        return Timing(us, us, us, us, 0, False)

    @property
    def spread_us(self) -> float:
        return self.p90_us - self.p10_us

    def to_json(self) -> dict[str, Any]:
        return {"median_us": self.median_us, "p10_us": self.p10_us, "p90_us": self.p90_us, "min_us": self.min_us,
                "reps": self.reps, "measured": self.measured}


class Benchmarker(Protocol):
    """Times fn (already run once and checked by the caller). `what` describes what fn runs."""

    measures: bool

    def time(self, fn: Callable[[], Any], what: dict[str, Any]) -> Timing: ...


def l2_cache_bytes(device: Any = None) -> int:
    """The GPU's L2 size (what a flush must overwrite), from the device (an H100 reports 50 MiB);
    60 MiB where the driver does not say or there is no GPU."""
    if not torch.cuda.is_available():
        return 60 * 2**20
    return int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 60 * 2**20)


class CudaEventBenchmarker:
    """Median of CUDA-event-timed reps after warm-up, L2 flushed before each rep."""

    measures = True

    def __init__(self, reps: int = 50, warmup: int = 5, max_seconds: float = 0.5, l2_bytes: int | None = None) -> None:
        self.reps, self.warmup, self.max_seconds = reps, warmup, max_seconds
        self._flush = torch.empty(2 * (l2_bytes or l2_cache_bytes()) // 4, dtype=torch.float32, device="cuda")

    def time(self, fn: Callable[[], Any], what: dict[str, Any]) -> Timing:
        for _ in range(self.warmup):
            fn()
        torch.cuda.synchronize()
        probe_s, probe_e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        probe_s.record()
        fn()
        probe_e.record()
        torch.cuda.synchronize()
        one_ms = max(probe_s.elapsed_time(probe_e), 1e-3)
        reps = max(5, min(self.reps, int(self.max_seconds * 1e3 / one_ms)))
        t0 = time.perf_counter()
        fn()
        host_s = time.perf_counter() - t0
        # keep the GPU busy while the host launches fn, so the events time the GPU's work only
        # (host overhead is reported separately), not the host's launch latency
        spin = int(min(5e7, max(2e5, 4e9 * host_s)))
        torch.cuda.synchronize()

        def cold() -> None:
            self._flush.zero_()
            torch.cuda._sleep(spin)
        return Timing.of([ms * 1e3 for ms in event_samples_ms(lambda i: fn(), reps, before_each=cold)])


def event_samples_ms(run: Callable[[int], Any], reps: int, before_each: Callable[[], Any] | None = None,
                     queue_ahead_cycles: int = 0) -> list[float]:
    """Milliseconds of each of `reps` calls run(i), timed by CUDA events on the current stream, with
    one synchronize at the end: the one timer of the tuner and the benchmarks. `before_each` runs
    outside the events before every call (the tuner's L2 flush and spin); `queue_ahead_cycles`
    puts a GPU sleep ahead of all calls, during which the host queues them (the benchmarks, which
    rotate input sets larger than the L2 instead of flushing it)."""
    if queue_ahead_cycles:
        torch.cuda._sleep(queue_ahead_cycles)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        if before_each is not None:
            before_each()
        starts[i].record()
        run(i)
        ends[i].record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in zip(starts, ends)]


class FakeBenchmarker:
    """Deterministic times from a cost function of `what`; for tests of the search on the CPU.

    Kernel records get cost(record); a plan gets the sum over its kernels plus `launch_us` each,
    unless plan_cost is given. Every call is counted, so tests can check what was measured.
    """

    measures = True

    def __init__(self, cost: Callable[[dict[str, Any]], float], plan_cost: Callable[[dict[str, Any]], float] | None = None,
                 launch_us: float = 1.0, noise_us: float = 0.0) -> None:
        self.cost, self.plan_cost, self.launch_us, self.noise_us = cost, plan_cost, launch_us, noise_us
        self.calls: list[dict[str, Any]] = []

    def time(self, fn: Callable[[], Any], what: dict[str, Any]) -> Timing:
        self.calls.append(what)
        if what.get("kind") == "plan":
            us = self.plan_cost(what) if self.plan_cost else sum(self.cost(k) + self.launch_us for k in what["kernels"])
        elif what.get("kind") == "extern":
            us = 0.0
        else:
            us = self.cost(what)
        n = self.noise_us
        return Timing(us, us - n, us + n, us - n, 10)


class PredictingBenchmarker:
    """No GPU: times are the predictor's (the cost model, or the byte-count estimate); nothing is measured."""

    measures = False

    def __init__(self, predictor: Any, launch_us: float = 3.0) -> None:
        self.predictor, self.launch_us = predictor, launch_us

    def time(self, fn: Callable[[], Any], what: dict[str, Any]) -> Timing:
        if what.get("kind") == "plan":
            ks = what["kernels"]
            return Timing.predicted(sum(self.predictor.predict_us(ks)) if ks else 0.0)
        if what.get("kind") == "extern":
            return Timing.predicted(self.launch_us)
        return Timing.predicted(float(self.predictor.predict_us([what])[0]))


def copy_bandwidth(device: str = "cuda", nbytes: int = 2 * 2**30, reps: int = 20) -> float:
    """Bytes per second (read + write) of a large device-to-device copy. Its source is filled, not
    drawn: a draw would move the caller's generator, and the first compile that measures the
    bandwidth would change the draws of a seeded training step."""
    src = torch.full((nbytes // 4,), 1.5, device=device)
    dst = torch.empty_like(src)
    t = CudaEventBenchmarker(reps=reps, warmup=3).time(lambda: dst.copy_(src), {"kind": "copy"})
    return 2 * nbytes / (t.median_us * 1e-6)


def rotated(items: Sequence[Any], k: int) -> list[Any]:
    """items starting at index k (mod len): round k's order when candidates take turns in rounds, so
    that none always runs first or right after the same neighbour (whose L2 contents and clock state
    it inherits) — the tuner's finalists and benchmarks/run.py's variants."""
    if not items:
        return []
    k %= len(items)
    return list(items[k:]) + list(items[:k])
