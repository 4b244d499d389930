"""The one cache directory: where its root comes from, the temp-dir fallback, and the two uses
(kernel modules, compile stats) landing in their folders under it."""
from __future__ import annotations

import json
import os
import sys
import tempfile
import uuid
from dataclasses import asdict

import pytest

from autofuse.cache_dir import cache_dir
from autofuse.runtime.loader import load_kernel
from costmodel.compiled import CompiledStats, cache_key, compiled_stats


@pytest.fixture
def env(monkeypatch, tmp_path):
    """No cache variable set, a fake home and a private temp dir."""
    monkeypatch.delenv("AUTOFUSE_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    return monkeypatch


def test_root_from_autofuse_cache_dir(env, tmp_path):
    env.setenv("AUTOFUSE_CACHE_DIR", str(tmp_path / "mine"))
    env.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "mine"
    assert cache_dir("kernels") == tmp_path / "mine" / "kernels"
    assert (tmp_path / "mine" / "kernels").is_dir()


def test_root_from_xdg_then_home(env, tmp_path):
    env.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir("ptxas") == tmp_path / "xdg" / "autofuse" / "ptxas"
    env.setenv("XDG_CACHE_HOME", "relative/cache")  # the XDG spec: a relative path is ignored
    assert cache_dir("ptxas") == tmp_path / "home" / ".cache" / "autofuse" / "ptxas"
    env.delenv("XDG_CACHE_HOME")
    assert cache_dir() == tmp_path / "home" / ".cache" / "autofuse"


def test_falls_back_to_temp_when_not_creatable(env, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    env.setenv("AUTOFUSE_CACHE_DIR", str(blocker))
    assert cache_dir("kernels") == tmp_path / "tmp" / "autofuse" / "kernels"
    assert (tmp_path / "tmp" / "autofuse" / "kernels").is_dir()


def test_falls_back_to_temp_when_not_writable(env, tmp_path):
    ro = tmp_path / "read-only"
    env.setenv("AUTOFUSE_CACHE_DIR", str(ro))
    access = os.access  # a read-only folder, as a user other than root sees it
    env.setattr(os, "access", lambda p, mode: not str(p).startswith(str(ro)) and access(p, mode))
    assert cache_dir("ptxas") == tmp_path / "tmp" / "autofuse" / "ptxas"


def test_kernel_modules_land_in_kernels(env, tmp_path):
    env.setenv("AUTOFUSE_CACHE_DIR", str(tmp_path / "c"))
    value = uuid.uuid4().int % 1000 + 1
    source = f"def KERNEL():\n    return {value}\n"
    fn = load_kernel("KERNEL", source, interpret=True)
    try:
        assert fn() == value
        written = list((tmp_path / "c" / "kernels").glob("autofuse_kernel_*.py"))
        assert [p.read_text() for p in written] == [source]
    finally:
        sys.modules.pop(fn.__module__, None)


def test_compile_stats_read_from_ptxas(env, tmp_path):
    env.setenv("AUTOFUSE_CACHE_DIR", str(tmp_path / "c"))
    record = {"source": "def KERNEL(x_ptr, XBLOCK):\n    pass\n", "kernel_fn": "KERNEL", "config": {"XBLOCK": 128}}
    key = cache_key(record["source"], "KERNEL", record["config"], None)
    stats = CompiledStats(registers=37.0, spill_store_bytes=0.0, spill_load_bytes=4.0, stack_bytes=8.0, shared_bytes=0.0)
    path = tmp_path / "c" / "ptxas" / key[:2] / f"{key}.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(asdict(stats)))
    assert compiled_stats(record) == stats


def test_the_default_tuning_db_sits_in_the_same_root(env, tmp_path):
    from tuning_db.connect import cache_db_path, default_db_url
    env.delenv("AUTOFUSE_DB", raising=False)
    env.setenv("AUTOFUSE_CACHE_DIR", str(tmp_path / "mine"))
    assert cache_db_path() == tmp_path / "mine" / "tuning.db" and cache_dir() == tmp_path / "mine"
    assert default_db_url().endswith(str(tmp_path / "mine" / "tuning.db"))
    env.delenv("AUTOFUSE_CACHE_DIR")
    env.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_db_path().parent == cache_dir() == tmp_path / "xdg" / "autofuse"
