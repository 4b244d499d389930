"""Repeated layers share structural classes, and a trial fuses every copy of a layer alike."""
from __future__ import annotations

import re
import warnings

import optuna
import torch

from autofuse.plan.repeats import class_of, structural_classes
from autofuse.schedule.heuristics import Heuristics
from autofuse.search.study import SpaceCache
from autofuse.search.tune import capture
from tests.helpers import rand


def _layers(x, *ws):
    for w in ws:
        h = x @ w
        c = h - h.mean(-1, keepdim=True)
        x = torch.relu(c) * 0.5 + torch.sin(h) * c.pow(2).sum(-1, keepdim=True) - x
    return x


def _graph():
    args = (rand((37, 24)),) + tuple(rand((24, 24)) for _ in range(7))
    (_, gm, gargs), = capture(_layers, args)
    return gm, gargs


def _base(name: str) -> tuple[str, int]:
    m = re.fullmatch(r"(.*?)(?:_(\d+))?", name)
    return m.group(1), int(m.group(2) or 0)


def test_layers_share_classes_where_their_producers_agree():
    """Layers 3 and 4 agree three producers deep; layer 2 sees layer 1's input (a placeholder)."""
    gm, _ = _graph()
    cls = structural_classes(gm)
    ops = [n.name for n in gm.graph.nodes if n.op == "call_function"]
    by_layer = {}
    for name in ops:
        base, k = _base(name)
        by_layer.setdefault(base, {})[k] = cls[name]
    assert by_layer["relu"][2] == by_layer["relu"][3]
    assert by_layer["sin"][2] == by_layer["sin"][3]
    assert by_layer["relu"][2] != by_layer["sin"][2]
    assert by_layer["relu"][0] != by_layer["relu"][3]
    assert len(set(cls[n] for n in ops)) < len(ops)


def test_trials_fuse_every_copy_of_a_layer_alike():
    gm, args = _graph()
    spaces = SpaceCache(gm, args, Heuristics())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=0, n_startup_trials=4,
                                                                       multivariate=True, group=True))
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    shapes = set()
    for t in range(12):
        trial = study.ask()
        plan = spaces.suggest(trial)
        sites = len(spaces.choices) + len(spaces.space({n: trial.params[spaces.realize_param(n)]
                                                          for n in spaces.choices}).legal)
        assert len(trial.params) < sites
        kernel_classes = {}   # node -> the classes of its kernel's nodes
        for kern in plan.kernels:
            key = tuple(sorted(class_of(n, spaces.classes) for n in kern.nodes))
            kernel_classes.update({n: key for n in kern.nodes})
        # the last two layers (names as FX gives them: `sum` is taken, so the sums count from 1)
        assert kernel_classes["mean_3"] == kernel_classes["mean_4"], (t, plan.kernels)
        assert kernel_classes["sum_4"] == kernel_classes["sum_5"], (t, plan.kernels)
        shapes.add((kernel_classes["mean_3"], kernel_classes["sum_4"]))
        study.tell(trial, float(len(plan.kernels) + t * 1e-3))
    assert len(shapes) > 1   # the search does try different fusions of the layer
