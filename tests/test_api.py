"""The user's surface: autofuse.compile, torch.compile(backend="autofuse"), explain, CLI, model files."""
import importlib.metadata
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import autofuse
from tests.helpers import seed_fn
from autofuse.capture.model_file import ModelFileError, load_model_file

ROOT = Path(__file__).resolve().parents[1]
SEED = ROOT / "examples" / "seed_model.py"




def seed_inputs(n=64, device="cpu"):
    g = torch.Generator().manual_seed(0)
    return [torch.randn(n, n, generator=g).to(device), *(torch.randn(n, generator=g).to(device) for _ in range(3))]


def test_compile_function_matches_eager(device):
    torch._dynamo.reset()
    f = autofuse.compile(seed_fn, strict=True, poison=True)
    args = seed_inputs(device=device)
    torch.testing.assert_close(f(*args), seed_fn(*args), rtol=1e-4, atol=1e-5)


def test_compile_module_and_new_shape_recompiles(device):
    torch._dynamo.reset()
    loaded = load_model_file(SEED)
    f = autofuse.compile(loaded.model, strict=True, poison=True)
    for n in (48, 33):
        args = seed_inputs(n, device)
        torch.testing.assert_close(f(*args), loaded.model(*args), rtol=1e-4, atol=1e-5)


def test_dynamic_shapes_are_specialized(device):
    torch._dynamo.reset()
    from autofuse.capture.backend import make_backend
    f = torch.compile(seed_fn, backend=make_backend(autofuse.CompileOptions(strict=True)), dynamic=True)
    for n in (17, 29):
        args = seed_inputs(n, device)
        torch.testing.assert_close(f(*args), seed_fn(*args), rtol=1e-4, atol=1e-5)


def test_past_max_sizes_new_sizes_run_with_aten_ops(device):
    """A graph meeting a new size at every call (a growing key/value cache) is compiled for its
    first max_sizes sizes; the others run with ATen ops, correct, warned once, listed as eager."""
    torch._dynamo.reset()
    from autofuse.capture.backend import make_backend
    rec = autofuse.api.Recorder()
    f = torch.compile(seed_fn, backend=make_backend(autofuse.CompileOptions(strict=True, max_sizes=2, recorder=rec)),
                      dynamic=True)
    with pytest.warns(UserWarning, match="max_sizes") as caught:
        for n in (17, 29, 33, 40, 29, 17):
            args = seed_inputs(n, device)
            torch.testing.assert_close(f(*args), seed_fn(*args), rtol=1e-4, atol=1e-5)
    assert sum("max_sizes" in str(w.message) for w in caught) == 1
    assert len(rec.graphs) == 2                                     # 17 and 29 compiled, once each
    assert [o.compiled for o in rec.outcomes].count(False) == 1 and "max_sizes" in rec.outcomes[-1].reason
    with pytest.raises(ValueError, match="max_sizes"):
        autofuse.CompileOptions(max_sizes=0)


def test_graph_break_subgraphs_all_compiled(device):
    torch._dynamo.reset()
    rec = autofuse.api.Recorder()

    def fn(x):
        y = torch.sin(x) * 2
        print("graph break")  # Dynamo splits here
        return y.cos() + 1

    f = autofuse.compile(fn, strict=True, recorder=rec)
    x = torch.randn(13, device=device)
    torch.testing.assert_close(f(x), fn(x))
    assert len(rec.graphs) == 2


def test_backend_by_name_after_import(device):
    torch._dynamo.reset()
    f = torch.compile(seed_fn, backend="autofuse")
    args = seed_inputs(device=device)
    torch.testing.assert_close(f(*args), seed_fn(*args), rtol=1e-4, atol=1e-5)


def test_backend_entry_point_registered():
    eps = [e for e in importlib.metadata.entry_points(group="torch_dynamo_backends") if e.name == "autofuse"]
    if not eps:
        pytest.skip("autofuse is not installed (entry points come with pip install)")
    code = textwrap.dedent("""
        import torch
        f = torch.compile(lambda x: (x * 2).sum(-1), backend="autofuse")
        x = torch.randn(5, 7)
        torch.testing.assert_close(f(x), (x * 2).sum(-1))
        import sys
        print("ok", "autofuse" in sys.modules)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "ok True" in out.stdout


def test_explain_seed_example():
    loaded = load_model_file(SEED)
    report = autofuse.explain(loaded.model, loaded.example_inputs)
    assert len(report.kernels) == 1
    k = report.kernels[0]
    assert k.name == "triton_per_fused_add_mean_mul_relu_sub_0"
    assert k.kind == "reduction"
    assert set(k.aten_ops) == {"add", "mean", "mul", "relu", "sub"}
    assert list(k.reads) == ["arg0", "arg1", "arg2", "arg3"] and len(k.writes) == 1
    # the seed document: ~8 MiB moved when fused (x read once, y written once, 12 KiB of vectors)
    assert report.bytes_moved == 2 * 4 * 1024 * 1024 + 3 * 4 * 1024
    assert "triton_per_fused_add_mean_mul_relu_sub_0" in str(report)


@pytest.mark.parametrize("entry", ["explain", "tune"])
def test_a_lone_tensor_as_example_inputs_is_refused_with_one_line(entry):
    """A tensor passed where the sequence of inputs goes would be iterated row by row, each row an
    argument: refused before anything is traced."""
    with pytest.raises(TypeError, match=r"pass a single tensor x as \(x,\)"):
        getattr(autofuse, entry)(lambda x: x * 2, torch.randn(3, 4))


def test_explain_unfused_strategy_moves_more_bytes():
    loaded = load_model_file(SEED)
    fused = autofuse.explain(loaded.model, loaded.example_inputs)
    unfused = autofuse.explain(loaded.model, loaded.example_inputs, strategy="none")
    # one kernel per realized buffer: the mean, and the epilogue that recomputes s
    assert [k.kind for k in unfused.kernels] == ["reduction", "pointwise"]
    assert unfused.bytes_moved > fused.bytes_moved + 4 * 1024 * 1024


def _cli(*args, cwd=ROOT):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", "autofuse", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=300)


def test_cli_explain_seed():
    out = _cli("explain", str(SEED))
    assert out.returncode == 0, out.stderr
    assert "triton_per_fused_add_mean_mul_relu_sub_0" in out.stdout
    assert "aten ops: add, mean, mul, relu, sub" in out.stdout


def test_cli_explain_json():
    import json
    out = _cli("explain", str(SEED), "--format", "json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert [k["name"] for k in data["kernels"]] == ["triton_per_fused_add_mean_mul_relu_sub_0"]


def test_model_file_with_model_and_example_inputs(tmp_path):
    p = tmp_path / "m.py"
    p.write_text("import torch\nmodel = lambda x: torch.tanh(x) * 3\n"
                 "def example_inputs():\n    return (torch.randn(9, 4),)\n")
    out = _cli("explain", str(p))
    assert out.returncode == 0, out.stderr
    assert "tanh" in out.stdout and "mul" in out.stdout


def test_model_file_with_neither_convention(tmp_path):
    p = tmp_path / "empty.py"
    p.write_text("x = 1\n")
    out = _cli("explain", str(p))
    assert out.returncode == 2
    err = out.stderr.strip().splitlines()
    assert len(err) == 1 and "neither" in err[0] and "get_inputs" in err[0]
    with pytest.raises(ModelFileError):
        load_model_file(p)


def test_model_file_missing_get_inputs(tmp_path):
    p = tmp_path / "half.py"
    p.write_text("import torch\nclass Model(torch.nn.Module):\n    pass\n")
    out = _cli("explain", str(p))
    assert out.returncode == 2 and "get_inputs" in out.stderr


def test_model_file_import_error_is_the_users(tmp_path):
    p = tmp_path / "broken.py"
    p.write_text("import torch\n\ndef helper():\n    raise ValueError('bad config value 42')\n\nhelper()\n")
    out = _cli("explain", str(p))
    assert out.returncode == 2
    assert "ValueError: bad config value 42" in out.stderr
    assert "broken.py" in out.stderr and "model file's error" in out.stderr
    assert "autofuse/cli.py" not in out.stderr  # the user's frames, not ours


def test_missing_model_file():
    out = _cli("explain", "does_not_exist.py")
    assert out.returncode == 2 and "no such model file" in out.stderr


def test_model_file_module_is_importable_by_name(tmp_path, device):
    """Dynamo resolves a forward's globals by importing the module that defines it: a model file
    loads as a registered module, and a forward calling its own module-level helper compiles."""
    import importlib
    p = tmp_path / "helper_model.py"
    p.write_text(textwrap.dedent("""
        import torch
        SCALE = 1.5
        def act(t):
            return torch.sigmoid(t) * SCALE
        class Model(torch.nn.Module):
            def forward(self, x):
                return act(x) + x.mean(dim=1, keepdim=True)
        def get_inputs():
            return [torch.randn(37, 19)]
    """))
    loaded = load_model_file(p)
    assert importlib.import_module(type(loaded.model).__module__) is sys.modules[type(loaded.model).__module__]
    assert load_model_file(p).model.__class__.__module__ == type(loaded.model).__module__  # a stable name
    torch._dynamo.reset()
    x = loaded.example_inputs[0].to(device)
    f = autofuse.compile(loaded.model, strict=True, poison=True)
    torch.testing.assert_close(f(x), loaded.model(x), rtol=1e-4, atol=1e-5)


def test_model_file_failing_import_is_not_registered(tmp_path):
    p = tmp_path / "raises.py"
    p.write_text("raise RuntimeError('boom')\n")
    before = set(sys.modules)
    with pytest.raises(ModelFileError, match="boom"):
        load_model_file(p)
    assert not {m for m in set(sys.modules) - before if m.startswith("autofuse_user_model_")}


def test_readme_main_job_tunes_and_runs_on_the_same_device(tmp_path):
    """`autofuse tune examples/seed_model.py && python examples/run_tuned.py examples/seed_model.py`:
    both take the GPU when there is one, so the plans tuned are the plans found."""
    db = str(tmp_path / "t.db")
    tuned = _cli("tune", str(SEED), "--db", db, "--trials", "2", "--top-k", "1", "--refine", "0", "--no-progress")
    assert tuned.returncode == 0, tuned.stderr[-2000:]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    ran = subprocess.run([sys.executable, str(ROOT / "examples" / "run_tuned.py"), str(SEED), "--db", db],
                         capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert "ran compiled from the tuning DB's plans" in ran.stdout
