"""Fusion plans as values: JSON round trip, replay across captures and processes, strategies,
tampered and stale plans rejected with reasons, the candidate space, the seed example's numbers."""
import json
import os
import random
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch

import autofuse
from autofuse import CompileOptions
from autofuse.capture.model_file import load_model_file
from autofuse.capture.trace import trace_aten
from autofuse.compiler import compile_graph
from autofuse.plan.plan import FusionPlan, KernelPlan, PlanError, load_plans
from autofuse.plan.space import build_space
from autofuse.strategies.tvm import KIND_NAMES, FuseOps
from tests.helpers import compile_and_compare, kernels_of, rand, seed_fn

ROOT = Path(__file__).resolve().parents[1]
SEED = ROOT / "examples" / "seed_model.py"




def seed_args(n=48):
    return [rand((n, n)), rand((n,)), rand((n,)), rand((n,))]


def _compile(fn, args, **kw):
    gm = trace_aten(fn, args)
    return gm, compile_graph(gm, args, CompileOptions(strict=True, **kw))


def test_plan_json_round_trip():
    _, art = _compile(seed_fn, seed_args())
    plan = art.plan
    again = FusionPlan.loads(plan.dumps())
    assert again == plan
    assert json.loads(plan.dumps())["schema_version"] == 1
    assert all(k.config is not None for k in plan.kernels)


def test_seed_kernel_counts_per_strategy():
    args = seed_args()
    counts = {}
    for strategy in ("inductor", "tvm", "none"):
        c = compile_and_compare(seed_fn, args, strategy=strategy)
        counts[strategy] = [k.kind for k in kernels_of(c)]
    assert counts["inductor"] == ["reduction"]
    # TVM: the elementwise chain up to s; the mean; the epilogue
    assert counts["tvm"] == ["pointwise", "reduction", "pointwise"]
    assert counts["none"] == ["reduction", "pointwise"]


def test_seed_tvm_groups_and_pattern_kinds():
    gm = trace_aten(seed_fn, seed_args())
    fuse = FuseOps(gm)
    kinds = {n.name: KIND_NAMES[k] for n, k in zip(fuse.nodes, fuse.kind)}
    assert kinds["mean"] == "CommReduce" and kinds["relu"] == "ElemWise" and kinds["add"] == "Broadcast"
    roots = fuse.run()
    groups = {}
    for n, r in zip(fuse.nodes, roots):
        groups.setdefault(r, []).append(n.name)
    assert sorted(map(len, groups.values())) == [1, 3, 6]
    assert ["mean"] in groups.values()


def test_seed_bytes_estimates_at_1024():
    loaded = load_model_file(SEED)
    fused = autofuse.explain(loaded.model, loaded.example_inputs)
    # the seed document's table: ~80 MiB when every op is its own kernel, ~8 MiB fused
    assert 79.9 < fused.unfused_bytes / 2**20 < 80.1
    assert 7.9 < fused.bytes_moved / 2**20 < 8.1
    tvm = autofuse.explain(loaded.model, loaded.example_inputs, strategy="tvm")
    assert 19.9 < tvm.bytes_moved / 2**20 < 20.1  # s written once, read by the mean and the epilogue


def test_plan_applies_to_a_fresh_capture_with_identical_kernels():
    args = seed_args()
    _, art1 = _compile(seed_fn, args, strategy="tvm")
    gm2 = trace_aten(seed_fn, args)  # a fresh capture
    art2 = compile_graph(gm2, args, CompileOptions(strict=True, plan=art1.plan))
    assert [k.source for k in art2.kernels] == [k.source for k in art1.kernels]
    torch.testing.assert_close(art2.program(args)[0], seed_fn(*args), rtol=1e-4, atol=1e-5)


def test_plan_replays_in_another_process(tmp_path):
    loaded = load_model_file(SEED)
    report = autofuse.explain(loaded.model, loaded.example_inputs, strategy="tvm")
    plan_file = tmp_path / "plan.json"
    from autofuse.plan.plan import save_plans
    save_plans(report.plans, plan_file)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-m", "autofuse", "explain", str(SEED), "--plan", str(plan_file),
                          "--format", "json"], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert [k["name"] for k in data["kernels"]] == [k.name for k in report.kernels]
    assert data["strategy"] == "plan"


def test_plan_through_compile_api():
    args = seed_args(40)
    torch._dynamo.reset()
    report = autofuse.explain(seed_fn, args, strategy="tvm")
    torch._dynamo.reset()
    f = autofuse.compile(seed_fn, plan=report.plans[0], strict=True, poison=True)
    torch.testing.assert_close(f(*args), seed_fn(*args), rtol=1e-4, atol=1e-5)


def _tamper(plan, **kw):
    return replace(plan, **kw)


def test_tampered_plans_are_rejected_with_reasons():
    args = seed_args()
    gm, art = _compile(seed_fn, args, strategy="tvm")
    plan = art.plan
    k = plan.kernels

    def reject(bad, needle):
        with pytest.raises(PlanError) as e:
            compile_graph(gm, args, CompileOptions(strict=True, plan=bad))
        assert needle in str(e.value), str(e.value)

    # wrong node ids
    reject(_tamper(plan, kernels=(KernelPlan(("no_such_node",)),) + k[1:]), "does not have")
    # a node left out, a node placed twice
    reject(_tamper(plan, kernels=k[1:]), "does not place")
    reject(_tamper(plan, kernels=k + (k[0],)), "placed in kernels")
    # a group with a cycle: the chain up to s with the epilogue, around the mean
    reject(_tamper(plan, kernels=(KernelPlan(k[0].nodes + k[2].nodes), k[1])), "cycle")
    # an impossible config
    bad_cfg = replace(k[1].config, RBLOCK=16, persistent=True)
    reject(_tamper(plan, kernels=(k[0], KernelPlan(k[1].nodes, bad_cfg), k[2])), "impossible config")
    # stale: the same plan for another shape
    args2 = seed_args(40)
    with pytest.raises(PlanError, match="stale"):
        compile_graph(trace_aten(seed_fn, args2), args2, CompileOptions(strict=True, plan=plan))
    # wrong schema version
    data = plan.to_json()
    data["schema_version"] = 99
    with pytest.raises(PlanError, match="schema version"):
        FusionPlan.from_json(data)


def test_incompatible_iteration_spaces_in_a_plan_are_rejected():
    def fn(x):
        return x.sum(0), x[:, :5] * 3   # 55 elements: neither 13 nor 13 x 11
    args = [rand((11, 13))]
    gm, art = _compile(fn, args, strategy="none")
    merged = KernelPlan(tuple(n for kp in art.plan.kernels for n in kp.nodes))
    with pytest.raises(PlanError, match="does not split"):
        compile_graph(gm, args, CompileOptions(strict=True, plan=replace(art.plan, kernels=(merged,))))


def test_plan_file_errors(tmp_path):
    with pytest.raises(PlanError, match="no such plan file"):
        load_plans(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(PlanError, match="not valid JSON"):
        load_plans(bad)


def test_candidate_space_is_deterministic_and_every_choice_is_legal():
    args = seed_args(24)
    gm = trace_aten(seed_fn, args)
    s1 = build_space(gm, args)
    s2 = build_space(trace_aten(seed_fn, args), args)
    assert s1.candidates == s2.candidates and s1.nodes == s2.nodes
    assert "relu" in s1.realize_choices and s1.config_ranges["pointwise"]["XBLOCK"]
    space = build_space(gm, args, decisions={n: True for n in s1.realize_choices})
    assert len(space.legal) >= 2
    rng = random.Random(0)
    for _ in range(6):
        chosen = [c for c in space.legal if rng.random() < 0.6]
        rng.shuffle(chosen)
        plan = space.plan_from_choices(chosen)
        art = compile_graph(gm, args, CompileOptions(strict=True, poison=True, plan=plan))
        torch.testing.assert_close(art.program(args)[0], seed_fn(*args), rtol=1e-4, atol=1e-5)


def test_rejected_fusions_are_explained():
    def fn(x, w):
        a = torch.exp(x)
        return a, a + a @ w
    r = autofuse.explain(fn, [rand((8, 8)), rand((8, 8))])
    reasons = [why for _, _, why in r.rejected]
    assert any("ATen fallback" in w for w in reasons)
    assert "rejected fusions" in str(r)
    dot = r.to_dot()
    assert dot.startswith("digraph") and "cluster_0_0" in dot


def test_a_grouping_whose_pointwise_nodes_meet_only_in_a_reductions_space_applies():
    """Short rows' means unrolled into one-element pointwise nodes, elementwise nodes of the row that
    read them, and the row's norm and amin: the strategy fuses them into one reduction kernel,
    where a mean is computed per row and the others per element. A plan lists its nodes in
    execution order, and its first two (1 and 7 elements) share no space of their own: the plan's
    check places them in the reduction's space, as the fusion did (a soak's program)."""
    def fn(a):
        d = torch.sub(a, a, alpha=2)
        m = d.mean(0, keepdim=True)
        c = (d - m) * 0.5
        c = c - c.mean(0, keepdim=True)
        return (a * torch.sigmoid(d) * m).amin(0), c - c.norm(dim=0), d.contiguous()
    args = [rand((7,), torch.float16)]
    gm = trace_aten(fn, args)
    arts = compile_graph(gm, args, CompileOptions(strict=True, use_db=False))
    assert any(k.kind == "reduction" and len(k.nodes) > 3 for k in arts.kernels), [k.nodes for k in arts.kernels]
    again = compile_graph(gm, args, CompileOptions(strict=True, use_db=False, plan=arts.plan))
    assert [k.nodes for k in again.kernels] == [k.nodes for k in arts.kernels]
    compile_and_compare(fn, args)
