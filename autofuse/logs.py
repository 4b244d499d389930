"""Named loggers and the AUTOFUSE_LOGS switch (in the spirit of TORCH_LOGS).

    AUTOFUSE_LOGS=fusion,cache,source python train.py     # or AUTOFUSE_LOGS=all

- `fusion` (logger "autofuse.fusion"): every fusion made and every candidate pair rejected, with why.
- `cache` ("autofuse.cache"): tuning-DB plan hits and misses, per graph.
- `source` ("autofuse.source"): the path of each generated kernel's source file.
- `compile` ("autofuse.compile"): graphs compiled, their kernel counts, graphs left to eager and why,
  graphs of symbolic sizes split into static regions.
Nothing is configured unless the variable is set or `enable()` is called: a library leaves the
user's logging alone.
"""
from __future__ import annotations

import logging
import os
import sys
from typing import Iterable

TOPICS = ("fusion", "cache", "source", "compile")


def logger(topic: str) -> logging.Logger:
    return logging.getLogger(f"autofuse.{topic}")


def enable(topics: Iterable[str], level: int = logging.DEBUG) -> None:
    """Send the topics' records to stderr (one handler per topic, added once)."""
    for topic in topics:
        if topic not in TOPICS:
            raise ValueError(f"AUTOFUSE_LOGS: unknown topic {topic!r} (known: {', '.join(TOPICS)}, all)")
        lg = logger(topic)
        lg.setLevel(level)
        if not any(getattr(h, "_autofuse", False) for h in lg.handlers):
            h = logging.StreamHandler(sys.stderr)
            h.setFormatter(logging.Formatter("[autofuse.%(topic)s] %(message)s".replace("%(topic)s", topic)))
            h._autofuse = True  # type: ignore[attr-defined]
            lg.addHandler(h)


def configure_from_env(value: str | None = None) -> None:
    """Read AUTOFUSE_LOGS ("fusion,cache", "all", "+fusion" alike); an unknown topic warns, never raises."""
    value = os.environ.get("AUTOFUSE_LOGS", "") if value is None else value
    names = [t.strip().lstrip("+") for t in value.split(",") if t.strip()]
    if not names:
        return
    topics = TOPICS if "all" in names else names
    try:
        enable(topics)
    except ValueError as e:
        print(f"autofuse: {e}", file=sys.stderr)
