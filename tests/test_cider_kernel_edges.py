"""Edge cases of the compiled CIDEr-D resampling kernels (issue 47 item 2): blocks with no
squares of counts other than 1 and no rare entries, references that are all empty, a single
item, every n-gram in every reference (all weights 0) -- each compared, bit for bit, with the
former implementation (``benchmarks/_compare_before.py``, a full rescoring per resample) and
with the numpy kernel."""

from __future__ import annotations

import pytest

from capeval.significance import cider_resample
from capeval.significance.compare import compare

from _reference import require_module
from test_compare_fast import _assert_same, _quiet, before

CASES = {
    "references all empty": ({"a": {"0": "a dog", "1": "two cats"}, "b": {"0": "", "1": "a cat"}},
                             {"0": [".", "!"], "1": ["?"]}),
    "every count 1": ({"a": {str(i): f"a dog number {i}" for i in range(6)},
                       "b": {str(i): f"the cat {i} sits" for i in range(6)}},
                      {str(i): [f"a dog {i} sits", "the cat", f"number {i}"] for i in range(6)}),
    "one item": ({"a": {"x": "a dog runs"}, "b": {"x": "a dog"}}, {"x": ["a dog runs fast", "dogs"]}),
    "all weights 0": ({"a": {str(i): "a dog" for i in range(4)}, "b": {str(i): "" for i in range(4)}},
                      {str(i): ["a cat", "a dog ."] for i in range(4)}),
    "counts above 1 only": ({"a": {"0": "dog dog dog", "1": "cat cat"}, "b": {"0": "dog", "1": "cat cat cat"}},
                            {"0": ["dog dog", "dog dog dog dog"], "1": ["cat cat cat"]}),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("kernel", ["numpy", "compiled"])
def test_edge_cases_equal_the_former_rescoring(monkeypatch, case, kernel):
    if kernel == "compiled":
        require_module("numba", "numba compiles the resampling kernels (the fast extra)")
    monkeypatch.setattr(cider_resample, "JIT_MIN_WORK", 0 if kernel == "compiled" else 1 << 62)
    systems, refs = CASES[case]
    _assert_same(_quiet(before.compare, systems, refs, "cider-d", samples=70, seed=5),
                 _quiet(compare, systems, refs, "cider-d", samples=70, seed=5))
