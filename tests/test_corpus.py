"""The measurement corpus (benchmarks/corpus.py) and its collector (benchmarks/collect.py) on the CPU:
programs build and run eagerly, are seeded and diverse, have realistic full sizes; collect tunes,
stores and exports measurements, and the export re-runs alone."""
from __future__ import annotations

import gzip
import json
import re

import torch

from autofuse.measure.timing import FakeBenchmarker
from autofuse.search import graph_tuner
from benchmarks import collect
from benchmarks.cases import CASES
from benchmarks.corpus import MAX_BYTES, MIN_BYTES, corpus, program, suite

TINY = 0.001
REDUCTIONS = ("sum", "mean", "max", "amax", "var", "std", "logsumexp", "softmax", "log_softmax", "layer_norm",
              "rms_norm", "argmax")


def shapes(progs):
    out = []
    for p in progs:
        _, args = p.build("meta")
        out.append((p.name, p.source, [(tuple(a.shape), a.stride(), a.dtype) for a in args]))
    return out


def test_corpus_builds_and_runs_eagerly_on_cpu():
    progs = corpus(20, seed=0, scale=TINY)
    assert len({p.name for p in progs}) == 20
    for p in progs:
        fn, args = p.build("cpu")
        out = fn(*args)
        for o in out if isinstance(out, tuple) else (out,):
            assert isinstance(o, torch.Tensor), p.name
            if o.is_floating_point():
                assert torch.isfinite(o.float()).all(), f"{p.name}:\n{p.source}"


def test_corpus_is_seeded_and_diverse():
    a, b = corpus(20, seed=0, scale=TINY), corpus(20, seed=0, scale=TINY)
    assert shapes(a) == shapes(b)
    assert [p.name for p in corpus(5, seed=0, scale=TINY)] == [p.name for p in a[:5]]   # a prefix
    assert [p.name for p in corpus(20, seed=0, scale=1.0)] == [p.name for p in a]      # scale: sizes only
    other = corpus(20, seed=1, scale=TINY)
    assert {p.source for p in other}.isdisjoint({p.source for p in a})
    fn, args = a[0].build("cpu")
    fn2, args2 = b[0].build("cpu")
    assert all(torch.equal(x, y) for x, y in zip(args, args2))                          # same values too
    progs = corpus(60, seed=0, scale=TINY)
    dtypes = {re.match(r"s\d+_\d+_([a-z0-9]+?)T?_", p.name).group(1) for p in progs}
    assert dtypes == {"f32", "bf16", "f16"}
    tags = {t for p in progs for t in p.name.split("_", 4)[4].split("-")}
    kinds = {t.removeprefix("col_") for t in tags} & set(REDUCTIONS)
    assert len(kinds) >= 6, kinds
    assert any(t.startswith("col_") for t in tags)                                     # column reductions
    assert any(t.startswith("pw") for t in tags)
    assert any("T_" in p.name for p in progs)                                           # transposed inputs
    assert any(not a.is_contiguous() for p in progs if "T_" in p.name for a in p.build("meta")[1])
    assert any(p.source.count("return") == 1 and "," in p.source.splitlines()[-1] for p in progs)  # several outputs
    text = "\n".join(p.source for p in progs)
    for op in ("torch.exp", "torch.log", "torch.tanh", "F.gelu", "torch.rsqrt", ".to(torch."):
        assert op in text, op


def test_full_size_bytes_in_range():
    for i in range(8):
        p = program(0, i, scale=1.0)
        rows, cols = map(int, re.search(r"_(\d+)x(\d+)_", p.name).groups())
        assert 64 <= rows <= 65536 and 33 <= cols <= 50257
        assert MIN_BYTES <= p.nbytes() <= MAX_BYTES, p.name
        assert tuple(p.build("meta")[1][0].shape) == (rows, cols)


def test_suite_programs():
    progs = suite(TINY)
    assert [p.name for p in progs] == [c.name for c in CASES]
    fn, args = progs[0].build("cpu")
    assert fn(*args).shape == args[0].shape


def test_collect_smoke_on_cpu(tmp_path, monkeypatch):
    out = tmp_path / "col"
    argv = ["--out", str(out), "--programs", "1", "--seed", "3", "--scale", str(TINY), "--trials", "3",
            "--top-k", "2", "--device", "cpu"]
    # a fake timer so that something is "measured" on the CPU and the export has rows
    monkeypatch.setattr(graph_tuner, "default_benchmarker", lambda args, predictor: FakeBenchmarker(lambda rec: 10.0))
    assert collect.main(argv) == 0
    rec = json.loads((out / "collect.json").read_text())
    assert rec["programs_done"] == 1 and rec["programs_failed"] == 0, rec["programs"]
    assert rec["programs"][0]["name"].startswith("s3_0000_")
    assert rec["runs"][0]["versions"]["torch"] == torch.__version__
    with gzip.open(out / "measurements.jsonl.gz", "rt") as f:
        lines = [json.loads(line) for line in f]
    assert len(lines) == rec["counts"]["measurements"] == rec["programs"][0]["kernels"] > 0
    assert set(lines[0]) == {"kernel_key", "device", "features", "stats"}
    assert lines[0]["device"] == "cpu:triton-interpreter" and lines[0]["stats"]["median_us"] == 10.0

    (out / "measurements.jsonl.gz").unlink()
    assert collect.main(["--out", str(out), "--export-only"]) == 0
    with gzip.open(out / "measurements.jsonl.gz", "rt") as f:
        assert [json.loads(line) for line in f] == lines

    assert collect.main(argv) == 0   # a second run with the same folder skips what was done
    rec = json.loads((out / "collect.json").read_text())
    assert len(rec["programs"]) == 1 and rec["runs"][-1]["skipped"] == 1


def test_collect_logs_failures_and_stops_on_budget(tmp_path, monkeypatch):
    def boom(*a, **k):
        raise RuntimeError("cannot compile this")
    monkeypatch.setattr("autofuse.tune", boom)
    out = tmp_path / "col"
    assert collect.main(["--out", str(out), "--programs", "2", "--scale", str(TINY), "--device", "cpu"]) == 0
    rec = json.loads((out / "collect.json").read_text())
    assert [p["status"] for p in rec["programs"]] == ["failed", "failed"]
    assert "cannot compile this" in rec["programs"][0]["error"]
    with gzip.open(out / "measurements.jsonl.gz", "rt") as f:
        assert f.read() == ""
    out2 = tmp_path / "col2"
    assert collect.main(["--out", str(out2), "--programs", "2", "--budget", "0", "--device", "cpu"]) == 0
    rec = json.loads((out2 / "collect.json").read_text())
    assert rec["programs"] == [] and rec["runs"][0]["stopped"].startswith("budget spent")


def test_min_row_keeps_the_corpus_programs_that_reduce_long_rows(tmp_path, monkeypatch):
    """`collect --min-row N` tunes only the programs with a row reduction (softmax, norm ...) over rows
    of at least N; a long pointwise program or a column reduction is not one."""
    progs = corpus(300, seed=50)
    long_rows = [p for p in progs if p.reduces_rows(8192)]
    assert 10 <= len(long_rows) < len(progs) // 3
    assert all(p.cols >= 8192 and f"x{p.cols}_" in p.name for p in long_rows)
    assert not any(p.reduces_rows(8192) for p in progs if all(t.startswith(("pw", "col_", "to", "res", "affine"))
                                                             for t in p.tags))
    started = []
    monkeypatch.setattr(collect, "run_program", lambda prog, *a: started.append(prog.name) or
                        {"name": prog.name, "status": "ok", "graphs": 0, "kernels": 0, "failures": 0, "seconds": 0.0})
    assert collect.main(["--out", str(tmp_path / "c"), "--programs", "300", "--seed", "50", "--min-row", "8192",
                         "--device", "cpu"]) == 0
    assert started == [p.name for p in long_rows]
