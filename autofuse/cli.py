"""Command line: `autofuse explain model.py` (and `python -m autofuse ...`)."""
from __future__ import annotations

import argparse
import sys
import warnings
from typing import Sequence

from .options import STRATEGIES


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="autofuse", description="A performance-model-guided autotuning compiler for PyTorch.")
    sub = p.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("explain", help="compile a model file and show its kernels and fusion decisions")
    ex.add_argument("model", help="model file: class Model + get_inputs() + get_init_inputs(), or model + example_inputs()")
    ex.add_argument("--strategy", choices=STRATEGIES, default="inductor")
    ex.add_argument("--format", choices=("text", "json"), default="text")
    ex.add_argument("--device", default=None, help="move the model and its inputs to this device (e.g. cuda)")
    return p


def _to_device(loaded, device: str):
    import torch
    model = loaded.model.to(device) if isinstance(loaded.model, torch.nn.Module) else loaded.model
    inputs = tuple(x.to(device) if isinstance(x, torch.Tensor) else x for x in loaded.example_inputs)
    return model, inputs


def cmd_explain(args: argparse.Namespace) -> int:
    from .api import explain
    from .capture.model_file import load_model_file
    loaded = load_model_file(args.model)
    model, inputs = _to_device(loaded, args.device) if args.device else (loaded.model, loaded.example_inputs)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="autofuse: running Triton kernels on the CPU")
        report = explain(model, inputs, strategy=args.strategy)
    print(report.to_json() if args.format == "json" else report)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    from .capture.model_file import ModelFileError
    args = _parser().parse_args(argv)
    try:
        return {"explain": cmd_explain}[args.command](args)
    except ModelFileError as e:
        print(f"autofuse: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
