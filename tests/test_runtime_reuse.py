"""autofuse.compile reuses plans stored in the tuning DB: hits, misses, on_miss, bad stored plans,
unusable DB files — always a correct program."""
from dataclasses import replace

import pytest
import torch

import autofuse
from tests.helpers import seed_fn
from autofuse.api import Recorder
from autofuse.plan.graph_hash import Versions, device_key
from autofuse.plan.plan import KernelPlan, PlanError
from tuning_db import PlanRecord, TuningDB




def args(device="cpu"):
    g = torch.Generator().manual_seed(1)
    return [torch.randn(40, 40, generator=g).to(device)] + [torch.randn(40, generator=g).to(device) for _ in range(3)]


def _store(db_path, plan, device="cpu"):
    v = Versions.current()
    db = TuningDB.open(str(db_path))
    db.put_plan(PlanRecord(plan.graph_key, device_key(args(device)), v.torch, v.triton, v.plan_schema, plan.dumps(),
                           time_us=12.5, source="strategy:tvm"))
    db.close()


def _compile(db_path, **kw):
    torch._dynamo.reset()
    rec = Recorder()
    f = autofuse.compile(seed_fn, db=str(db_path), recorder=rec, strict=True, poison=True, **kw)
    return f, rec


def test_miss_uses_the_default_plan(tmp_path, device):
    f, rec = _compile(tmp_path / "t.db")
    a = args(device)
    torch.testing.assert_close(f(*a), seed_fn(*a), rtol=1e-4, atol=1e-5)
    (_, _, art), = rec.graphs
    assert art.source == "strategy" and len(art.kernels) == 1


def test_hit_builds_the_stored_plan(tmp_path, device, capsys):
    a = args(device)
    torch._dynamo.reset()
    report = autofuse.explain(seed_fn, a, strategy="tvm")
    _store(tmp_path / "t.db", report.plans[0], device)
    f, rec = _compile(tmp_path / "t.db", verbose=True)
    torch.testing.assert_close(f(*a), seed_fn(*a), rtol=1e-4, atol=1e-5)
    (_, _, art), = rec.graphs
    assert art.source == "tuning DB" and len(art.kernels) == 3
    assert "plan cache hit" in capsys.readouterr().err


def test_on_miss_error(tmp_path, device):
    f, _ = _compile(tmp_path / "t.db", on_miss="error")
    with pytest.raises(PlanError, match="no stored plan"):
        f(*args(device))


def test_cached_plan_skips_the_fusion_search(tmp_path, device, monkeypatch):
    a = args(device)
    torch._dynamo.reset()
    report = autofuse.explain(seed_fn, a)
    _store(tmp_path / "t.db", report.plans[0], device)
    import autofuse.compiler as compiler

    def no_search(*_a, **_k):
        raise AssertionError("the greedy fusion search ran although a stored plan was found")
    monkeypatch.setattr(compiler, "fuse_nodes", no_search)
    f, rec = _compile(tmp_path / "t.db")
    torch.testing.assert_close(f(*a), seed_fn(*a), rtol=1e-4, atol=1e-5)


def test_illegal_stored_plan_is_skipped_with_a_warning(tmp_path, device):
    a = args(device)
    torch._dynamo.reset()
    plan = autofuse.explain(seed_fn, a, strategy="none").plans[0]
    bad = replace(plan, kernels=(KernelPlan(("not_a_node",)),) + plan.kernels[1:])
    _store(tmp_path / "t.db", bad, device)
    f, rec = _compile(tmp_path / "t.db")
    with pytest.warns(UserWarning, match="not legal here"):
        out = f(*a)
    torch.testing.assert_close(out, seed_fn(*a), rtol=1e-4, atol=1e-5)
    (_, _, art), = rec.graphs
    assert art.source == "strategy"


def test_unusable_db_file_warns_and_stays_intact(tmp_path, device):
    path = tmp_path / "not_a_db.db"
    payload = b"this is the user's file, not a database\n" * 10
    path.write_bytes(payload)
    f, _ = _compile(path)
    a = args(device)
    with pytest.warns(UserWarning, match="tuning DB not used"):
        out = f(*a)
    torch.testing.assert_close(out, seed_fn(*a), rtol=1e-4, atol=1e-5)
    assert path.read_bytes() == payload


def test_renamed_function_hits_the_same_plan(tmp_path, device):
    def renamed(inp, b, g, be):
        hidden = inp * 1.1 + b
        act = torch.relu(hidden)
        val = act * act + act * 0.1
        mu = val.mean(dim=1, keepdim=True)
        return (val - mu) * g + be
    a = args(device)
    torch._dynamo.reset()
    _store(tmp_path / "t.db", autofuse.explain(seed_fn, a, strategy="tvm").plans[0], device)
    torch._dynamo.reset()
    rec = Recorder()
    f = autofuse.compile(renamed, db=str(tmp_path / "t.db"), recorder=rec, strict=True)
    torch.testing.assert_close(f(*a), renamed(*a), rtol=1e-4, atol=1e-5)
    assert rec.graphs[0][2].source == "tuning DB"
