"""Collect cost-model measurements on every GPU of one host at once: one `benchmarks.collect` per GPU,
each on its own corpus seed, merged into one export.

    python3 -m benchmarks.collect_gpus --out DIR [--gpus N] [--first-seed K] [--keep-dbs] [COLLECT ARGS ...]

GPU i runs `python3 -m benchmarks.collect --out DIR/gpu<i> --seed <K + i> COLLECT ARGS` with
CUDA_VISIBLE_DEVICES=i (so each tunes different programs and times only its own device), with
its output in DIR/gpu<i>/log.txt. When all are done, their exports are joined into
DIR/measurements.jsonl.gz (one gzip member per GPU; gzip readers read them as one file), their
collect.json records into DIR/collect.json and their logs into DIR/log.txt; the per-GPU folders
(tuning DBs, large) are removed unless --keep-dbs. Why: device time is counted per machine held, so an eight-GPU host collects eight
times the graphs in the same time, and the held-out metrics grow with graphs
(docs/costmodel.md), while the device returns only a few files per call.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Sequence


def parse(argv: Sequence[str] | None) -> tuple[argparse.Namespace, list[str]]:
    p = argparse.ArgumentParser(prog="python3 -m benchmarks.collect_gpus", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--gpus", type=int, default=None, help="GPUs to use, 0..N-1 (default: every visible one)")
    p.add_argument("--first-seed", type=int, default=10, help="corpus seed of GPU 0; GPU i gets this + i")
    p.add_argument("--keep-dbs", action="store_true", help="keep the per-GPU folders after merging")
    return p.parse_known_args(argv)


def commands(out: Path, gpus: int, first_seed: int, extra: Sequence[str]) -> list[tuple[dict[str, str], list[str], Path]]:
    """(environment changes, argv, folder) of each GPU's collect."""
    return [({"CUDA_VISIBLE_DEVICES": str(i)},
             [sys.executable, "-m", "benchmarks.collect", "--out", str(out / f"gpu{i}"), "--seed", str(first_seed + i),
              *extra], out / f"gpu{i}") for i in range(gpus)]


def merge(out: Path, folders: Sequence[Path]) -> dict[str, Any]:
    """Join the folders' exports into out/measurements.jsonl.gz and their records into out/collect.json."""
    parts: list[dict[str, Any]] = []
    tmp = out / "measurements.jsonl.gz.tmp"
    with tmp.open("wb") as dst:
        for f in folders:
            rec_path, exp = f / "collect.json", f / "measurements.jsonl.gz"
            rec = json.loads(rec_path.read_text()) if rec_path.exists() else {"error": "no collect.json"}
            if exp.exists():
                with exp.open("rb") as src:
                    shutil.copyfileobj(src, dst)
            parts.append({"folder": f.name, **rec})
    tmp.replace(out / "measurements.jsonl.gz")
    total = sum((p.get("counts") or {}).get("measurements", 0) for p in parts)
    record = {"parts": parts, "measurements": total,
              "programs_done": sum(p.get("programs_done", 0) for p in parts),
              "programs_failed": sum(p.get("programs_failed", 0) for p in parts)}
    (out / "collect.json").write_text(json.dumps(record, indent=1, sort_keys=True, default=str) + "\n")
    return record


def main(argv: Sequence[str] | None = None) -> int:
    args, extra = parse(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    gpus = args.gpus
    if gpus is None:
        import torch
        gpus = torch.cuda.device_count()
    if gpus < 1:
        print("collect_gpus: no GPU", file=sys.stderr)
        return 2
    start = time.monotonic()
    procs = []
    for env, cmd, folder in commands(out, gpus, args.first_seed, extra):
        folder.mkdir(parents=True, exist_ok=True)
        log = (folder / "log.txt").open("w")
        procs.append((subprocess.Popen(cmd, env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT), log))
    codes = []
    for p, log in procs:
        codes.append(p.wait())
        log.close()
    folders = [folder for _, _, folder in commands(out, gpus, args.first_seed, extra)]
    with (out / "log.txt").open("w") as log:   # every GPU's log, kept when its folder goes
        for f, code in zip(folders, codes):
            text = (f / "log.txt").read_text() if (f / "log.txt").exists() else ""
            log.write(f"== {f.name} (exit {code})\n{text}")
            print(f"== {f.name} (exit {code}):", *text.splitlines()[-2:], sep="\n", flush=True)
    record = merge(out, folders)
    if not args.keep_dbs:
        for f in folders:
            shutil.rmtree(f, ignore_errors=True)
    print(f"collect_gpus: {gpus} GPUs, {record['programs_done']} programs, {record['measurements']} measurements, "
          f"{time.monotonic() - start:.0f} s -> {out / 'measurements.jsonl.gz'}", flush=True)
    return 0 if all(c == 0 for c in codes) else 1


if __name__ == "__main__":
    sys.exit(main())
