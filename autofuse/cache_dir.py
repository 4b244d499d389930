"""The one on-disk cache directory of autofuse and its folders per use.

The root is `$AUTOFUSE_CACHE_DIR`, else `$XDG_CACHE_HOME/autofuse` (an absolute XDG path only, as
the XDG spec asks), else `~/.cache/autofuse`; when that cannot be written, a folder under the
system's temp dir. Each use has its own folder under the root: `kernels` (generated kernel
modules, runtime/loader.py) and `ptxas` (sm_90 compile stats, costmodel/compiled.py); the
tuning DB's default file, `tuning.db`, sits in the root itself (`AUTOFUSE_DB` names another).
The root is defined once, in `tuning_db.connect.cache_root`, the package below autofuse.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from tuning_db.connect import cache_root


def cache_dir(use: str = "") -> Path:
    """The folder of one use (`kernels`, `ptxas`) under the cache root, or the root itself; created.
    Falls back to `<temp dir>/autofuse/<use>` when the configured folder cannot be written; returns
    that fallback even when it cannot be written either, so the caller's write reports the error."""
    candidates = [cache_root(), Path(tempfile.gettempdir()) / "autofuse"]
    for root in candidates:
        path = root / use if use else root
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        if os.access(path, os.W_OK | os.X_OK):
            return path
    return path
