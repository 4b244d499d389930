"""Every benchmark case compiles and matches eager (tiny row counts, same row lengths)."""
import pytest

from benchmarks.cases import CASES
from tests.helpers import DEFAULT_DEVICE, compile_and_compare


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case_matches_eager(case):
    fn, args = case.build(DEFAULT_DEVICE, 0.0005)
    compile_and_compare(fn, args, check_stride=True)


def test_markdown_flags_host_bound_variants():
    from benchmarks.run import markdown
    variants = {"inductor": {"ms": 0.1, "bw_share": 0.9, "speedup_vs_inductor": 1.0, "host_us": 95.0},
                "autofuse_tuned": {"ms": 0.2, "bw_share": 0.5, "speedup_vs_inductor": 0.5, "host_us": 40.0}}
    md = markdown({"device": "d", "torch": "t", "triton": "tr", "date": "x", "copy_bandwidth_TBps": 4.2,
                   "cases": [{"case": "c", "min_bytes": 5e8, "variants": variants}]})
    assert "| c | 95.0 (host-bound) | — | 40.0 |" in md


def test_summary_leaves_cases_out_of_the_means():
    from benchmarks.summary import summary

    def case(name, ind, tuned, mb):
        v = {"ms": tuned, "bw_share": 0.9}
        return {"case": name, "min_bytes": mb * 1e6,
                "variants": {"inductor": {"ms": ind}, "inductor_max_autotune": {"ms": ind}, "autofuse_tuned": v}}
    res = {"cases": [case("a", 2.0, 1.0, 500), case("b", 1.0, 1.0, 500), case("c", 8.0, 1.0, 8)]}
    assert summary(res).splitlines()[-1].startswith("geometric mean vs inductor: 2.52x over 3 cases, 1.41x over the 2")
    out = summary(res, leave_out=["a"])
    assert not any(line.startswith("a ") for line in out.splitlines())
    assert out.splitlines()[-1].startswith(
        "geometric mean vs inductor: 2.83x over 2 cases, 1.00x over the 1")


def test_trip_probe_ratio_line_pairs_each_config_both_ways():
    from benchmarks.trip_probe import looped_grid, ratio_line
    cfgs = [str(c) for c in looped_grid()]
    rows = [{"variant": f"{cfgs[0]} literal", "us": 100.0}, {"variant": f"{cfgs[0]} runtime", "us": 130.0},
            {"variant": f"{cfgs[1]} literal", "us": 100.0}, {"variant": f"{cfgs[1]} runtime", "us": 110.0},
            {"variant": f"{cfgs[2]} literal", "us": 100.0}, {"variant": f"{cfgs[2]} runtime", "error": "x"}]
    assert ratio_line(rows) == "runtime / literal over 2 configs: median 1.2000, min 1.1000, max 1.3000"
    assert ratio_line(rows[:1]) == ""


def test_stream_probe_kernels_match_eager():
    """The probe's hand-written kernels (every hint and the grid-stride form) compute the cases they
    time, on a ragged SwiGLU size and row counts that the stride does not divide, in the interpreter."""
    import importlib

    import torch
    import triton

    import benchmarks.stream_probe
    from autofuse.runtime.loader import interpret_env
    with interpret_env(True):  # Triton decides at decoration time whether a kernel is interpreted
        sp = importlib.reload(benchmarks.stream_probe)
    g = torch.Generator().manual_seed(0)
    a, b = (torch.randn(3001, generator=g).bfloat16() for _ in range(2))
    ref = torch.nn.functional.silu(a) * b
    for ld, st in ((False, False), (True, True)):
        o = torch.empty_like(a)
        sp._swiglu[(triton.cdiv(3001, 512),)](a, b, o, 3001, BLOCK=512, LD_EF=ld, ST_CS=st)
        assert sp.close(o, ref)
    o = torch.empty_like(a)
    sp._swiglu_stride[(3,)](a, b, o, 3001, BLOCK=512, ST_CS=True)
    assert sp.close(o, ref)
    x, w = torch.randn(6, 256, generator=g).bfloat16(), torch.randn(256, generator=g).bfloat16()
    rms = (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * w
    seed_fn = next(c for c in CASES if c.name == "seed_f32_16384x4096").build("cpu", 1 / 4096)[0]
    xs, vecs = torch.randn(6, 256, generator=g), [torch.randn(256, generator=g) for _ in range(3)]
    for xb, rb, stride, grid in ((1, 128, False, 6), (2, 256, False, 3), (1, 256, True, 4)):
        o = torch.empty_like(x)
        sp._rmsnorm[(grid,)](x, w, o, ROWS=6, N=256, XBLOCK=xb, RBLOCK=rb, ST_CS=True, STRIDE=stride)
        assert sp.close(o, rms)
        o = torch.empty_like(xs)
        sp._seed[(grid,)](xs, *vecs, o, ROWS=6, N=256, XBLOCK=xb, RBLOCK=rb, ST_CS=False, STRIDE=stride)
        assert sp.close(o, seed_fn(xs, *vecs))


def test_interleaved_rounds_rotate_the_variant_order(monkeypatch):
    import benchmarks.run as run
    order = []
    monkeypatch.setattr(run, "time_samples", lambda f, sets, reps: (order.append(f()), [1.0] * reps)[1])
    fns = {n: (lambda n=n: n) for n in ("a", "b", "c")}
    out = run.time_interleaved(fns, [()], 2, 4)
    assert order == ["a", "b", "c", "b", "c", "a", "c", "a", "b", "a", "b", "c"]
    assert {n: len(s) for n, s in out.items()} == {"a": 8, "b": 8, "c": 8}


def test_store_probe_pairs_each_config_with_and_without_streaming_stores():
    from benchmarks.store_probe import configs, ratio_line, table
    pw = list(configs("swiglu_bf16_16384x11008"))
    assert len(pw) == 12 and sum(f["cache_hints"] for f, _ in pw) == 6 and {k for _, k in pw} == {"pointwise"}
    rows = [{"variant": "X", "us": 100.0, "bw_share": 1.0, "round_us": [99.0, 101.0]},
            {"variant": "X cache_hints", "us": 99.0, "bw_share": 1.0, "round_us": [98.5, 99.5]},
            {"variant": "Y", "error": "boom"}]
    assert ratio_line(rows).startswith("with .cs / without over 1 configs: median 0.9900")
    assert table(rows).splitlines()[2] == "| X cache_hints | 99.00 | 98.50-99.50 | 100.0% |"


def test_probe_variants_that_fail_or_differ_keep_a_row_and_are_not_timed():
    import torch
    from benchmarks.probe import CheckedVariants
    x = torch.randn(5, 7)
    v = CheckedVariants(lambda t: t * 2, (x,))
    v.add("same", lambda: (lambda t: t + t), config={"XBLOCK": 1})
    v.add("wrong", lambda: (lambda t: t * 3))
    v.add("broken", lambda: (_ for _ in ()).throw(RuntimeError("no kernel\nmore")))
    assert list(v.fns) == ["same"] and v.min_bytes == 2 * x.numel() * 4
    assert v.rows["same"] == {"variant": "same", "config": {"XBLOCK": 1}}
    assert v.rows["wrong"]["error"] == "AssertionError: differs from eager"
    assert v.rows["broken"]["error"] == "RuntimeError: no kernel"


@pytest.mark.parametrize("name,rounds", [("config_probe", 7), ("store_probe", 9), ("trip_probe", 5)])
def test_probes_share_options_and_result_header(name, rounds, tmp_path, monkeypatch):
    """The probes' command lines and JSON headers come from benchmarks.probe (parser, start): each
    writes DIR/<name>.json with the device, torch, copy bandwidth, reps and rounds, and its cases."""
    import importlib
    import json
    import sys

    import torch
    mod = importlib.import_module(f"benchmarks.{name}")
    monkeypatch.setattr("benchmarks.probe.copy_bandwidth", lambda device, reps: 4.0e12)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "GPU")
    stub = ([{"variant": "v", "error": "not run"}], []) if name == "config_probe" else [{"variant": "v", "error": "x"}]
    monkeypatch.setattr(mod, "probe_case", lambda *a: stub)
    case = CASES[0].name
    monkeypatch.setattr(sys, "argv", [name, "--out", str(tmp_path), "--cases", case])
    mod.main()
    res = json.loads((tmp_path / f"{name}.json").read_text())
    assert res["copy_bandwidth_TBps"] == 4.0 and res["device"] == "GPU" and res["rounds"] == rounds
    assert list(res["cases"]) == [case]


def test_probe_inductor_modes_are_both_added(monkeypatch):
    """add_inductor_modes: Inductor default and max-autotune-no-cudagraphs rows, each checked."""
    import torch
    from benchmarks.probe import CheckedVariants
    modes = []
    monkeypatch.setattr(torch, "compile", lambda fn, mode=None: modes.append(mode) or fn)
    v = CheckedVariants(lambda t: t * 2, (torch.randn(3, 4),))
    v.add_inductor_modes(lambda t: t * 2)
    assert list(v.fns) == ["inductor", "inductor max-autotune"] and modes == [None, "max-autotune-no-cudagraphs"]
