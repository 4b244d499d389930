"""`autofuse retrain`: train the cost model from the tuning DB's measurements and report how it ranks."""
from __future__ import annotations

import argparse
import math
import sys
import tempfile
from pathlib import Path
from typing import Any, Sequence

from .exports import import_exports, ship
from .model import ESTIMATORS
from .predict import pretrained_path
from .select import format_comparison
from .train import RetrainOptions, RetrainResult, retrain

URL_HELP = "tuning DB path or SQLAlchemy URL (default: $AUTOFUSE_DB, else ~/.cache/autofuse/tuning.db)"


def register(subparsers: Any) -> None:
    """Add the `retrain` command to an argparse subparsers object."""
    p = subparsers.add_parser("retrain", help="retrain the kernel cost model from the measurements in the tuning DB")
    p.add_argument("--db", metavar="URL", default=None, help=URL_HELP)
    p.add_argument("--device", default=None, help="device name as stored, e.g. 'NVIDIA H200' (default: the DB's device "
                                                  "with most measurements)")
    p.add_argument("--force", action="store_true", help="store the new model even if it ranks worse than the current one")
    p.add_argument("--seed", type=int, default=0, help="seed of the split into training and held-out graphs")
    p.add_argument("--estimator", choices=(*ESTIMATORS, "auto"), default="hgb",
                   help="regressor (default hgb); auto compares all on the training graphs and keeps the best")
    p.add_argument("--no-compile", action="store_true",
                   help="skip the sm_90 compile features (registers, spills, occupancy): faster, less accurate")
    p.add_argument("--no-ranker", action="store_true",
                   help="rank a kernel's configs by the regressor alone, without the pair ranker")
    p.add_argument("--no-loco", action="store_true",
                   help="skip the leave-one-category-out evaluation (it trains one model per kernel category)")
    p.add_argument("--jobs", type=int, default=1, metavar="N", help="processes compiling kernels for features, and training the held-out categories")
    p.add_argument("--from-export", nargs="+", type=Path, metavar="FILE",
                   help="train on these measurement exports (.jsonl.gz), imported into a fresh DB (--db: a new "
                        "path, default a temporary file) instead of an existing tuning DB")
    p.add_argument("--ship", action="store_true",
                   help="with --from-export: a model stored replaces the shipped one (costmodel/pretrained)")
    p.set_defaults(func=cmd_retrain)


def _f(v: float | None) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.3f}"


def metrics_table(result: RetrainResult) -> str:
    """Held-out metrics of the new model and the current one, side by side."""
    rows = [("spearman", "spearman"), ("pairwise accuracy", "pairwise"),
            ("pairwise, pairs >2% apart", "pairwise_sig"), ("peak@1", "peak1"),
            ("peak@1 within 2%", "peak1_tol"), ("peak@5", "peak5"), ("regret of top pick", "regret"),
            ("log-time MAE", "mae_log")]
    cur_name = f"current ({result.current_version})" if result.current is not None else "current (none)"
    header = ("held-out metric", f"new ({result.model.version})" if result.model else "new", cur_name)
    body = [(label, _f(getattr(result.new, k)), _f(getattr(result.current, k)) if result.current else "-")
            for label, k in rows]
    n = result.new
    body.append(("kernels / groups / pairs (>2%)", f"{n.kernels} / {n.groups} / {n.pairs} ({n.pairs_sig})", ""))
    widths = [max(len(r[i]) for r in (header, *body)) for i in range(3)]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in (header, *body))


def loco_table(result: RetrainResult) -> str:
    """TenSet top-k scores on the random graph split and on each held-out category."""
    header = ("held out", "graphs", "rows", "top-1", "top-5", "pairwise", "spearman")
    body = [(s.category, str(s.graphs), str(s.rows), _f(s.top1), _f(s.top5), _f(s.pairwise), _f(s.spearman))
            for s in (result.random_split, *result.loco) if s is not None]
    widths = [max(len(r[i]) for r in (header, *body)) for i in range(len(header))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in (header, *body)]
    return "\n".join(["leave one category out (trained on the other categories; targets top-1 >= 0.95, "
                      "top-5 >= 0.99):", *lines])


def report(result: RetrainResult) -> str:
    if result.new is None:
        return f"autofuse retrain: {result.message}"
    parts = [f"cost model for {result.device}: trained on {result.train_size} measurements, "
             f"held out {result.test_size} (whole graphs)"]
    if result.comparison:
        parts += ["estimators compared on the training graphs:", format_comparison(result.comparison)]
    parts += [metrics_table(result)]
    parts += [loco_table(result)] if result.loco else []
    parts += [result.message]
    return "\n".join(parts)


def cmd_retrain(args: argparse.Namespace) -> int:
    from tuning_db import DBError, TuningDB
    opts = RetrainOptions(estimator=None if args.estimator == "auto" else args.estimator,
                          compile=not args.no_compile, workers=max(1, args.jobs),
                          ranker=not getattr(args, "no_ranker", False), loco=not getattr(args, "no_loco", False))
    if args.ship and not args.from_export:
        print("autofuse: --ship needs --from-export", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="autofuse-retrain-") as tmp:
        db_path = args.db
        if args.from_export:
            db_path = args.db or str(Path(tmp) / "retrain.db")
            if Path(db_path).exists():
                print(f"autofuse: {db_path} exists: --from-export imports into a new DB; give a new path",
                      file=sys.stderr)
                return 2
        try:
            with TuningDB.open(db_path) as db:
                if args.from_export:
                    n = import_exports(db, args.from_export)
                    print(f"imported {n} measurements from {len(args.from_export)} export(s) into {db_path}", flush=True)
                result = retrain(db, args.device, force=args.force, seed=args.seed, options=opts,
                                 on_score=lambda s: print(f"{s.category}: top-1 {_f(s.top1)}, "
                                                          f"top-5 {_f(s.top5)}", flush=True))
                print(report(result))
                if args.ship and result.stored:
                    version = ship(db, result.device, shipped_command(args))
                    print(f"shipped {version} to {pretrained_path(result.device)}")
        except (DBError, ValueError) as e:
            print(f"autofuse: {e}", file=sys.stderr)
            return 2
    return 0 if result.stored or result.new is not None else 1


def shipped_command(args: argparse.Namespace) -> str:
    """The command recorded with a shipped model (the DB is a temporary file: written as DB)."""
    parts = ["python -m autofuse retrain --from-export", *map(str, args.from_export),
             f"--estimator {args.estimator} --seed {args.seed}"]
    parts += ["--no-compile"] if args.no_compile else []
    parts += ["--force"] if args.force else []
    return " ".join(parts + ["--db DB --ship"])


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m costmodel.cli retrain ...` (the same command as `autofuse retrain`)."""
    parser = argparse.ArgumentParser(prog="costmodel")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
