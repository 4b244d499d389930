"""OpenMP / BLAS thread limits around the cost model's fits and predictions.

Note: `threadpoolctl.threadpool_limits` finds the process's thread-pool libraries by reading
/proc/self/maps on every call: 3.5 ms of a 9-ms ranking of one kernel's configs on this project's
CPU host, paid once per prediction. A `ThreadpoolController` made at the first limit holds that
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
