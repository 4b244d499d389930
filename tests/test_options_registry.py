"""The launch-config option registry (codegen/options.py): every option field of LaunchConfig has one
entry; the plan checker, the tuner's candidates and neighbours, the defaults and KernelWriter agree
with it; and each option a kernel's candidate list offers compiles to a kernel that matches eager."""
from dataclasses import fields, replace

import pytest
import torch
import torch.nn.functional as F

from autofuse import CompileOptions
from autofuse.capture.trace import compile_traced, trace_aten
from autofuse.codegen.config import LaunchConfig
from autofuse.codegen.device import REFERENCE
from autofuse.codegen.options import OPTIONS, KernelView, apply_defaults, default_legality, option, why_not_options
from autofuse.codegen.triton_kernel import KernelWriter
from autofuse.compiler import compile_graph, schedule
from autofuse.plan.apply import check_config
from autofuse.schedule.heuristics import Heuristics
from autofuse.search.candidates import candidate_configs, neighbour_configs
from tests.helpers import assert_close, kernels_of, rand

LAUNCH_NUMBERS = {"XBLOCK", "RBLOCK", "num_warps", "num_stages", "persistent"}


def softmax(x):
    return torch.softmax(x, -1)


def rmsnorm(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w


def gelu_tanh(x, b):
    return F.gelu(x + b, approximate="tanh")


CASES = {
    "softmax": (softmax, lambda: [rand((6, 3000), noncontig=True)]),
    "rmsnorm": (rmsnorm, lambda: [rand((5, 700)), rand((700,))]),
    "col_sum": (lambda x: x.sum(0), lambda: [rand((3000, 7))]),
    "gelu_bf16": (gelu_tanh, lambda: [rand((37, 300), torch.bfloat16), rand((300,), torch.bfloat16)]),
    "cumsum": (lambda x: x.cumsum(-1) * 2, lambda: [rand((9, 3000))]),
}


def groups(name):
    fn, make = CASES[name]
    args = make()
    return [g for g in schedule(trace_aten(fn, args), args, CompileOptions(strict=True, use_db=False)).groups
            if not g.is_extern]


def gpu_default(g):
    kind = "reduction" if g.is_reduction else "pointwise"
    legal = default_legality(KernelView.of(g), False)
    return Heuristics().launch_config(kind, g.numel, g.rnumel, False, legal=legal, device=REFERENCE)


def test_every_option_field_has_one_entry():
    names = [o.name for o in OPTIONS]
    assert len(names) == len(set(names))
    assert set(names) == {f.name for f in fields(LaunchConfig)} - LAUNCH_NUMBERS


def _codegen_imports(module: str) -> set[str]:
    """The autofuse.codegen modules `module` imports, transitively (read from the sources)."""
    import ast
    import importlib
    seen, todo = set(), [module]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        tree = ast.parse(open(importlib.import_module(f"autofuse.codegen.{name}").__file__).read())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                todo += [node.module] if node.module else [a.name for a in node.names]
    return seen


def test_every_option_names_the_codegen_module_the_kernel_writer_calls():
    """Each entry's `codegen` module holds the option's legality rule and is among the modules the
    KernelWriter is built from (its mixins and what they import)."""
    import importlib
    writer = _codegen_imports("triton_kernel")
    for opt in OPTIONS:
        mod = importlib.import_module(f"autofuse.codegen.{opt.codegen}")
        assert any(n.startswith("why_not_") for n in vars(mod)), opt.codegen
        assert opt.codegen in writer, (opt.name, opt.codegen)


def test_cost_model_flag_features_are_the_registrys_on_off_options():
    from autofuse.codegen.options import FLAG_OPTIONS
    from costmodel.features import FEATURE_NAMES
    bools = {f.name for f in fields(LaunchConfig) if f.type in (bool, "bool")} - {"persistent"}
    assert set(FLAG_OPTIONS) == bools
    assert list(FLAG_OPTIONS) == [o.name for o in OPTIONS if o.name in bools]
    assert set(FLAG_OPTIONS) <= set(FEATURE_NAMES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_plan_checker_and_candidates_follow_the_registry(name):
    for g in groups(name):
        view = KernelView.of(g)
        default = gpu_default(g)
        assert check_config(default, g) is None
        cands = candidate_configs(g, default, interpret=False, limit=400)
        for c in cands + neighbour_configs(default, g):
            assert check_config(c, g) is None
            for opt in OPTIONS:  # a legal config's every option is legal by the registry
                assert opt.why_not(c, view) is None
        for opt in OPTIONS:
            off = replace(default, **{opt.name: LaunchConfig.__dataclass_fields__[opt.name].default})
            assert opt.why_not(off, view) is None  # an option left off is always legal
            if opt.variant is None:
                continue
            offered = any(getattr(c, opt.name) != getattr(off, opt.name) for c in cands)
            legal_somewhere = any(opt.eligible(view, p, s) is None for p in (True, False) for s in (1,))
            assert offered == legal_somewhere, opt.name


def test_an_illegal_option_is_refused_with_the_registrys_reason():
    (g,) = groups("rmsnorm")  # f32, no tanh: fast_tanh is illegal
    bad = replace(gpu_default(g), fast_tanh=True)
    why = option("fast_tanh").why_not(bad, KernelView.of(g))
    assert why is not None and why.startswith("fast_tanh is impossible")
    assert check_config(bad, g) == why == why_not_options(bad, KernelView.of(g))
    with pytest.raises(AssertionError, match="fast_tanh is impossible"):
        KernelWriter("k", g.placements(), g.numel, g.rnumel, g.is_reduction, set(), {}, {}, bad, True)


def test_defaults_apply_only_what_is_legal():
    h = Heuristics()
    base = h.launch_config("reduction", 4, 1 << 20, False)
    nothing = apply_defaults(h, base, "reduction", 4, 1 << 20, False, False, REFERENCE, {})
    assert nothing == base
    split = apply_defaults(h, base, "reduction", 4, 1 << 20, False, False, REFERENCE, {"split": True})
    assert split.split > 1 and not split.online and not split.cache_hints
    looped = apply_defaults(h, base, "reduction", 4, 1 << 20, False, False, REFERENCE,
                            {"online": True, "cache_hints": True})
    assert looped.online and not looped.cache_hints  # online kernels take no hints by default (measured slower)
    hinted = apply_defaults(h, base, "reduction", 4, 1 << 20, False, False, REFERENCE, {"cache_hints": True})
    assert hinted.cache_hints and not apply_defaults(h, base, "reduction", 4, 1 << 20, True, False, REFERENCE,
                                                     {"cache_hints": True}).cache_hints


@pytest.mark.parametrize("name", ["softmax", "rmsnorm", "col_sum"])
def test_each_offered_option_runs_correctly(name):
    fn, make = CASES[name]
    args = make()
    art = compile_graph(trace_aten(fn, args), args, CompileOptions(strict=True, use_db=False))
    (gi, g), = [(i, g) for i, g in enumerate(art.groups) if g.is_reduction]
    cands = candidate_configs(g, art.plan.kernels[gi].config, interpret=True, limit=400)
    chosen = {}
    for c in cands:  # the first candidate that turns each option on
        for opt in OPTIONS:
            if getattr(c, opt.name) != LaunchConfig.__dataclass_fields__[opt.name].default:
                chosen.setdefault(opt.name, c)
    assert chosen
    for cfg in chosen.values():
        kernels = tuple(replace(kp, config=cfg) if i == gi else kp for i, kp in enumerate(art.plan.kernels))
        plan = replace(art.plan, kernels=kernels)
        compiled = compile_traced(fn, args, CompileOptions(strict=True, use_db=False, poison=True, plan=plan))
        assert_close(compiled(*args)[0], fn(*args))
        assert any(k.config == cfg for k in kernels_of(compiled))


def test_every_flag_has_its_registry_entry_and_feature_column():
    """A config's on/off options are defined once: each has an entry in the option registry (its
    legality, default and moves) and a cost-model column of its own name."""
    from autofuse.codegen.config import FLAGS, LaunchConfig
    from autofuse.codegen.options import OPTIONS
    from costmodel.features import FEATURE_NAMES, kernel_features
    assert set(FLAGS) <= {o.name for o in OPTIONS}
    assert set(FLAGS) <= set(FEATURE_NAMES)
    for flag in FLAGS:
        cfg = LaunchConfig(64, 128, persistent=False, **{flag: True})
        assert flag in str(cfg) and cfg.to_json()[flag] is True and flag not in LaunchConfig(64).to_json()
        rec = {"kind": "reduction", "numel": 1000, "rnumel": 5000, "config": cfg.to_json()}
        assert kernel_features(rec, compile=False)[flag] == 1.0
