"""Load generated kernel source as a Python module (Triton needs a real file to read source from).

Note: Triton decides at decoration time whether a kernel is interpreted (`TRITON_INTERPRET`), so
CPU kernels are imported with the variable set and GPU kernels with it unset; nothing else in the
process changes. Modules are cached on disk by content hash.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import threading
import warnings
from contextlib import contextmanager
from typing import Iterator

from ..cache_dir import cache_dir
from ..logs import logger

_lock = threading.Lock()
_warned = False


_source_log = logger("source")


@contextmanager
def interpret_env(interpret: bool) -> Iterator[None]:
    old = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1" if interpret else "0"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = old


def warn_interpreter_once() -> None:
    global _warned
    if not _warned:
        _warned = True
        warnings.warn("autofuse: running Triton kernels on the CPU through Triton's interpreter — "
                      "results are exact but slow; this is for testing, not for speed.", stacklevel=3)


def load_kernel(name: str, source: str, interpret: bool):
    """The @triton.jit function `name` defined by `source`, interpreted or compiled for the GPU (one
    module of each per source: Triton fixes the choice when the module is imported)."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:20]
    mod_name = f"autofuse_kernel_{digest}" + ("_interpreted" if interpret else "")
    with _lock:
        mod = sys.modules.get(mod_name)
        if mod is None:
            path = cache_dir("kernels") / f"{mod_name}.py"
            if not path.exists():
                tmp = path.with_suffix(f".{os.getpid()}.tmp")
                tmp.write_text(source)
                os.replace(tmp, path)
            _source_log.info("%s: %s", name, path)
            spec = importlib.util.spec_from_file_location(mod_name, path)
            mod = importlib.util.module_from_spec(spec)
            with interpret_env(interpret):
                spec.loader.exec_module(mod)
            sys.modules[mod_name] = mod
    return getattr(mod, name)
