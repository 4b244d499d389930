"""Load a user's model file: the KernelBench convention (`class Model`, `get_inputs()`,
`get_init_inputs()`) or `model` + `example_inputs()`.

Note: errors raised while importing the file are the user's; they are reported with the user's
own traceback frames only, never as a crash of autofuse.
"""
from __future__ import annotations

import importlib.util
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable


class ModelFileError(Exception):
    """A model file that cannot be used; the message is meant for the user as is."""


@dataclass
class LoadedModel:
    model: Callable[..., Any]
    example_inputs: tuple
    path: Path


def _user_traceback(exc: BaseException, path: Path) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename).resolve() == path.resolve()
              or "importlib" not in f.filename and "autofuse" not in f.filename]
    lines = traceback.format_list(frames) + traceback.format_exception_only(type(exc), exc)
    return "".join(lines).rstrip()


def load_model_file(path: str | Path) -> LoadedModel:
    path = Path(path)
    if not path.is_file():
        raise ModelFileError(f"{path}: no such model file")
    name = f"autofuse_user_model_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ModelFileError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent.resolve()))
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # noqa: BLE001 - the user's error, reported as theirs
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
    except Exception as e:  # noqa: BLE001
        raise ModelFileError(f"{path}: building the model or its inputs failed (this is the model file's error):\n"
                             f"{_user_traceback(e, path)}") from None
    return LoadedModel(model, inputs, path)
