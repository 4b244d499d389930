"""Ctrl-C or SIGTERM held back while a trial's row changes state, then delivered.

Note: Optuna's `ask` creates a trial row RUNNING and `tell` finishes it; an interrupt that lands
inside either (a loaded host makes that window wide) leaves a RUNNING trial that no worker will
finish. Within `deferred_interrupts()` the two signals only set a flag; on leaving the block the
handler that was in place runs for the first one (raising KeyboardInterrupt), so the study never
sees a half-made state change. Off the main thread (where handlers cannot be set) the block runs
as it is.

A KeyboardInterrupt raised where Python ignores exceptions (a weakref callback, a `__del__`: it
prints "Exception ignored" and goes on) would be lost, and a SIGTERM'd tune would run to its end.
`interrupt` (the CLI's SIGTERM handler) therefore also records the request, and the search checks
`stop_requested()` between trials and between graphs.
"""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Any, Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM)
_stop = threading.Event()


def interrupt(signum: int, frame: Any) -> None:
    """A signal handler that ends the work like Ctrl-C, and is not lost if the raise is swallowed."""
    _stop.set()
    raise KeyboardInterrupt


def stop_requested() -> bool:
    """Did `interrupt` run since `clear_stop()`?"""
    return _stop.is_set()


def clear_stop() -> None:
    _stop.clear()


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
