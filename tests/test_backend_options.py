"""torch.compile(m, backend="autofuse", options={...}): a plain dict configures the compile."""
from __future__ import annotations

import pytest
import torch

import autofuse  # noqa: F401  (registers the backend)
from autofuse import CompileOptions

from .helpers import rand


def test_options_dict_through_torch_compile():
    torch._dynamo.reset()
    fn = torch.compile(lambda x: torch.relu(x) * 2.0 + x.sum(0), backend="autofuse",
                       options={"strategy": "none", "use_db": False, "strict": True,
                                "heuristics": {"conv_layout": "as_given"}})
    x = rand((5, 7))
    torch.testing.assert_close(fn(x), torch.relu(x) * 2.0 + x.sum(0))


def test_unknown_option_is_one_clear_error():
    with pytest.raises(ValueError, match="unknown autofuse option.*'stratgy'"):
        CompileOptions.from_dict({"stratgy": "none"})
    assert CompileOptions.from_dict({"strict": True}).strict
