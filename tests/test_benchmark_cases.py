"""Every benchmark case compiles and matches eager (tiny row counts, same row lengths)."""
import pytest

from benchmarks.cases import CASES
from tests.helpers import DEFAULT_DEVICE, compile_and_compare


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case_matches_eager(case):
    fn, args = case.build(DEFAULT_DEVICE, 0.0005)
    compile_and_compare(fn, args, check_stride=True)
