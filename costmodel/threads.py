"""OpenMP / BLAS thread limits around the cost model's fits and predictions.

Note: `threadpoolctl.threadpool_limits` finds the process's thread-pool libraries by reading
/proc/self/maps on every call, paid once per prediction: a ranking of one kernel's 9 configs took
18.9 ms with it and 10.0 ms without on this project's CPU host. A `ThreadpoolController` made at the first limit holds that
list. The libraries that matter are loaded by then: scikit-learn's OpenMP runtime comes with its
import, which loading or fitting a model does first.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator

_lock = threading.Lock()
_controller: Any = None


def _current() -> Any:
    global _controller
    with _lock:
        if _controller is None:
            from threadpoolctl import ThreadpoolController
            _controller = ThreadpoolController()
        return _controller


@contextlib.contextmanager
def thread_limit(n: int | None) -> Iterator[None]:
    """At most n threads in every OpenMP / BLAS pool inside the block (None: no limit)."""
    if n is None:
        yield
        return
    with _current().limit(limits=n):
        yield
