"""A one-line progress bar per graph: trials, best so far, time left (plain lines when not a TTY)."""
from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    def __init__(self, label: str, total: int, deadline: float | None, stream: TextIO | None = None,
                 enabled: bool = True) -> None:
        self.label, self.total, self.deadline = label, total, deadline
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.last = 0.0
        self.best: float | None = None

    def update(self, done: int, best_us: float | None, default_us: float | None, note: str = "") -> None:
        if not self.enabled:
            return
        improved = best_us is not None and (self.best is None or best_us < self.best)
        self.best = best_us if best_us is not None else self.best
        now = time.monotonic()
        if not self.tty and not improved and now - self.last < 5.0 and done < self.total:
            return
        self.last = now
        width = 20
        filled = int(width * min(done, self.total) / max(self.total, 1))
        bar = "#" * filled + "." * (width - filled)
        best = "—" if self.best is None else f"{self.best:.1f} us"
        dflt = "" if default_us is None else f" (default {default_us:.1f} us)"
        left = "" if self.deadline is None else f", {max(0.0, self.deadline - now):.0f} s left"
        line = f"{self.label}: [{bar}] trial {done}/{self.total}, best {best}{dflt}{left}{note}"
        self.stream.write(("\r" + line + "\x1b[K") if self.tty else line + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled and self.tty:
            self.stream.write("\n")
            self.stream.flush()
