"""Command line: `autofuse explain model.py` (and `python -m autofuse ...`)."""
from __future__ import annotations

import argparse
import logging
import sys
import threading
import warnings
from typing import Sequence

from .logs import TOPICS, enable
from .options import STRATEGIES


def _count(text: str) -> int:
    """argparse type: an integer >= 0."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"{text} is negative")
    return v


def _seconds(text: str) -> float:
    """argparse type: a finite number of seconds > 0."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not v > 0 or v == float("inf"):
        raise argparse.ArgumentTypeError(f"{text} is not a positive, finite number of seconds")
    return v


def _budget(text: str) -> float | None:
    """argparse type: seconds > 0, or 0 for no limit (None)."""
    try:
        if float(text) == 0:
            return None
    except ValueError:
        pass
    return _seconds(text)


def _share(text: str) -> float:
    """argparse type: a share in [0, 1]."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0.0 <= v <= 1.0:
        raise argparse.ArgumentTypeError(f"{text} is not in [0, 1]")
    return v


# The search stops after 12 minutes unless told otherwise: a small model runs its 40 trials well
# within that, a whole decoder's graph does not (docs/defaults.md), and its tune, with capture and
# the closing verification, stays within a quarter of an hour.
DEFAULT_TIME_BUDGET_S = 720.0


def _add_verbosity(p: argparse.ArgumentParser) -> None:
    """-v / -q, taken before the command or after it (defaults suppressed, so a subcommand's parser
    does not overwrite what the top level read)."""
    g = p.add_mutually_exclusive_group()
    g.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS,
                   help="log what autofuse does on stderr: -v the compile and cache topics, -vv every "
                        f"topic ({', '.join(TOPICS)}; as AUTOFUSE_LOGS)")
    g.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS,
                   help="no progress bar and no autofuse warnings; errors and results only")


def _apply_verbosity(args: argparse.Namespace) -> None:
    verbose, quiet = getattr(args, "verbose", 0), getattr(args, "quiet", False)
    if verbose and quiet:
        raise SystemExit("autofuse: -v and -q exclude each other")
    if verbose:
        enable(("compile", "cache") if verbose == 1 else TOPICS, logging.INFO if verbose == 1 else logging.DEBUG)
    if quiet:
        args.no_progress = True
        warnings.filterwarnings("ignore", message="autofuse: ")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="autofuse", description="A performance-model-guided autotuning compiler for PyTorch.")
    from . import __version__
    p.add_argument("--version", action="version", version=f"autofuse {__version__}")
    _add_verbosity(p)
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
    ex.add_argument("--force", action="store_true", help="replace existing --save-plan/--render files")
    ex.add_argument("--source", action="store_true",
                    help="also print each graph's generated wrapper (Python; --format json always holds "
                         "every wrapper and kernel source)")
    tu = sub.add_parser("tune", help="search fusion plans and launch configs for a model file; store the winners")
    tu.add_argument("model", help="model file: class Model + get_inputs() + get_init_inputs(), or model + example_inputs()")
    tu.add_argument("--trials", type=_count, default=40, help="trials per graph (default 40)")
    tu.add_argument("--time-budget", type=_budget, default=DEFAULT_TIME_BUDGET_S, metavar="SECONDS",
                    help=f"stop searching after this long (whole model; default {DEFAULT_TIME_BUDGET_S:.0f}; "
                         f"0: until every graph has its trials); the best verified plans are then stored")
    tu.add_argument("--db", help="tuning DB path or SQLAlchemy URL (default: $AUTOFUSE_DB, else the user cache)")
    tu.add_argument("--seed", type=int, default=0)
    tu.add_argument("--resume", action="store_true", help="continue the graphs' latest studies (also: join other workers on them); without it a new study starts beside the earlier ones")
    tu.add_argument("--top-k", type=_count, default=6, help="configs measured per kernel besides the default (default 6)")
    tu.add_argument("--explore", type=_share, default=0.25, help="share of top-k picked at random instead of by the cost model")
    tu.add_argument("--refine", type=_count, default=None,
                    help="then neighbours (one knob changed) of each kernel's fastest measured configs, "
                         "best first, at most this many (0: none; default: KernelTuneSettings.refine)")
    tu.add_argument("--train", action="store_true",
                    help="tune the forward and backward graphs of a training step (the model's loss, or the sum "
                         "of its outputs, backpropagated) instead of its inference graphs")
    tu.add_argument("--device", default=None, help="device for the model and inputs (default: cuda when available, else cpu)")
    tu.add_argument("--no-progress", action="store_true", help="no progress bar")
    tu.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    tu.add_argument("--force", action="store_true", help="replace an existing --json file")
    from tuning_db.cli import register as register_db
    register_db(sub)
    try:
        from costmodel.cli import register as register_costmodel
        register_costmodel(sub)
    except ImportError:  # the cost model package is optional while it is being built
        pass
    _add_verbosity_below(sub)
    return p


def _add_verbosity_below(sub: argparse._SubParsersAction) -> None:
    for command in sub.choices.values():
        _add_verbosity(command)
        for action in command._actions:
            if isinstance(action, argparse._SubParsersAction):
                _add_verbosity_below(action)


def _check_outputs(args: argparse.Namespace, *names: str) -> None:
    """Output files are checked before the work: a bad path fails now, not after a long compile."""
    from tuning_db.files import check_output
    for name in names:
        if getattr(args, name, None):
            check_output(getattr(args, name), force=args.force, what=f"--{name.replace('_', '-')} file")


def cmd_explain(args: argparse.Namespace) -> int:
    from .api import explain
    from .capture.model_file import check_forward, load_model_file
    _check_outputs(args, "save_plan", "render")
    loaded = load_model_file(args.model)
    model, inputs = loaded.on(args.device) if args.device else (loaded.model, loaded.example_inputs)
    check_forward(model, inputs, loaded.path)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="autofuse: running Triton kernels on the CPU")
        report = explain(model, inputs, strategy=args.strategy, plan=args.plan, db=args.db)
    print({"json": report.to_json, "dot": report.to_dot}.get(args.format, report.__str__)())
    if args.source and args.format == "text":  # the JSON holds every source; dot stays a graph
        for k, src in enumerate(report.wrapper_sources):
            print(f"\n# graph {k}: wrapper\n{src or '# (runs interpreted)'}")
    if args.save_plan:
        from .plan.plan import save_plans
        save_plans(report.plans, args.save_plan)
    if args.render:
        report.render(args.render)
    return 0


def cmd_tune(args: argparse.Namespace) -> int:
    import json

    from .capture.model_file import check_forward, check_trainable, default_device, load_model_file
    from .runtime.reuse import open_db
    from .search.settings import KernelTuneSettings, TuneSettings
    from .search.tune import tune
    _check_outputs(args, "json")
    open_db(args.db)  # an unusable DB fails here, in one line, before any work
    loaded = load_model_file(args.model)
    model, inputs = loaded.on(args.device or default_device())
    check_forward(model, inputs, loaded.path)
    if args.train:
        check_trainable(model, inputs, loaded.path)
    settings = TuneSettings(trials=args.trials, time_budget=args.time_budget, db=args.db, seed=args.seed,
                            resume=args.resume, progress=not args.no_progress,
                            kernel=KernelTuneSettings(top_k=args.top_k, explore=args.explore, seed=args.seed,
                                                      refine=KernelTuneSettings().refine if args.refine is None
                                                      else args.refine, reference=True))
    import signal

    from .search.interrupts import clear_stop, interrupt, stop_requested
    main_thread = threading.current_thread() is threading.main_thread()
    clear_stop()
    # SIGTERM ends the tune like Ctrl-C (trial FAIL, best kept); both are recorded as well as raised
    before = {s: signal.signal(s, interrupt) for s in (signal.SIGTERM, signal.SIGINT)} if main_thread else {}
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="autofuse: running Triton kernels on the CPU")
            result = tune(model, inputs, settings=settings, train=args.train)
    finally:
        if main_thread:
            for s, h in before.items():
                signal.signal(s, h)
    print(result.report())
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result.to_json(), f, indent=1, default=str)
    return 130 if result.interrupted or stop_requested() else 1 if result.errors else 0


def main(argv: Sequence[str] | None = None) -> int:
    from tuning_db import DBError

    from .capture.model_file import ModelFileError
    from .plan.plan import PlanError
    args = _parser().parse_args(argv)
    _apply_verbosity(args)
    if hasattr(args, "func"):  # commands registered by other packages (tuning_db's `db`)
        return args.func(args)
    try:
        return {"explain": cmd_explain, "tune": cmd_tune}[args.command](args)
    except KeyboardInterrupt:
        print("autofuse: interrupted", file=sys.stderr)
        return 130
    except ModelFileError as e:
        print(f"autofuse: {e}", file=sys.stderr)
        return e.exit_code
    except (PlanError, DBError) as e:
        print(f"autofuse: {e}", file=sys.stderr)
        return 2
    except RuntimeError as e:
        if "Graphviz" in str(e):
            print(f"autofuse: {e}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
