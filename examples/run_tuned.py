"""Run a model file compiled from the plans `autofuse tune` stored, and check it against eager.

    autofuse tune examples/seed_model.py && python examples/run_tuned.py examples/seed_model.py

Uses the default tuning DB (AUTOFUSE_DB, else ~/.cache/autofuse/tuning.db) unless --db is given,
and the device `autofuse tune` uses (the GPU when there is one) unless --device is given: plans are
stored per device.
Every captured graph must find its plan there (on_miss="error"): nothing is searched or measured.
"""
from __future__ import annotations

import argparse
import sys

import torch

import autofuse
from autofuse.capture.model_file import ModelFileError, default_device, load_model_file


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model_file")
    ap.add_argument("--db", default=None, help="tuning DB path or SQLAlchemy URL")
    ap.add_argument("--device", default=None, help="device for the model and inputs (default: cuda when available, else cpu)")
    a = ap.parse_args(argv)
    try:
        loaded = load_model_file(a.model_file)
    except ModelFileError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    model, inputs = loaded.on(a.device or default_device())
    compiled = autofuse.compile(model, db=a.db, on_miss="error")
    with torch.no_grad():
        expected = model(*inputs)
        try:
            actual = compiled(*inputs)
        except Exception as e:  # noqa: BLE001 - a missing plan is the user's next step, said in one line
            print(f"error: {type(e).__name__}: {str(e).splitlines()[0]}\n"
                  f"(run `autofuse tune {a.model_file}` first)", file=sys.stderr)
            return 1
    pairs = list(zip(actual, expected)) if isinstance(expected, (list, tuple)) else [(actual, expected)]
    worst = max((x.float() - y.float()).abs().max().item() for x, y in pairs)
    for x, y in pairs:
        torch.testing.assert_close(x, y, rtol=1e-4, atol=1e-4)
    print(f"{a.model_file}: ran compiled from the tuning DB's plans; max |autofuse - eager| = {worst:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
