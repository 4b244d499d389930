"""The progress of one graph's search: a tqdm bar on a terminal (trials, best so far, elapsed time,
ETA), plain lines elsewhere, so that logs get no bar redraws."""
from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from tqdm import tqdm


class Progress:
    """Shows trial `done` of `total`, the best time so far and the default's, and the time left
    before the deadline. On a TTY a tqdm bar redraws in place; otherwise a line is written when the
    best improves, on the last trial, and at most every 5 s in between. Disabled: writes nothing."""

    def __init__(self, label: str, total: int, deadline: float | None, stream: TextIO | None = None,
                 enabled: bool = True) -> None:
        self.label, self.total, self.deadline = label, total, deadline
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.start = self.last = time.monotonic()
        self.best: float | None = None
        self.bar: Any = None
        if enabled and self.tty:
            self.bar = tqdm(total=total, desc=label, file=self.stream, unit="trial", dynamic_ncols=True, leave=True,
                            bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} "
                                       "[{elapsed}<{remaining}{postfix}]")

    def _status(self, default_us: float | None, now: float, note: str) -> str:
        best = "—" if self.best is None else f"{self.best:.1f} us"
        dflt = "" if default_us is None else f" (default {default_us:.1f} us)"
        left = "" if self.deadline is None else f", {max(0.0, self.deadline - now):.0f} s left"
        return f"best {best}{dflt}{left}{note}"

    def update(self, done: int, best_us: float | None, default_us: float | None, note: str = "") -> None:
        if not self.enabled:
            return
        improved = best_us is not None and (self.best is None or best_us < self.best)
        self.best = best_us if best_us is not None else self.best
        now = time.monotonic()
        if self.bar is not None:
            self.bar.n = min(done, self.total)
            self.bar.set_postfix_str(self._status(default_us, now, note), refresh=False)
            self.bar.refresh()
            return
        if not improved and now - self.last < 5.0 and done < self.total:
            return
        self.last = now
        elapsed = now - self.start
        eta = elapsed / done * max(0, self.total - done) if done else None
        timing = f"elapsed {tqdm.format_interval(elapsed)}"
        if eta is not None:
            timing += f", eta {tqdm.format_interval(eta)}"
        width = 20
        filled = int(width * min(done, self.total) / max(self.total, 1))
        bar = "#" * filled + "." * (width - filled)
        self.stream.write(f"{self.label}: [{bar}] trial {done}/{self.total}, {self._status(default_us, now, note)}, "
                          f"{timing}\n")
        self.stream.flush()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
