"""The README's performance section, generated from a suite run's results.json so it cannot go stale.

    python -m benchmarks.readme_table [RESULTS.json]                    # print the markdown
    python -m benchmarks.readme_table [RESULTS.json] --update README.md # rewrite the marked block

RESULTS.json defaults to the latest suite run committed (`benchmarks/results/<date>-<machine>-suite/`,
the latest date first by name).

The block lies between `<!-- suite-table:start -->` and `<!-- suite-table:end -->`; --update
replaces what is between the markers and nothing else. The block holds the run's device and
versions, one row per case (time, speedup over Inductor default, share of the copy bandwidth), the
geometric means of autofuse's tuned plans over both Inductor modes, host time per call where the
run measured it, and, when the run records the
cost model its tuning ranked configs with and that differs from the one shipped for the device,
both versions.
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any, Sequence

START = "<!-- suite-table:start -->"
END = "<!-- suite-table:end -->"
VARIANTS = ("eager", "inductor", "inductor_max_autotune", "autofuse_inductor_plan", "autofuse_tuned")
TUNED = "autofuse_tuned"
BIG_BYTES = 100e6  # cases above this are bandwidth-bound on the GPU; smaller ones mostly host-bound
ROOT = Path(__file__).resolve().parent.parent
PRETRAINED = ROOT / "costmodel" / "pretrained"


def latest_suite_results(root: Path = ROOT) -> Path:
    """The results.json of the latest suite run under benchmarks/results (folders start with the date)."""
    runs = sorted((root / "benchmarks" / "results").glob("*-suite/results.json"))
    if not runs:
        raise FileNotFoundError("no benchmarks/results/*-suite/results.json")
    return runs[-1]


def geomean(xs: Sequence[float]) -> float:
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def _cell(entry: dict[str, Any]) -> str:
    if "ms" not in entry:
        return "wrong" if entry.get("correct") is False else "—"
    return f"{entry['ms']:.3f} ({entry.get('speedup_vs_inductor', 0):.2f}×, {100 * entry['bw_share']:.0f}%)"


def ratios(results: dict[str, Any], over: str) -> tuple[list[float], list[float]]:
    """Speedups of the tuned plan over the `over` variant: every case, and the cases above BIG_BYTES."""
    every, big = [], []
    for case in results["cases"]:
        v = case["variants"]
        t, base = v.get(TUNED, {}).get("ms"), v.get(over, {}).get("ms")
        if t and base:
            every.append(base / t)
            if case["min_bytes"] > BIG_BYTES:
                big.append(base / t)
    return every, big


def shipped_model(device: str, pretrained: Path = PRETRAINED) -> str | None:
    """The version of the cost model shipped for `device` (a CUDA device name), if any."""
    for path in sorted(pretrained.glob("*.json")):
        meta = json.loads(path.read_text())
        if any(device in d for d in meta.get("trained_on", {}).get("devices", ())):
            return meta.get("version")
    return None


def table(results: dict[str, Any], pretrained: Path = PRETRAINED) -> str:
    """The markdown of the README's block (without the markers)."""
    names = [n for n in VARIANTS if any(n in c["variants"] for c in results["cases"])]
    lines = [f"Device: {results['device']}; torch {results['torch']}, triton {results['triton']}; "
             f"{results['date'][:10]}; copy bandwidth {results['copy_bandwidth_TBps']:.2f} TB/s (measured in the run). "
             f"`{results['command'].split(' --out')[0]}`.", "",
             "| case | MB | " + " | ".join(f"{n} ms (× ind, % bw)" for n in names) + " |",
             "|---|---|" + "---|" * len(names)]
    for case in results["cases"]:
        cells = [_cell(case["variants"].get(n, {})) for n in names]
        lines.append(f"| {case['case']} | {case['min_bytes'] / 1e6:.0f} | " + " | ".join(cells) + " |")
    lines.append("")
    for over, label in (("inductor", "Inductor default"), ("inductor_max_autotune", "Inductor max-autotune")):
        every, big = ratios(results, over)
        if every:
            lines.append(f"Geometric mean of {TUNED} over {label}: **{geomean(every):.2f}×** on all {len(every)} "
                         f"cases, **{geomean(big):.2f}×** on the {len(big)} cases above {BIG_BYTES / 1e6:.0f} MB.")
    for case in results["cases"]:
        if "host_overhead_us" in case:
            lines.append("")
            lines.append(f"Host time per call, {case['case']} (µs, back-to-back calls, median of interleaved rounds): "
                         + ", ".join(f"{k} {v:.1f}" for k, v in case["host_overhead_us"].items()) + ".")
    used, shipped = results.get("costmodel"), shipped_model(results["device"], pretrained)
    if used and shipped and used != shipped:
        lines.append("")
        lines.append(f"The tuned plans were searched with the cost model `{used}`; the shipped model is "
                     f"`{shipped}`.")
    return "\n".join(lines) + "\n"


def update(text: str, block: str, start_marker: str = START, end_marker: str = END) -> str:
    """`text` with what lies between the markers replaced by `block`."""
    start, end = text.find(start_marker), text.find(end_marker)
    if start < 0 or end < start:
        raise ValueError(f"no {start_marker} ... {end_marker} block")
    return text[:start + len(start_marker)] + "\n" + block + text[end:]


# The model benchmark's and the corpus's tables, copied from the markdown their tools wrote for the
# latest committed run (`benchmarks/results/<date>-<machine>-models|unseen-models|corpus[-…]/results.md`).
EXTRA_BLOCKS = {"models": "models-table", "unseen-models": "unseen-models-table", "corpus": "corpus-table"}


def latest_results_md(what: str, root: Path = ROOT) -> Path:
    """The results.md of the latest committed run of `what` (folders `<date>-<machine>-<what>[-…]`),
    latest by the time the run recorded (several runs may share a date)."""
    runs = sorted(md for md in (root / "benchmarks" / "results").glob(f"*-{what}*/results.md")
                  if _measures(md.parent.name, what))
    if not runs:
        raise FileNotFoundError(f"no benchmarks/results/*-{what}*/results.md")

    def recorded(md: Path) -> str:
        js = md.with_name("results.json")
        return json.loads(js.read_text()).get("date", "") if js.exists() else ""
    return max(runs, key=lambda md: (recorded(md), md.parent.name))


def _measures(folder: str, what: str) -> bool:
    """Folder `<yyyy>-<mm>-<dd>-<machine>-<what>[-…]` is a run of `what` (not of `unseen-models` when
    `what` is `models`)."""
    parts = folder.split("-", 4)
    return len(parts) == 5 and (parts[4] == what or parts[4].startswith(what + "-"))


def extra_block(what: str, root: Path = ROOT) -> str:
    """The first two lines (device, command) and the first table of the run's results.md, with the
    folder it came from; for the corpus, the run's summary lines before that table too."""
    path = latest_results_md(what, root)
    lines = path.read_text().splitlines()
    head = lines[:2]
    first = next(i for i, line in enumerate(lines) if line.startswith("|"))
    end = next((i for i in range(first, len(lines)) if not lines[i].startswith("|")), len(lines))
    notes = [line for line in lines[2:first] if line.strip() and not line.startswith("Command")] if what == "corpus" else []
    rel = path.parent.relative_to(root)
    out = head + [""] + notes + ([""] if notes else []) + lines[first:end] + ["", f"(`{rel}/`)"]
    return "\n".join(out) + "\n"


def markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}:start -->", f"<!-- {name}:end -->"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.readme_table", description=__doc__.split("\n\n")[0])
    p.add_argument("results", nargs="?", help="a suite run's results.json (default: the latest committed)")
    p.add_argument("--update", metavar="README", help="rewrite the marked block of this file instead of printing")
    a = p.parse_args(argv)
    block = table(json.loads(Path(a.results or latest_suite_results()).read_text()))
    if a.update:
        path = Path(a.update)
        text = update(path.read_text(), block)
        for what, name in EXTRA_BLOCKS.items():
            if markers(name)[0] in text:
                text = update(text, extra_block(what), *markers(name))
        path.write_text(text)
    else:
        print(block, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
