"""autofuse: a performance-model-guided autotuning compiler for PyTorch (Triton kernels)."""
from .api import compile, explain, tune
from .options import CompileOptions
from .schedule.heuristics import Heuristics
from .search.settings import KernelTuneSettings, TuneSettings

__all__ = ["compile", "explain", "tune", "CompileOptions", "Heuristics", "TuneSettings", "KernelTuneSettings"]
__version__ = "0.1.0"


def _configure_logs() -> None:
    from .logs import configure_from_env
    configure_from_env()


def _register_backend() -> None:
    try:
        from .capture.backend import register
        register()
    except Exception:  # noqa: BLE001 - registration is a convenience when running from source
        pass


_configure_logs()
_register_backend()
