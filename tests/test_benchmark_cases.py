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


def test_interleaved_rounds_rotate_the_variant_order(monkeypatch):
    import benchmarks.run as run
    order = []
    monkeypatch.setattr(run, "time_samples", lambda f, sets, reps: (order.append(f()), [1.0] * reps)[1])
    fns = {n: (lambda n=n: n) for n in ("a", "b", "c")}
    out = run.time_interleaved(fns, [()], 2, 4)
    assert order == ["a", "b", "c", "b", "c", "a", "c", "a", "b", "a", "b", "c"]
    assert {n: len(s) for n, s in out.items()} == {"a": 8, "b": 8, "c": 8}
