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


def _suite_results(costmodel=None):
    def case(name, mb, ind, mx, tuned):
        variants = {"inductor": {"ms": ind, "bw_share": 0.5, "speedup_vs_inductor": 1.0},
                    "inductor_max_autotune": {"ms": mx, "bw_share": 0.6, "speedup_vs_inductor": ind / mx},
                    "autofuse_tuned": {"ms": tuned, "bw_share": 0.9, "speedup_vs_inductor": ind / tuned}}
        return {"case": name, "min_bytes": mb * 1e6, "variants": variants}
    res = {"device": "GPU X", "torch": "t", "triton": "tr", "date": "2026-01-02T03:04:05", "command":
           "python3 -m benchmarks.run --reps 5 --out /tmp/x", "copy_bandwidth_TBps": 4.0,
           "cases": [case("a", 500, 2.0, 1.5, 1.0), case("b", 500, 1.0, 1.0, 1.0), case("c", 8, 8.0, 4.0, 1.0)]}
    if costmodel:
        res["costmodel"] = costmodel
    return res


def test_readme_table_rows_means_and_the_model_it_was_tuned_with(tmp_path):
    import json

    from benchmarks.readme_table import table
    (tmp_path / "m.json").write_text(json.dumps({"version": "cm-new", "trained_on": {"devices": ["cuda:GPU X:sm90"]}}))
    out = table(_suite_results("cm-old"), pretrained=tmp_path)
    assert "| a | 500 | 2.000 (1.00×, 50%) | 1.500 (1.33×, 60%) | 1.000 (2.00×, 90%) |" in out
    assert "`python3 -m benchmarks.run --reps 5`" in out
    assert "over Inductor default: **2.52×** on all 3 cases, **1.41×** on the 2 cases above 100 MB" in out
    assert "over Inductor max-autotune: **1.82×** on all 3 cases, **1.22×** on the 2" in out
    assert "`cm-old`; the shipped model is `cm-new`" in out
    assert "the shipped model" not in table(_suite_results("cm-new"), pretrained=tmp_path)
    assert "the shipped model" not in table(_suite_results(), pretrained=tmp_path)


def test_readme_table_update_rewrites_only_the_marked_block():
    from benchmarks.readme_table import END, START, update
    text = f"intro\n{START}\nold table\n{END}\noutro\n"
    assert update(text, "new\n") == f"intro\n{START}\nnew\n{END}\noutro\n"
    with pytest.raises(ValueError):
        update("no markers\n", "new\n")


def test_readme_performance_block_is_generated_from_the_latest_suite_run():
    """The README's numbers are the committed results' (rerun `python -m benchmarks.readme_table
    --update README.md` after committing a new suite run)."""
    import json
    from pathlib import Path

    from benchmarks.readme_table import END, START, latest_suite_results, table
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    block = readme[readme.index(START) + len(START) + 1:readme.index(END)]
    assert block == table(json.loads(latest_suite_results().read_text()))


def test_readme_model_and_corpus_blocks_are_the_latest_runs():
    """The README's real-model and corpus tables are the latest committed runs' (regenerate with
    `python -m benchmarks.readme_table --update README.md`)."""
    from pathlib import Path

    from benchmarks.readme_table import EXTRA_BLOCKS, extra_block, markers
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    for what, name in EXTRA_BLOCKS.items():
        start, end = markers(name)
        block = readme[readme.index(start) + len(start) + 1:readme.index(end)]
        assert block == extra_block(what), what
