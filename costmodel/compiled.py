"""Registers, spills and shared memory of a kernel, from compiling it for sm_90 — no GPU needed.

Triton lowers the kernel to PTX for `GPUTarget("cuda", 90, 32)` on any machine; `ptxas -v` (shipped
with Triton) on that PTX reports registers per thread and spill stores/loads; Triton's metadata
reports the shared memory it allocates. Results are cached on disk (one small JSON per kernel,
keyed by sha256 of module source + config + signature + Triton version), since a compile costs
0.1-1 s.

Note: a source generated for the CPU carries the interpreter prelude (core-op compositions); it is
compiled with the GPU prelude instead, so CPU-generated and GPU-generated records of one kernel get
the same numbers. A kernel that does not compile gets NaN stats with the error (cached: compiling
is deterministic); a missing toolchain gets NaN stats, not cached. Nothing here raises. In a
process whose Triton was imported with TRITON_INTERPRET=1, compiling happens in a subprocess.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .source_ops import kernel_body_source

ARCH = 90
STATS_VERSION = 1


@dataclass(frozen=True)
class CompiledStats:
    """What the sm_90 compile says about one kernel+config; NaN fields when it could not compile."""

    registers: float
    spill_store_bytes: float
    spill_load_bytes: float
    stack_bytes: float
    shared_bytes: float
    error: str | None = None

    @staticmethod
    def failed(error: str) -> "CompiledStats":
        nan = float("nan")
        return CompiledStats(nan, nan, nan, nan, nan, error[:2000])

    @property
    def ok(self) -> bool:
        return self.error is None


def gpu_module_source(source: str, kernel_fn: str) -> str:
    """The module to compile: the source itself, or its kernel under the GPU prelude if it was
    written for the interpreter (no libdevice)."""
    if "libdevice" in source:
        return source
    from autofuse.codegen.prelude import prelude
    from autofuse.codegen.scan import SCAN_HELPERS
    helpers = SCAN_HELPERS if "tl.associative_scan" in source else ""  # what scan kernels carry besides the prelude
    return prelude(False) + helpers + "\n\n" + kernel_body_source(source, kernel_fn)


def default_signature(arg_names: list[str]) -> dict[str, str]:
    """A guess for records without a signature: f32 pointers, i32 sizes."""
    return {a: ("*fp32" if "ptr" in a else "i32") for a in arg_names if a not in ("XBLOCK", "RBLOCK", "YBLOCK")}


def cache_key(source: str, kernel_fn: str, config: dict, signature: dict | None) -> str:
    try:
        import triton
        version = triton.__version__
    except Exception:  # noqa: BLE001
        version = "none"
    blob = json.dumps([STATS_VERSION, ARCH, version, source, kernel_fn, _launch(config),
                       signature or {}], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def _launch(config: dict) -> dict[str, int]:
    launch = {"XBLOCK": int(config.get("XBLOCK", 1)), "RBLOCK": int(config.get("RBLOCK", 1)),
              "num_warps": int(config.get("num_warps", 4)), "num_stages": int(config.get("num_stages", 1))}
    if config.get("YBLOCK"):  # a 2-D tiled pointwise kernel (1-D kernels keep their cache keys)
        launch["YBLOCK"] = int(config["YBLOCK"])
    return launch


def compiled_stats(record: dict, cache: Path | None = None) -> CompiledStats:
    """Compiled stats of a kernel feature record (source, kernel_fn, config, signature)."""
    try:
        kernel_fn = record.get("kernel_fn") or "KERNEL"
        source = str(record["source"])
        config = dict(record.get("config") or {})
        key = cache_key(source, kernel_fn, config, record.get("signature"))
    except Exception as e:  # noqa: BLE001
        return CompiledStats.failed(f"bad record: {type(e).__name__}: {e}")
    path = (cache or _ptxas_cache()) / key[:2] / f"{key}.json"
    hit = _read_cache(path)
    if hit is not None:
        return hit
    try:
        module = gpu_module_source(source, kernel_fn)
    except Exception as e:  # noqa: BLE001
        return CompiledStats.failed(f"bad source: {type(e).__name__}: {e}")
    stats, cacheable = _compile(module, kernel_fn, config, record.get("signature"))
    if cacheable:
        _write_cache(path, stats)
    return stats


def _ptxas_cache() -> Path:
    """autofuse's cache folder of compile stats (imported on first use, as this module's other
    imports of autofuse are: importing autofuse loads torch, and importing costmodel does not)."""
    from autofuse.cache_dir import cache_dir
    return cache_dir("ptxas")


def _to_json(stats: CompiledStats) -> dict[str, Any]:
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in asdict(stats).items()}


def _from_json(d: dict[str, Any]) -> CompiledStats:
    return CompiledStats(**{k: (float("nan") if v is None and k != "error" else v) for k, v in d.items()})


def _read_cache(path: Path) -> CompiledStats | None:
    try:
        return _from_json(json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None


def _write_cache(path: Path, stats: CompiledStats) -> None:
    d = _to_json(stats)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps(d))
        os.replace(tmp, path)
    except OSError:
        pass


def _not_interpreted() -> Any:
    from autofuse.runtime.loader import interpret_env
    return interpret_env(False)


def _jit_function(module_source: str, kernel_fn: str) -> Any:
    """The kernel as a GPU jit function, loaded as the compiler loads its kernels."""
    from autofuse.runtime.loader import load_kernel
    return load_kernel(kernel_fn, module_source, interpret=False)


def _interpreter_imported(triton: Any) -> bool:
    """Was Triton imported with TRITON_INTERPRET=1? Its standard-library jit functions (the combine
    functions reductions use) are then interpreter-only, and nothing using them compiles here."""
    std = getattr(getattr(triton, "language", None), "standard", None)
    return type(getattr(std, "_sum_combine", None)).__name__ == "InterpretedFunction"


def _compile(module_source: str, kernel_fn: str, config: dict, signature: dict | None) -> tuple[CompiledStats, bool]:
    """(stats, cacheable): compile errors are facts about the kernel, a missing toolchain is not."""
    try:
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
    except Exception as e:  # noqa: BLE001
        return CompiledStats.failed(f"triton unavailable: {e}"), False
    if _interpreter_imported(triton):
        return _compile_in_subprocess(module_source, kernel_fn, config, signature)
    launch = _launch(config)
    sink = io.StringIO()
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            warnings.simplefilter("ignore")
            fn = _jit_function(module_source, kernel_fn)
            sig = dict(signature) if signature else default_signature(list(fn.arg_names))
            constexprs = {k: launch[k] for k in ("XBLOCK", "RBLOCK", "YBLOCK") if k in fn.arg_names}
            sig.update({k: "constexpr" for k in constexprs})
            with _not_interpreted():
                kernel = triton.compile(ASTSource(fn, sig, constexprs), target=GPUTarget("cuda", ARCH, 32),
                                        options={"num_warps": launch["num_warps"], "num_stages": launch["num_stages"]})
        ptx = kernel.asm["ptx"]
        shared = float(getattr(kernel.metadata, "shared", float("nan")))
    except Exception as e:  # noqa: BLE001 - a candidate that does not compile scores NaN, never raises
        return CompiledStats.failed(f"compile: {type(e).__name__}: {str(e).strip()[:1500]}"), True
    report = _ptxas_report(ptx)
    if report is None:
        return CompiledStats.failed("no ptxas could assemble the PTX"), False
    return _parse_ptxas(report, shared), True


def ptxas_candidates() -> list[str]:
    """ptxas binaries to try, Triton's own choice for sm_90 first."""
    found: list[str] = []
    try:
        from triton.backends.nvidia import compiler as nv
        try:
            tool = nv.get_ptxas(ARCH)
        except TypeError:
            tool = nv.get_ptxas()
        path = tool[0] if isinstance(tool, tuple) else getattr(tool, "path", tool)
        if isinstance(path, str):
            found.append(path)
        bindir = Path(nv.__file__).parent / "bin"
        found += [str(bindir / n) for n in ("ptxas-blackwell", "ptxas")]
    except Exception:  # noqa: BLE001
        pass
    which = shutil.which("ptxas")
    if which:
        found.append(which)
    return [p for i, p in enumerate(found) if p not in found[:i] and os.path.isfile(p)]


def _ptxas_report(ptx: str) -> str | None:
    with tempfile.TemporaryDirectory(prefix="autofuse-ptxas-") as d:
        src = Path(d) / "k.ptx"
        src.write_text(ptx)
        for exe in ptxas_candidates():
            try:
                r = subprocess.run([exe, "-v", f"--gpu-name=sm_{ARCH}a", str(src), "-o", str(Path(d) / "k.o")],
                                   capture_output=True, text=True, timeout=300)
            except (OSError, subprocess.SubprocessError):
                continue
            if r.returncode == 0 and "registers" in (r.stdout + r.stderr):
                return r.stdout + r.stderr
    return None


def _parse_ptxas(report: str, shared: float) -> CompiledStats:
    def num(pattern: str) -> float:
        m = re.search(pattern, report)
        return float(m.group(1)) if m else 0.0
    return CompiledStats(registers=num(r"Used (\d+) registers"), spill_store_bytes=num(r"(\d+) bytes spill stores"),
                         spill_load_bytes=num(r"(\d+) bytes spill loads"), stack_bytes=num(r"(\d+) bytes stack frame"),
                         shared_bytes=shared)


def _compile_in_subprocess(module_source: str, kernel_fn: str, config: dict,
                           signature: dict | None) -> tuple[CompiledStats, bool]:
    """`_compile` in a fresh Python with TRITON_INTERPRET unset (see `_interpreter_imported`)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "") if env.get("PYTHONPATH") else root
    with tempfile.TemporaryDirectory(prefix="autofuse-compile-") as d:
        job, out = Path(d) / "job.json", Path(d) / "out.json"
        job.write_text(json.dumps([module_source, kernel_fn, config, signature]))
        try:
            subprocess.run([sys.executable, "-m", "costmodel.compiled", str(job), str(out)], env=env,
                           capture_output=True, timeout=600, check=False)
            stats, cacheable = json.loads(out.read_text())
        except (OSError, ValueError, subprocess.SubprocessError) as e:
            return CompiledStats.failed(f"compile subprocess: {type(e).__name__}: {e}"), False
    return _from_json(stats), cacheable


def _main(job: str, out: str) -> None:
    stats, cacheable = _compile(*json.loads(Path(job).read_text()))
    Path(out).write_text(json.dumps([_to_json(stats), cacheable]))


if __name__ == "__main__":
    _main(sys.argv[1], sys.argv[2])
