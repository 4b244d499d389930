"""Kernel categories: which kind of program a measured kernel comes from, read off its recorded features.

Leave-one-category-out evaluation (`train.leave_one_category_out`) trains without one category and
scores on it, to judge the model on programs unlike its training data. A category is derived from
the feature record alone (kind, config, the ATen ops of the kernel's nodes, its source, numel and
rnumel), so any export can be categorised without the program that made it.

Note: the first rule that matches wins, in the order of `CATEGORIES`:
- scan: a scan kernel (`kind` "scan", or `tl.associative_scan` in the kernel body);
- arg_reduction: an argmax/argmin (the op among its nodes, or its combine function in the body);
- loss: a reduction to one value (numel 1), as losses and global sums are;
- split_reduction: a reduction launched split over many programs (config `split` > 1);
- outer_reduction: a reduction over a non-contiguous axis (config `YBLOCK`, or every load that moves
  along the reduction strided);
- softmax: an online-softmax config, or a max and a sum reduction with exp, or logsumexp;
- norm: mean/var/var_mean (or a sum) with rsqrt (layer, RMS and group norms);
- row_reduction: any other reduction;
- pointwise: the rest.
A kernel's configs all belong to one category (`group_categories`): the first of its configs'
categories in that order, so a kernel offered split configs is a split reduction in every config.
"""
from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

from .source_ops import count_ops, kernel_body_source

CATEGORIES = ("scan", "arg_reduction", "loss", "split_reduction", "outer_reduction", "softmax", "norm",
              "row_reduction", "pointwise")

_SUFFIX = re.compile(r"(?:_\d+)?(?:\.\d+)?$")
_REDUCTION_KINDS = frozenset({"reduction", "scan"})
_EXP = re.compile(r"\bexp2?\(")


def base_op(node_name: str) -> str:
    """The ATen op of an FX node name: `sum_1` and `sum_1.1` are `sum`, `var_mean.2` is `var_mean`."""
    return _SUFFIX.sub("", str(node_name)) or str(node_name)


def _body(features: Mapping[str, Any]) -> str:
    try:
        return kernel_body_source(str(features["source"]), str(features.get("kernel_fn") or "KERNEL"))
    except (KeyError, TypeError, ValueError, SyntaxError):
        return ""


def _counts(features: Mapping[str, Any]) -> dict[str, int]:
    try:
        return count_ops(str(features["source"]), str(features.get("kernel_fn") or "KERNEL")).as_dict()
    except (KeyError, TypeError, ValueError, SyntaxError):
        return {}


def category_of(features: Mapping[str, Any]) -> str:
    """The category (one of `CATEGORIES`) of one kernel measurement's feature record (module note).

    Ops are read from the node names where the record has them, else from the kernel body (its
    reductions' combine functions and its calls)."""
    kind = str(features.get("kind"))
    cfg = features.get("config") or {}
    ops = {base_op(n) for n in features.get("nodes") or ()}
    body = _body(features)
    if kind == "scan" or "associative_scan" in body:
        return "scan"
    if kind not in _REDUCTION_KINDS:
        return "pointwise"
    c = _counts(features)
    if ops & {"argmax", "argmin"} or c.get("red_arg", 0) > 0:
        return "arg_reduction"
    if features.get("numel") == 1:
        return "loss"
    if int(cfg.get("split") or 1) > 1:
        return "split_reduction"
    if "YBLOCK" in cfg or (c.get("strided_accesses", 0) > 0 and c.get("contig_accesses", 0) == 0):
        return "outer_reduction"
    sums, maxes = "sum" in ops or c.get("red_sum", 0) > 0, ops & {"amax", "max"} or c.get("red_max", 0) > 0
    if cfg.get("online") or "logsumexp" in ops or (maxes and sums and ("exp" in ops or _EXP.search(body))):
        return "softmax"
    if (ops & {"mean", "var", "var_mean"} or sums) and ("rsqrt" in ops or "rsqrt(" in body):
        return "norm"
    return "row_reduction"


def group_categories(records: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Each kernel group's category (key: the feature record's `group`): the first, in `CATEGORIES`
    order, among its records' categories. Records are feature records or measurements holding one."""
    rank = {c: i for i, c in enumerate(CATEGORIES)}
    out: dict[str, str] = {}
    for r in records:
        f = r.get("features", r) if isinstance(r.get("features"), Mapping) else r
        g, c = str(f.get("group")), category_of(f)
        if g not in out or rank[c] < rank[out[g]]:
            out[g] = c
    return out
