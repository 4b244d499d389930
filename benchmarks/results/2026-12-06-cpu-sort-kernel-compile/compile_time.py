"""Seconds to compile the int64 stable argsort's row-sort kernel (rows of 1024, int64 keys with
their positions) for sm_90 on this host, no GPU needed (Triton's driver stood in for, as in
tests/test_precompile.py). Run from the repository root: python3 PATH/compile_time.py"""
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp()   # an empty cache: the compile is timed, not a cache hit

import torch

sys.path.insert(0, str(Path.cwd()))
import autofuse  # noqa: E402
from autofuse.api import Recorder  # noqa: E402
from autofuse.runtime.steps import KernelLaunch  # noqa: E402
from tests.test_precompile import FakeCudaDriver, compiling_twin  # noqa: E402
import triton  # noqa: E402
from triton.runtime import driver  # noqa: E402

x = torch.randn(3, 1024)
rec = Recorder()
with torch.no_grad():
    autofuse.compile(lambda t: torch.argsort((t * 1000).long(), dim=-1, stable=True), strict=True,
                     use_db=False, recorder=rec)(x)
tmp = Path(tempfile.mkdtemp())
driver._active = FakeCudaDriver()
for _, _, art in rec.graphs:
    infos = {k.name: k for k in art.kernels}
    for step in art.program.steps:
        if not isinstance(step, KernelLaunch) or "_sort_rows" not in infos[step.name].source:
            continue
        info = infos[step.name]
        twin = compiling_twin(step, info, tmp, xblock=1, num_warps=1)
        start = time.perf_counter()
        twin.warm()
        assert "cubin" in next(iter(twin.fn.device_caches[0][0].values())).asm
        print(f"Triton {triton.__version__}: {info.fn_name} (RBLOCK {step.rblock}, 1 warp) compiled for "
              f"sm_90 in {time.perf_counter() - start:.1f} s")
