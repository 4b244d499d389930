"""Ctrl-C or SIGTERM held back while a trial's row changes state, then delivered.

Note: Optuna's `ask` creates a trial row RUNNING and `tell` finishes it; an interrupt that lands
inside either (a loaded host makes that window wide) leaves a RUNNING trial that no worker will
finish. Within `deferred_interrupts()` the two signals only set a flag; on leaving the block the
handler that was in place runs for the first one (raising KeyboardInterrupt), so the study never
sees a half-made state change. Off the main thread (where handlers cannot be set) the block runs
as it is.
"""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Any, Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def deferred_interrupts() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[tuple[int, Any]] = []
    previous = {s: signal.getsignal(s) for s in SIGNALS}

    def hold(signum: int, frame: Any) -> None:
        if not caught:
            caught.append((signum, frame))
    for s in SIGNALS:
        signal.signal(s, hold)
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        if caught:
            signum, frame = caught[0]
            handler = previous[signum]
            if callable(handler):
                handler(signum, frame)
            elif handler == signal.SIG_DFL and signum == signal.SIGINT:
                raise KeyboardInterrupt
            elif handler == signal.SIG_DFL:
                signal.raise_signal(signum)
