"""Load a user's model file: the KernelBench convention (`class Model`, `get_inputs()`,
`get_init_inputs()`) or `model` + `example_inputs()`.

Note: errors raised while importing the file are the user's; they are reported with the user's
own traceback frames only, never as a crash of autofuse.
"""
from __future__ import annotations

import hashlib
import importlib.util
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence


class ModelFileError(Exception):
    """A model file that cannot be used; the message is meant for the user as is. `exit_code`: the
    command's exit status (the file's own when it called sys.exit)."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def _exited(path: Path, e: SystemExit, when: str) -> ModelFileError:
    code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return ModelFileError(f"{path} called sys.exit({e.code!r}) while {when}; a model file must define the "
                          f"model, not end the program", exit_code=code or 2)


def _where(exc: BaseException, path: Path) -> str:
    """' (model.py:12, in forward)': the last frame of the user's file in the traceback, if any."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename).resolve() == path.resolve()]
    return f" ({Path(frames[-1].filename).name}:{frames[-1].lineno}, in {frames[-1].name})" if frames else ""


def check_forward(model: Callable[..., Any], inputs: Sequence[Any], path: Path) -> None:
    """Run the model once eagerly: an error of the user's forward is reported in one line as theirs,
    not as a compiler traceback from deep inside the capture."""
    import torch
    try:
        with torch.no_grad():
            model(*inputs)
    except SystemExit as e:
        raise _exited(path, e, "running the model") from None
    except Exception as e:  # noqa: BLE001 - the user's error, reported as theirs
        msg = (str(e).strip().splitlines() or [""])[0][:300]
        raise ModelFileError(f"{path}: the model raised {type(e).__name__}: {msg}{_where(e, path)} "
                             f"(this is the model file's error)") from None


def check_trainable(model: Callable[..., Any], inputs: Sequence[Any], path: Path) -> None:
    """One eager training step's forward: its output must give a loss to backpropagate (`--train`)."""
    import torch
    from .training import NothingToTrain, training_loss
    try:
        with torch.enable_grad():
            training_loss(model(*inputs))
    except NothingToTrain as e:
        raise ModelFileError(f"{path}: {e}") from None


def default_device() -> str:
    """Where `autofuse tune` and the examples run a model file: the GPU when there is one."""
    import torch
    return "cuda" if torch.cuda.is_available() else "cpu"


@dataclass
class LoadedModel:
    model: Callable[..., Any]
    example_inputs: tuple
    path: Path

    def on(self, device: str) -> tuple[Callable[..., Any], tuple]:
        """The model (an nn.Module moved, any other callable as is) and its example inputs on device."""
        import torch
        model = self.model.to(device) if isinstance(self.model, torch.nn.Module) else self.model
        return model, tuple(x.to(device) if isinstance(x, torch.Tensor) else x for x in self.example_inputs)


def _user_traceback(exc: BaseException, path: Path) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename).resolve() == path.resolve()
              or "importlib" not in f.filename and "autofuse" not in f.filename]
    lines = traceback.format_list(frames) + traceback.format_exception_only(type(exc), exc)
    return "".join(lines).rstrip()


def load_model_file(path: str | Path) -> LoadedModel:
    path = Path(path)
    if not path.is_file():
        raise ModelFileError(f"{path}: no such model file")
    # registered in sys.modules under a stable name, as `import` would: Dynamo resolves the
    # forward's globals (`torch`, helpers) by importing the module that defines it
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:16]
    name = f"autofuse_user_model_{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ModelFileError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    sys.path.insert(0, str(path.parent.resolve()))
    try:
        spec.loader.exec_module(module)
    except SystemExit as e:
        sys.modules.pop(name, None)
        raise _exited(path, e, "importing") from None
    except Exception as e:  # noqa: BLE001 - the user's error, reported as theirs
        sys.modules.pop(name, None)
        raise ModelFileError(f"{path} raised an error while importing (this is the model file's error):\n"
                             f"{_user_traceback(e, path)}") from None
    finally:
        sys.path.pop(0)
    ns = vars(module)
    try:
        if "Model" in ns:
            missing = [f for f in ("get_inputs", "get_init_inputs") if f not in ns]
            if "get_inputs" in missing:
                raise ModelFileError(f"{path}: defines class Model but no get_inputs()")
            init = ns["get_init_inputs"]() if "get_init_inputs" in ns else []
            model = ns["Model"](*init)
            inputs = tuple(ns["get_inputs"]())
        elif "model" in ns:
            if "example_inputs" not in ns:
                raise ModelFileError(f"{path}: defines model but no example_inputs()")
            model, inputs = ns["model"], tuple(ns["example_inputs"]())
        else:
            raise ModelFileError(f"{path}: defines neither `class Model` + `get_inputs()` (KernelBench convention) "
                                 f"nor `model` + `example_inputs()`")
    except ModelFileError:
        raise
    except SystemExit as e:
        raise _exited(path, e, "building the model or its inputs") from None
    except Exception as e:  # noqa: BLE001
        raise ModelFileError(f"{path}: building the model or its inputs failed (this is the model file's error):\n"
                             f"{_user_traceback(e, path)}") from None
    return LoadedModel(model, inputs, path)
