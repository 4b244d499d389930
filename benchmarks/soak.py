"""Soak run: many random programs through `autofuse.compile(strict=True)`, each compared with eager.

    python3 -m benchmarks.soak [--seed 0] [--programs 10000] [--time-budget SECONDS]
        [--nonfinite 1.0] [--program-timeout 300] [--train] [--device cpu|cuda] [--out benchmarks/results/soak.json]
    python3 -m benchmarks.soak --rerun OLD.json --out NEW.json    # the failed seeds of an earlier run again

Programs come from the project's random program generator (`tests/randgraph.py`, the one the
differential tests use); `--nonfinite` is the share of programs drawn with NaN and +-inf mixed into
their float inputs. Each program is compiled with poisoned buffers (an unwritten element shows up
as a mismatch) and compared with eager at the tests' per-dtype tolerances, NaN equal to NaN, strides
included. Every program lands in exactly one of: equal, mismatched (ran, wrong values, dtype, shape
or strides), error (the compiler raised, or the program ran past --program-timeout). "compiled"
counts the programs whose every captured graph autofuse compiled (none ran eagerly).

With `--train` each program is the training-step check of tests/test_random_graphs.py's
test_random_graph_training instead (tests/randgraph_train.py's compare_training): seed N draws a
program to train through (`make_training_case`; "skipped" when its stream holds none), its float32
and float64 inputs become leaves that require grad, and torch.compile with autofuse's backend runs
forward and backward; outputs, gradients and the untouched inputs are compared with eager's.
"with_backward" counts the programs whose backward graph autofuse compiled and ran.

The JSON result (counts, and each failure's seed and reason) is rewritten every few programs, so a
run stopped by its time budget or killed keeps what it finished. A failure is replayed with
`python3 -c "from tests.randgraph import make_case; print(make_case(SEED, nonfinite=P)[2])"`
(with --train: `make_training_case`).
"""
from __future__ import annotations

import argparse
import json
import platform
import signal
import sys
import time
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch

import autofuse
from autofuse.api import Recorder


class ProgramTimeout(Exception):
    """A program ran past its time limit."""


@dataclass(frozen=True)
class Outcome:
    """How one program fared: kind is "equal", "mismatched", "error" or (--train, no program to
    train through) "skipped"; `backward`: autofuse compiled and ran its backward graph."""

    seed: int
    kind: str
    compiled: bool
    nonfinite_inputs: bool
    seconds: float
    reason: str = ""
    backward: bool = False


@dataclass
class Tally:
    """Counts over the programs run so far, and every failure."""

    programs: int = 0
    compiled: int = 0
    equal: int = 0
    mismatched: int = 0
    errors: int = 0
    skipped: int = 0
    with_nonfinite_inputs: int = 0
    with_backward: int = 0
    failures: list[dict[str, Any]] = field(default_factory=list)

    def add(self, o: Outcome) -> None:
        self.programs += 1
        self.compiled += o.compiled
        self.with_nonfinite_inputs += o.nonfinite_inputs
        self.with_backward += o.backward
        if o.kind == "equal":
            self.equal += 1
        elif o.kind == "mismatched":
            self.mismatched += 1
        elif o.kind == "skipped":
            self.skipped += 1
        else:
            self.errors += 1
        if o.kind not in ("equal", "skipped"):
            self.failures.append({"seed": o.seed, "kind": o.kind, "nonfinite_inputs": o.nonfinite_inputs,
                                  "reason": o.reason})


def _has_nonfinite(args: Sequence[Any]) -> bool:
    return any(isinstance(a, torch.Tensor) and a.is_floating_point() and not bool(torch.isfinite(a).all())
               for a in args)


def _on_alarm(signum: int, frame: Any) -> None:
    raise ProgramTimeout("ran past the program time limit")


def _error(seed: int, e: BaseException, bad_inputs: bool, seconds: float) -> Outcome:
    """A compiler failure (or a program past its time limit), with where it was raised."""
    last = traceback.extract_tb(e.__traceback__)[-1:] if e.__traceback__ else []
    where = f" [{last[0].filename}:{last[0].lineno}]" if last else ""
    return Outcome(seed, "error", False, bad_inputs, seconds, f"{type(e).__name__}: {str(e)[:500]}{where}")


def run_training(seed: int, nonfinite: float, timeout_s: int, device: str = "cpu") -> Outcome:
    """Draw training program `seed`, run its forward and backward compiled and eagerly, compare."""
    from tests.randgraph import make_training_case
    from tests.randgraph_train import Mismatch, compare_training

    case = make_training_case(seed, device=device, nonfinite=nonfinite)
    if case is None:
        return Outcome(seed, "skipped", False, False, 0.0, "no draft with a well-conditioned backward")
    fn, args, _ = case
    bad_inputs = _has_nonfinite(args)
    start = time.perf_counter()
    recorder = Recorder()
    signal.alarm(max(1, timeout_s))
    kind, reason = "equal", ""
    try:
        compare_training(fn, args, recorder)
    except Mismatch as e:
        kind, reason = "mismatched", str(e)[:800]
    except Exception as e:  # noqa: BLE001 - every compiler failure is a finding, reported with its seed
        return _error(seed, e, bad_inputs, time.perf_counter() - start)
    finally:
        signal.alarm(0)
    graphs_ok = bool(recorder.outcomes) and all(o.compiled for o in recorder.outcomes)
    backward = any(o.label == "backward" and o.compiled for o in recorder.outcomes)
    return Outcome(seed, kind, graphs_ok, bad_inputs, time.perf_counter() - start, reason, backward)


def run_program(seed: int, nonfinite: float, timeout_s: int, device: str = "cpu") -> Outcome:
    """Draw program `seed`, compile it strictly, run it, compare with eager."""
    from tests.helpers import assert_close
    from tests.randgraph import make_case

    fn, args, _ = make_case(seed, device=device, nonfinite=nonfinite)
    bad_inputs = _has_nonfinite(args)
    expected = fn(*args)
    start = time.perf_counter()
    torch._dynamo.reset()
    recorder = Recorder()
    signal.alarm(max(1, timeout_s))
    try:
        compiled = autofuse.compile(fn, strategy="inductor", strict=True, poison=True, recorder=recorder)
        actual = compiled(*args)
    except Exception as e:  # noqa: BLE001 - every compiler failure is a finding, reported with its seed
        return _error(seed, e, bad_inputs, time.perf_counter() - start)
    finally:
        signal.alarm(0)
    seconds = time.perf_counter() - start
    graphs_ok = bool(recorder.outcomes) and all(o.compiled for o in recorder.outcomes)
    try:
        assert_close(actual, expected)
    except AssertionError as e:
        return Outcome(seed, "mismatched", graphs_ok, bad_inputs, seconds, str(e)[:800])
    return Outcome(seed, "equal", graphs_ok, bad_inputs, seconds)


def _write(path: str, meta: dict[str, Any], tally: Tally, elapsed: float, stopped: str) -> None:
    data = {**meta, "elapsed_s": round(elapsed, 1), "stopped_by": stopped,
            "counts": {k: getattr(tally, k) for k in
                       ("programs", "compiled", "equal", "mismatched", "errors", "with_nonfinite_inputs")
                       + (("skipped", "with_backward") if meta.get("train") else ())},
            "failures": tally.failures}
    with open(path, "w") as f:
        json.dump(data, f, indent=1)
        f.write("\n")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seed", type=int, default=0, help="first program seed (programs are SEED, SEED+1, ...)")
    p.add_argument("--programs", type=int, default=10000, help="programs to run at most")
    p.add_argument("--time-budget", type=float, default=None, help="stop starting programs after this many seconds")
    p.add_argument("--nonfinite", type=float, default=1.0, help="share of programs drawn with NaN/+-inf inputs")
    p.add_argument("--program-timeout", type=int, default=300, help="seconds one program may take (else an error)")
    p.add_argument("--out", default="benchmarks/results/soak.json")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument("--rerun", default=None,
                   help="run again the failed seeds of this earlier result (its --nonfinite and --train)")
    p.add_argument("--train", action="store_true",
                   help="check each program's forward and backward (test_random_graph_training's step)")
    p.add_argument("--device", default="cpu",
                   help="where programs run: cpu (Triton's interpreter) or cuda (kernels compiled for the GPU)")
    a = p.parse_args(argv)
    if a.programs < 0 or (a.time_budget is not None and a.time_budget < 0) or not 0 <= a.nonfinite <= 1:
        p.error("--programs and --time-budget must be >= 0, --nonfinite in [0, 1]")
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return _soak(a, argv)
    finally:
        signal.signal(signal.SIGALRM, previous)


def _soak(a: argparse.Namespace, argv: Sequence[str] | None) -> int:
    """Run the programs a asks for, rewriting the JSON result as it goes; 0 when every one was equal."""
    meta = {"command": "python3 -m benchmarks.soak " + " ".join(sys.argv[1:] if argv is None else argv),
            "seed": a.seed, "programs_requested": a.programs, "time_budget_s": a.time_budget,
            "nonfinite_share": a.nonfinite, "program_timeout_s": a.program_timeout, "train": a.train,
            "torch": torch.__version__, "python": platform.python_version(), "host": platform.machine(),
            "device": torch.cuda.get_device_name() if a.device.startswith("cuda") else a.device}
    seeds: Sequence[int] = range(a.seed, a.seed + a.programs)
    if a.rerun:
        with open(a.rerun) as f:
            old = json.load(f)
        seeds, a.nonfinite = [int(x["seed"]) for x in old["failures"]], float(old["nonfinite_share"])
        a.train = bool(old.get("train", False))
        meta.update(rerun_of=a.rerun, seeds=list(seeds), nonfinite_share=a.nonfinite, train=a.train)
    tally, t0, stopped = Tally(), time.perf_counter(), "programs"
    for seed in seeds:
        if a.time_budget is not None and time.perf_counter() - t0 > a.time_budget:
            stopped = "time budget"
            break
        o = (run_training if a.train else run_program)(seed, a.nonfinite, a.program_timeout, a.device)
        tally.add(o)
        if not a.quiet and (o.kind not in ("equal", "skipped") or tally.programs % 50 == 0):
            print(f"[{time.perf_counter() - t0:7.0f}s] {tally.programs} programs: {tally.equal} equal, "
                  f"{tally.mismatched} mismatched, {tally.errors} errors"
                  + (f" | seed {o.seed} {o.kind}: {o.reason[:160]}" if o.kind not in ("equal", "skipped") else ""),
                  flush=True)
        if tally.programs % 20 == 0 or o.kind not in ("equal", "skipped"):
            _write(a.out, meta, tally, time.perf_counter() - t0, "running")
    _write(a.out, meta, tally, time.perf_counter() - t0, stopped)
    print(f"{tally.programs} programs in {time.perf_counter() - t0:.0f}s: {tally.compiled} compiled, "
          f"{tally.equal} equal, {tally.mismatched} mismatched, {tally.errors} errors "
          f"({tally.with_nonfinite_inputs} with NaN/inf inputs"
          + (f"; {tally.with_backward} ran a compiled backward, {tally.skipped} skipped" if a.train else "")
          + f") -> {a.out}")
    return 0 if tally.mismatched == tally.errors == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
