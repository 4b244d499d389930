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
    how = ex.add_mutually_exclusive_group()
    how.add_argument("--strategy", choices=STRATEGIES, default=None,
                     help="fusion strategy (default: the tuning DB's plan if there is one, else inductor)")
    how.add_argument("--plan", help="a plan file (JSON) to compile with instead of a strategy")
    ex.add_argument("--db", help="tuning DB path or SQLAlchemy URL (default: $AUTOFUSE_DB, else the user cache)")
    ex.add_argument("--format", choices=("text", "json", "dot"), default="text")
    ex.add_argument("--render", metavar="FILE", help="also render the graph and its kernels to FILE (.svg or .png; needs Graphviz)")
    ex.add_argument("--save-plan", metavar="FILE", help="write the plans of the compiled graphs to FILE")
    ex.add_argument("--device", default=None, help="move the model and its inputs to this device (e.g. cuda)")
    from tuning_db.cli import register as register_db
    register_db(sub)
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
        report = explain(model, inputs, strategy=args.strategy, plan=args.plan, db=args.db)
    print({"json": report.to_json, "dot": report.to_dot}.get(args.format, report.__str__)())
    if args.save_plan:
        from .plan.plan import save_plans
        save_plans(report.plans, args.save_plan)
    if args.render:
        report.render(args.render)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    from .capture.model_file import ModelFileError
    from .plan.plan import PlanError
    args = _parser().parse_args(argv)
    if hasattr(args, "func"):  # commands registered by other packages (tuning_db's `db`)
        return args.func(args)
    try:
        return {"explain": cmd_explain}[args.command](args)
    except (ModelFileError, PlanError) as e:
        print(f"autofuse: {e}", file=sys.stderr)
        return 2
    except RuntimeError as e:
        if "Graphviz" in str(e):
            print(f"autofuse: {e}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
