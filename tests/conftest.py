import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def pytest_addoption(parser):
    parser.addoption("--device", default="cpu", help="device the compiled kernels run on: cpu (Triton interpreter) or cuda")
    parser.addoption("--graphs", type=int, default=200, help="random graphs per differential test run")


def pytest_configure(config):
    import tempfile
    # never touch the user's tuning DB from tests
    os.environ.setdefault("AUTOFUSE_DB", os.path.join(tempfile.mkdtemp(prefix="autofuse-test-db-"), "tuning.db"))
    # tests compile with the rules' configs (each compile measuring candidates would multiply a GPU
    # run's time); tests/test_autotune.py turns the compile-time autotune on where it tests it
    os.environ.setdefault("AUTOFUSE_AUTOTUNE", "0")
    from tests import helpers
    helpers.DEFAULT_DEVICE = config.getoption("--device")


@pytest.fixture
def device(request):
    d = request.config.getoption("--device")
    if d == "cuda":
        import torch
        if not torch.cuda.is_available():
            pytest.skip("no CUDA device")
    return d


def pytest_collection_modifyitems(config, items):
    if config.getoption("--device") != "cuda":
        skip = pytest.mark.skip(reason="needs --device cuda")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)


@pytest.fixture(autouse=True)
def _seeded():
    """Every test draws its random inputs from the same seed, whatever ran before it (in this
    process or on another xdist worker): a result never depends on the order tests ran in."""
    import torch
    torch.manual_seed(0)
    yield
