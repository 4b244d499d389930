"""Every corpus program, shrunk, compiled by autofuse (strict, poisoned buffers) in Triton's
interpreter on the CPU, matches eager within the program's tolerance; the runner's CPU mode works."""
import json

import pytest
import torch

import autofuse
from benchmarks.programs import PROGRAMS, categories, select
from benchmarks.programs.check import float64_outputs, mismatch
from benchmarks.programs.train import wrapper

XFAIL: dict[str, str] = {}


def _param(p):
    marks = [pytest.mark.xfail(strict=True, reason=XFAIL[p.name])] if p.name in XFAIL else []
    return pytest.param(p, id=p.name, marks=marks)


@pytest.mark.parametrize("program", [_param(p) for p in PROGRAMS])
def test_program_matches_eager(program):
    torch._dynamo.reset()
    module, inputs = program.make("cpu", shrink=True)
    step = wrapper(program, module)   # a train program: outputs and gradients of a training step
    with torch.no_grad():
        expected = step(module)(*inputs)
        compiled = autofuse.compile(module, strict=True, poison=True, use_db=False)
        actual = step(compiled)(*inputs)
    why = mismatch(program, actual, expected, lambda: float64_outputs(module, inputs, program))
    assert why is None, why


def test_a_result_nearer_the_float64_one_than_eager_passes():
    """Outside the bf16 tolerance of eager's result, but closer than eager to the float64 result:
    a pass; further from it than eager: a failure that says so."""
    program = select(names=["act_gelu_erf_bf16"])[0]
    exact = torch.linspace(-4, 4, 1001, dtype=torch.float64)
    eager = (exact + 0.2).to(torch.bfloat16)        # far outside atol 0.04: eager's own rounding drift
    closer = (exact + 0.01).to(torch.bfloat16)
    further = (exact - 0.5).to(torch.bfloat16)
    assert mismatch(program, closer, eager) is not None
    assert mismatch(program, closer, eager, lambda: exact) is None
    why = mismatch(program, further, eager, lambda: exact)
    assert why is not None and "float64" in why


def test_corpus_covers_the_categories():
    assert len(PROGRAMS) >= 150
    assert len({p.name for p in PROGRAMS}) == len(PROGRAMS)
    need = {"norm_whole", "loss", "layernorm_multi", "norm", "conv_norm", "softmax", "attention", "reduction",
            "argreduce", "scan", "broadcast", "gather", "gelu_tanh", "activation", "conv_epilogue",
            "gemm_epilogue", "conv_chain", "gemm_chain", "rope", "pooling", "optimizer", "training", "generated"}
    assert need <= set(categories())
    assert any(p.dtype == torch.bfloat16 for p in PROGRAMS)


def test_select_interleaves_categories():
    first = select(max_programs=len(categories()))
    assert {p.category for p in first} == set(categories())
    assert all(p.category == "scan" for p in select(only=["scan"]))


def test_named_programs_run_in_the_order_named_and_an_unknown_name_is_refused():
    names = [p.name for p in select(only=["scan"])[:2]] + [select(only=["loss"])[0].name]
    assert [p.name for p in select(names=names[::-1])] == names[::-1]
    with pytest.raises(ValueError, match="unknown programs: no_such_program"):
        select(names=[names[0], "no_such_program"])


def test_mismatch_reports_wrong_values():
    p = PROGRAMS[0]
    x = torch.randn(5)
    assert mismatch(p, x, x.clone()) is None
    assert mismatch(p, x + 1, x) is not None
    assert mismatch(p, x[:4], x) is not None


def test_runner_cpu_mode(tmp_path):
    from benchmarks.programs.runner import main
    names = ["act_silu_f32", "loss_mse_mean_f32"]
    assert main(["--device", "cpu", "--shrink", "--out", str(tmp_path), "--names", *names]) == 0
    res = json.loads((tmp_path / "results.json").read_text())
    assert sorted(r["program"] for r in res["programs"]) == names
    for r in res["programs"]:
        assert set(r["variants"]) == {"eager", "autofuse_default"}
        assert r["variants"]["autofuse_default"]["correct"] is True
    assert "| act_silu_f32 |" in (tmp_path / "results.md").read_text()


def test_runner_runs_a_train_program_as_its_training_step(tmp_path):
    """A train program's variants and tune are its forward and backward: every variant correct on
    outputs and gradients, the tune stores plans the tuned variant finds, and the bytes moved count
    the output gradient once though the input's gradient is that same tensor passed through."""
    from benchmarks.programs.runner import main
    assert main(["--device", "cpu", "--shrink", "--out", str(tmp_path), "--names", "train_bias_add_rows_f32",
                 "--variants", "eager,autofuse_rules,autofuse_tuned", "--tune-trials", "2", "--tune-budget", "5"]) == 0
    (row,) = json.loads((tmp_path / "results.json").read_text())["programs"]
    assert "error" not in row["tune"] and not row["tune"].get("errors"), row["tune"]
    assert all(e["correct"] is True for e in row["variants"].values()), row["variants"]
    r, c = (select(names=["train_bias_add_rows_f32"])[0].tiny[k] for k in "rc")
    assert row["min_bytes"] == 4 * (3 * r * c + 2 * c)   # x, output, its gradient; the bias and its gradient


def test_timed_rows_give_ratios_and_category_geomeans(monkeypatch):
    """The GPU path's bookkeeping with an injected timer: ratios to torch.compile default, the
    per-category geomean table, and the count of programs below 0.97x."""
    import argparse

    from benchmarks.programs import runner
    times = {"eager": [2.0], "inductor": [1.0], "autofuse_default": [0.5]}
    monkeypatch.setattr(runner, "time_interleaved", lambda fns, sets, reps, rounds: {n: times[n] for n in fns})
    monkeypatch.setattr(runner, "host_us", lambda fn, args: 7.0)
    opts = argparse.Namespace(device="cpu", shrink=True, reps=1, rounds=1, gpu_ops=0)
    rows = []
    for name, af in (("act_relu_f32", 0.5), ("act_tanh_f32", 2.0), ("cumsum_last_f32", 1.0)):
        times["autofuse_default"] = [af]
        p = next(q for q in PROGRAMS if q.name == name)
        _, args = p.make("cpu", True)
        row = {"program": name, "category": p.category, "min_bytes": 1e6,
               "variants": {n: {"correct": True} for n in times}}
        runner._time(p, row, {n: (lambda *a: None) for n in times}, args, 10**6, 1e12, opts)
        rows.append(row)
    assert rows[0]["variants"]["autofuse_default"]["vs_inductor"] == 0.5
    assert rows[0]["variants"]["inductor"]["host_us"] == 7.0 and "host_us" not in rows[0]["variants"]["eager"]
    res = {"device": "d", "torch": "t", "triton": "tr", "date": "x", "command": "c", "copy_bandwidth_TBps": 1.0,
           "reps": 1, "rounds": 1, "timed": True, "variants": list(times), "programs": rows, "not_run": []}
    means = runner.category_means(res)
    assert means["activation"]["autofuse_default"] == (1.0, 2)
    assert means["all"]["eager"] == (2.0, 3)
    md = runner.markdown(res)
    assert "| activation | 2.000 (2) | 1.000 (2) | 1.000 (2) |" in md
    assert "autofuse_default: 1 programs below 0.97× torch.compile default's speed." in md


def test_runner_tuned_variant_on_the_cpu(tmp_path):
    """The tuned column: a small tune into DIR's DB, then autofuse.compile from it (no DB miss)."""
    from benchmarks.programs.runner import main
    assert main(["--device", "cpu", "--shrink", "--out", str(tmp_path), "--names", "bcast_row_bias_f32",
                 "--variants", "eager,autofuse_tuned", "--tune-trials", "2", "--tune-budget", "5"]) == 0
    (row,) = json.loads((tmp_path / "results.json").read_text())["programs"]
    assert "error" not in row["tune"], row["tune"]
    assert row["variants"]["autofuse_tuned"]["correct"] is True, row["variants"]["autofuse_tuned"]
    assert (tmp_path / "tuning.db").exists()


def test_results_list_the_gpu_operations_of_slow_programs():
    """With --gpu-ops, results.md lists each slow program's costliest GPU operations per variant;
    programs at torch.compile's speed and runs without profiles add nothing."""
    from benchmarks.programs.runner import markdown, parse
    assert parse(["--out", "x", "--gpu-ops", "6"]).gpu_ops == 6
    ops = {"inductor": ["   10.0 us   1.0x  triton_red_fused_sum_0"], "autofuse_default": ["   15.0 us   1.0x  triton_red_x"]}

    def row(name, ratio, with_ops=True):
        v = {n: {"correct": True, "ms": 0.01 * (ratio if n != "inductor" else 1), "vs_inductor": ratio if n != "inductor" else 1.0,
                 **({"gpu_ops": ops[n]} if with_ops else {})} for n in ops}
        return {"program": name, "category": "reduction", "min_bytes": 10**8, "variants": v}

    results = {"device": "d", "torch": "t", "triton": "tr", "date": "now", "command": "c", "variants": list(ops),
               "timed": True, "programs": [row("slow_one", 1.5), row("fast_one", 0.9), row("slow_unprofiled", 1.4, False)]}
    text = markdown(results)
    section = text[text.index("GPU operations per call"):]
    assert "slow_one:" in section and "triton_red_x" in section and "triton_red_fused_sum_0" in section
    assert "fast_one" not in section and "slow_unprofiled" not in section
    results["programs"] = [row("fast_one", 0.9)]
    assert "GPU operations per call" not in markdown(results)
