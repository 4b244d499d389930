"""Run the broad corpus side by side: eager, torch.compile (default, max-autotune-no-cudagraphs),
autofuse's default plan and autofuse tuned with a small budget.

    python3 -m benchmarks.programs --out DIR [--variants eager,inductor,autofuse_default]
        [--only CATEGORY ...] [--names NAME ...] [--max-programs N] [--time-budget S]
        [--tune-trials N --tune-budget S] [--reps R --rounds K] [--gpu-ops N]
    python3 -m benchmarks.programs --device cpu --shrink --out DIR     (CPU check, no timing: eager,
        autofuse_default and, if asked for, autofuse_tuned)

Every variant is checked against eager before it is timed (autofuse compiled strict, its check
run with poisoned buffers); a variant that fails to compile or differs is recorded, not fatal. A
train program's variants (and its tune) are its training step: forward and backward, checked on
outputs and gradients and timed whole (`train.py`).
Timing reuses `benchmarks/run.py`: CUDA events per call behind a GPU sleep, the variants taking
turns over interleaved rounds, inputs rotated when a program fits the L2 several times. Writes
DIR/results.json (after every program, so a cut-short run keeps what it measured), results.md
(per-program rows, per-category geomeans of each variant's time ÷ torch.compile default's; with
--gpu-ops, each slow program's costliest GPU operations per variant) and results.png (when
matplotlib imports). Programs are taken in an order interleaved across
categories, so a run stopped by --time-budget or --max-programs still covers every category.
"""
from __future__ import annotations

import argparse
import datetime
import functools
import json
import math
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import torch

from ..run import copy_bandwidth, gpu_profile, host_us, input_set_count, time_interleaved
from . import categories, select
from .base import Program
from .check import float64_outputs, mismatch
from .train import step_bytes, wrapper

ALL_VARIANTS = ("eager", "inductor", "inductor_max_autotune", "autofuse_rules", "autofuse_default", "autofuse_tuned")
DEFAULT_VARIANTS = "eager,inductor,autofuse_default"
BASELINE = "inductor"
PROFILE_CALLS = 5   # calls under the profiler with --gpu-ops
TARGET_SPEED = 0.97  # a program below this share of torch.compile default's speed is listed as slow


def _slow(row: dict[str, Any], variant: str) -> bool:
    return row["variants"].get(variant, {}).get("vs_inductor", 0) > 1 / TARGET_SPEED


def _nbytes(v: Any) -> int:
    if isinstance(v, torch.Tensor):
        return v.numel() * v.element_size()
    return sum(_nbytes(x) for x in v) if isinstance(v, (list, tuple)) else 0


def _error(e: BaseException) -> str:
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {first[:300]}"


def build_variant(name: str, module: torch.nn.Module, args: tuple, db: str | None) -> Callable[..., Any]:
    """The compiled callable of one variant (autofuse strict: a compile error raises)."""
    import autofuse
    if name == "eager":
        return module
    if name == "inductor":
        return torch.compile(module)
    if name == "inductor_max_autotune":
        return torch.compile(module, mode="max-autotune-no-cudagraphs")
    if name == "autofuse_default":
        return autofuse.compile(module, strict=True, use_db=False)
    if name == "autofuse_rules":   # the default plan without compile-time autotuning: size rules only
        return autofuse.compile(module, strict=True, use_db=False, autotune=False)
    if name == "autofuse_tuned":
        if db is None:
            raise RuntimeError("no tuning DB (the tune failed or --tune-trials is 0)")
        return autofuse.compile(module, db=db, on_miss="error", strict=True)
    raise ValueError(f"unknown variant {name!r}; choose from {', '.join(ALL_VARIANTS)}")


def check_autofuse(name: str, module: torch.nn.Module, args: tuple, db: str | None,
                   wrap: Callable[[Callable[..., Any]], Callable[..., Any]] = lambda f: f) -> Any:
    """Outputs of the variant compiled with poisoned buffers (unwritten elements show up); `wrap`
    makes a train program's step of it."""
    import autofuse
    kw = ({"db": db, "on_miss": "error"} if name == "autofuse_tuned" else
          {"use_db": False, "autotune": name != "autofuse_rules"})
    return wrap(autofuse.compile(module, strict=True, poison=True, **kw))(*args)


def tune(module: torch.nn.Module, args: tuple, db: str, trials: int, budget: float,
         train: bool = False) -> dict[str, Any]:
    """Search plans for the graphs the variants run: the inference graphs, or with `train` a
    training step's forward and backward graphs."""
    import autofuse
    t0 = time.perf_counter()
    with torch.set_grad_enabled(train):
        res = autofuse.tune(module, args, db=db, trials=trials, time_budget=budget, progress=False,
                            compare_torch_compile=False, train=train)
    return {"seconds": time.perf_counter() - t0, **res.to_json()}


def run_program(p: Program, opts: argparse.Namespace, bw: float | None) -> dict[str, Any]:
    device, timed = opts.device, opts.device == "cuda"
    torch._dynamo.reset()
    module, args = p.make(device, opts.shrink)
    wrap = wrapper(p, module)   # a train program: every variant runs as its training step
    eager = wrap(module)
    with torch.no_grad():
        expected = eager(*args)
    params = sum(_nbytes(t) for t in module.parameters()) + sum(_nbytes(t) for t in module.buffers())
    min_bytes = step_bytes(eager, module, args, expected) if p.train else _nbytes(args) + _nbytes(expected) + params
    row: dict[str, Any] = {"program": p.name, "category": p.category, "dtype": str(p.dtype).replace("torch.", ""),
                           "min_bytes": min_bytes, "variants": {}}
    db = None
    if "autofuse_tuned" in opts.variants:
        db = str(Path(opts.out) / "tuning.db")
        try:
            row["tune"] = tune(module, args, db, opts.tune_trials, opts.tune_budget, p.train)
        except Exception as e:  # noqa: BLE001 - a failed tune is recorded; the other variants still run
            row["tune"] = {"error": _error(e)}
            db = None
    ok: dict[str, Callable[..., Any]] = {}
    # the float64 outputs, computed once and only where a variant needs them
    reference = functools.cache(lambda: float64_outputs(module, args, p))
    for name in opts.variants:
        entry: dict[str, Any] = {}
        row["variants"][name] = entry
        try:
            with torch.no_grad():
                if name.startswith("autofuse"):
                    why = mismatch(p, check_autofuse(name, module, args, db, wrap), expected, reference)
                    if why:
                        entry.update(correct=False, error=f"differs from eager (poisoned buffers): {why}")
                        continue
                fn = wrap(build_variant(name, module, args, db))
                t0 = time.perf_counter()
                out = fn(*args)
                if timed:
                    torch.cuda.synchronize()
                entry["first_call_s"] = time.perf_counter() - t0
            why = mismatch(p, out, expected, reference)
            entry["correct"] = why is None
            if why:
                entry["error"] = f"differs from eager: {why}"
            else:
                ok[name] = fn
        except Exception as e:  # noqa: BLE001 - a failing variant is recorded, the run goes on
            entry.update(correct=False, error=_error(e))
    if timed and ok:
        _time(p, row, ok, args, min_bytes, bw, opts)
    return row


def _time(p: Program, row: dict[str, Any], ok: dict[str, Callable[..., Any]], args: tuple, min_bytes: int,
          bw: float | None, opts: argparse.Namespace) -> None:
    sets = input_set_count(min_bytes, 4)
    input_sets = [args] + [p.make(opts.device, opts.shrink, seed=p.seed + k)[1] for k in range(1, sets)]
    row["input_sets"] = len(input_sets)
    with torch.no_grad():
        try:
            samples = time_interleaved(ok, input_sets, opts.reps, opts.rounds)
        except Exception:  # noqa: BLE001 - one variant failing while timed: time the others alone
            samples = {}
            for name, f in ok.items():
                try:
                    samples[name] = time_interleaved({name: f}, input_sets, opts.reps, opts.rounds)[name]
                except Exception as e:  # noqa: BLE001
                    row["variants"][name]["error"] = f"while timed: {_error(e)}"
        for name, s in samples.items():
            ms = statistics.median(s)
            entry = row["variants"][name]
            entry.update(ms=ms, samples=len(s))
            if bw:
                entry["bw_share"] = min_bytes / (ms * 1e-3) / bw
            if name != "eager":
                try:
                    entry["host_us"] = host_us(ok[name], args)
                except Exception as e:  # noqa: BLE001
                    entry["host_error"] = _error(e)
            if opts.gpu_ops:   # where the GPU time goes: the costliest operations of a call
                entry["gpu_ops"] = gpu_profile(lambda f=ok[name]: f(*args), PROFILE_CALLS, opts.gpu_ops)["gpu_ops"]
    base = row["variants"].get(BASELINE, {}).get("ms")
    for entry in row["variants"].values():
        if base and entry.get("ms"):
            entry["vs_inductor"] = entry["ms"] / base


def geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def category_means(results: dict[str, Any]) -> dict[str, dict[str, tuple[float, int]]]:
    """Per category (and "all"): each variant's geomean of time ÷ torch.compile default, over the
    programs where both were timed, with that count."""
    out: dict[str, dict[str, tuple[float, int]]] = {}
    names = results["variants"]
    for cat in [*dict.fromkeys(r["category"] for r in results["programs"]), "all"]:
        rows = [r for r in results["programs"] if cat == "all" or r["category"] == cat]
        out[cat] = {}
        for n in names:
            xs = [r["variants"][n]["vs_inductor"] for r in rows if "vs_inductor" in r["variants"].get(n, {})]
            if xs:
                out[cat][n] = (geomean(xs), len(xs))
    return out


def markdown(results: dict[str, Any]) -> str:
    names = results["variants"]
    progs = results["programs"]
    lines = [f"Device: {results['device']}; torch {results['torch']}, triton {results['triton']}; {results['date']}.",
             f"Command: `{results['command']}`.", ""]
    if results.get("copy_bandwidth_TBps"):
        lines[0] += (f" Copy bandwidth {results['copy_bandwidth_TBps']:.2f} TB/s (this run). Median of "
                     f"{results['rounds']} interleaved rounds of {results['reps']} CUDA-event-timed calls per variant.")
    correct = {n: sum(1 for r in progs if r["variants"].get(n, {}).get("correct")) for n in names}
    lines.append(f"{len(progs)} programs run" + (f", {len(results['not_run'])} not run (time budget or "
                                                 f"--max-programs)" if results.get("not_run") else "") + ". "
                 "Correct against eager: " + ", ".join(f"{n} {correct[n]}/{len(progs)}" for n in names) + ".")
    means = category_means(results)
    timed = [n for n in names if any(n in m for m in means.values())]
    if timed:
        lines += ["", "Geomean of time ÷ torch.compile default (lower is better; programs timed):", "",
                  "| category | " + " | ".join(timed) + " |", "|---|" + "---|" * len(timed)]
        for cat, m in means.items():
            cells = [f"{m[n][0]:.3f} ({m[n][1]})" if n in m else "—" for n in timed]
            lines.append(f"| {'**all**' if cat == 'all' else cat} | " + " | ".join(cells) + " |")
        for n in timed:
            slow = [r["program"] for r in progs if _slow(r, n)]
            if n != BASELINE and slow:
                lines.append(f"\n{n}: {len(slow)} programs below 0.97× torch.compile default's speed.")
    lines += ["", "| program | category | MB | " + " | ".join(f"{n} ms (÷ ind, % bw)" if results.get("timed") else n
                                                          for n in names) + " |",
              "|---|---|---|" + "---|" * len(names)]
    for r in progs:
        cells = []
        for n in names:
            e = r["variants"].get(n, {})
            if "ms" in e:
                bw = f", {100 * e['bw_share']:.0f}%" if "bw_share" in e else ""
                cells.append(f"{e['ms']:.3f} ({e.get('vs_inductor', float('nan')):.2f}{bw})")
            elif e.get("correct"):
                cells.append("ok")
            else:
                cells.append(("✗ " + e.get("error", "not run"))[:80].replace("|", "/"))
        lines.append(f"| {r['program']} | {r['category']} | {r['min_bytes'] / 1e6:.0f} | " + " | ".join(cells) + " |")
    if results.get("not_run"):
        lines += ["", "Not run: " + ", ".join(results["not_run"])]
    lines += _gpu_ops_section(progs, names)
    return "\n".join(lines) + "\n"


def _gpu_ops_section(progs: list[dict[str, Any]], names: list[str]) -> list[str]:
    """The costliest GPU operations per call of each program below 0.97x torch.compile's speed
    (with --gpu-ops), every variant's side by side: where the time goes."""
    slow = [r for r in progs
            if any(_slow(r, n) for n in names) and any("gpu_ops" in r["variants"].get(n, {}) for n in names)]
    if not slow:
        return []
    out = ["", "GPU operations per call of the programs below 0.97× torch.compile default's speed:"]
    for r in slow:
        out.append(f"\n{r['program']}:")
        for n in names:
            ops = r["variants"].get(n, {}).get("gpu_ops")
            if ops:
                out += [f"- {n}:", "```", *ops, "```"]
    return out


def plot(results: dict[str, Any], path: Path) -> str | None:
    """Per-category geomean bars (time ÷ torch.compile default); a note instead when matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed: no plot"
    means = category_means(results)
    names = [n for n in results["variants"] if any(n in m for m in means.values())]
    if not names:
        return "nothing timed: no plot"
    cats = list(means)
    fig, ax = plt.subplots(figsize=(max(8, len(cats) * 0.8), 5))
    w = 0.8 / len(names)
    for i, n in enumerate(names):
        ax.bar([c + i * w for c in range(len(cats))], [means[c].get(n, (0, 0))[0] for c in cats], w, label=n)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks([c + 0.4 - w / 2 for c in range(len(cats))])
    ax.set_xticklabels(cats, rotation=35, ha="right", fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("time ÷ torch.compile default (geomean, lower is better)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return None


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--variants", default=DEFAULT_VARIANTS, help=f"comma-separated, from {','.join(ALL_VARIANTS)}")
    p.add_argument("--only", nargs="*", default=None, help=f"categories: {' '.join(categories())}")
    p.add_argument("--names", nargs="*", default=None, help="program names, run in the order given")
    p.add_argument("--max-programs", type=int, default=None)
    p.add_argument("--time-budget", type=float, default=400.0,
                   help="seconds; no program starts that would end after it (a guess: the mean so far)")
    p.add_argument("--tune-trials", type=int, default=8)
    p.add_argument("--tune-budget", type=float, default=20.0, help="seconds of search per program")
    p.add_argument("--reps", type=int, default=20, help="timed calls per variant per round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--shrink", action="store_true", help="CPU sizes")
    p.add_argument("--list", action="store_true", help="print the selected programs and exit")
    p.add_argument("--gpu-ops", type=int, default=0, metavar="N",
                   help="profile each timed variant and record its N costliest GPU operations per call "
                        "(listed in results.md for the programs below 0.97x torch.compile's speed)")
    opts = p.parse_args(argv)
    opts.variants = [v for v in opts.variants.split(",") if v]
    bad = [v for v in opts.variants if v not in ALL_VARIANTS]
    if bad:
        p.error(f"unknown variants {bad}; choose from {','.join(ALL_VARIANTS)}")
    if opts.device == "cpu":   # the interpreter: correctness only (a CPU tune ranks plans by prediction)
        cpu = ("eager", "autofuse_rules", "autofuse_default", "autofuse_tuned")
        opts.variants = [v for v in opts.variants if v in cpu] or ["eager", "autofuse_default"]
    return opts


def main(argv: list[str] | None = None) -> int:
    opts = parse(argv)
    try:
        programs = select(opts.only, opts.names, None)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if opts.list:
        for p in programs:
            print(f"{p.category:16s} {p.name}")
        return 0
    if opts.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device: use --device cpu --shrink", file=sys.stderr)
        return 2
    import triton
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    timed = opts.device == "cuda"
    bw = copy_bandwidth("cuda", reps=opts.reps) if timed else None
    results: dict[str, Any] = {
        "device": torch.cuda.get_device_name() if timed else "cpu (Triton interpreter, no timing)",
        "torch": torch.__version__, "triton": triton.__version__, "python": platform.python_version(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": "python3 -m benchmarks.programs " + " ".join(argv if argv is not None else sys.argv[1:]),
        "copy_bandwidth_TBps": bw / 1e12 if bw else None, "reps": opts.reps, "rounds": opts.rounds,
        "timed": timed, "variants": opts.variants, "programs": [], "not_run": []}
    t0 = time.perf_counter()
    for i, p in enumerate(programs):
        done = results["programs"]
        mean_s = sum(r["program_s"] for r in done) / len(done) if done else 0.0   # a guess at this one's seconds
        if (opts.max_programs is not None and i >= opts.max_programs) or \
                time.perf_counter() - t0 + mean_s > opts.time_budget:
            results["not_run"].append(p.name)
            continue
        start = time.perf_counter()
        row = run_program(p, opts, bw)
        row["program_s"] = time.perf_counter() - start
        row["seconds"] = time.perf_counter() - t0
        results["programs"].append(row)
        print(f"[{i + 1}/{len(programs)} {row['seconds']:.0f}s] {p.name}: " + "; ".join(
            f"{n} " + (f"{e['ms']:.3f} ms" if "ms" in e else "ok" if e.get("correct") else e.get("error", "?")[:120])
            for n, e in row["variants"].items()), flush=True)
        if timed:
            torch.cuda.empty_cache()
        (out / "results.json").write_text(json.dumps(results, indent=1))
    (out / "results.json").write_text(json.dumps(results, indent=1))
    md = markdown(results)
    note = plot(results, out / "results.png")
    if note:
        md += f"\n({note}.)\n"
    (out / "results.md").write_text(md)
    print(md)
    return 0
