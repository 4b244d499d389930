"""The one on-disk cache directory of autofuse and its folders per use.

The root is `$AUTOFUSE_CACHE_DIR`, else `$XDG_CACHE_HOME/autofuse` (an absolute XDG path only, as
the XDG spec asks), else `~/.cache/autofuse`; when that cannot be written, a folder under the
system's temp dir. Each use has its own folder under the root: `kernels` (generated kernel
modules, runtime/loader.py) and `ptxas` (sm_90 compile stats, costmodel/compiled.py). The
tuning DB's default file (tuning_db/connect.py) is set by its own variable, `AUTOFUSE_DB`.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path


def _configured_root() -> Path:
    """The root the environment asks for (not created, not checked)."""
    env = os.environ.get("AUTOFUSE_CACHE_DIR", "").strip()
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "autofuse"


def cache_dir(use: str = "") -> Path:
    """The folder of one use (`kernels`, `ptxas`) under the cache root, or the root itself; created.
    Falls back to `<temp dir>/autofuse/<use>` when the configured folder cannot be written; returns
    that fallback even when it cannot be written either, so the caller's write reports the error."""
    candidates = [_configured_root(), Path(tempfile.gettempdir()) / "autofuse"]
    for root in candidates:
        path = root / use if use else root
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        if os.access(path, os.W_OK | os.X_OK):
            return path
    return path
