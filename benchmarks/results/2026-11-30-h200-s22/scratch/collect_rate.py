"""Kernels measured per second of each collected program: this session's x2 calls against session 16's.

    python benchmarks/results/2026-11-30-h200-s22/scratch/collect_rate.py
"""
import re
import statistics
from pathlib import Path

RES = Path(__file__).resolve().parents[2]
for name, logs in (("session 16 call 2", ["2026-11-30-h200-s16/call2/log.txt"]),
                   ("session 22 calls 2-3", ["2026-11-30-h200-s22/call2/log.txt", "2026-11-30-h200-s22/call3/log.txt"])):
    rates, graphs, secs = [], 0, 0.0
    for log in logs:
        for m in re.finditer(r"(\d+) graphs, (\d+) kernels measured, ([\d.]+) s", (RES / log).read_text()):
            graphs += int(m.group(1))
            secs += float(m.group(3))
            rates.append(int(m.group(2)) / float(m.group(3)))
    print(f"{name}: {graphs} graphs in {secs:.0f} program-seconds ({graphs / secs * 60:.2f} graphs per GPU-minute); "
          f"kernels/s median {statistics.median(rates):.1f}, range {min(rates):.1f}-{max(rates):.1f}")
