"""Bad input gets a clear error naming the item, never a silent drop."""

from __future__ import annotations

import pytest

import capeval
from capeval.errors import InputError, UnknownNameError


def test_ids_on_one_side_only():
    with pytest.raises(InputError, match=r"'b'") as exc:
        capeval.score({"a": "x y", "b": "y z"}, {"a": ["x y"]}, metrics="bleu-1")
    assert "no references" in str(exc.value)
    with pytest.raises(InputError, match="no candidate"):
        capeval.score({"a": "x y"}, {"a": ["x y"], "c": ["z"]}, metrics="bleu-1")


@pytest.mark.parametrize(
    "cands,refs,pattern",
    [
        ({"a": 3}, {"a": ["x"]}, "candidate 'a': caption must be a string"),
        ({"a": None}, {"a": ["x"]}, "candidate 'a'"),
        ({"a": ["x", "y"]}, {"a": ["x"]}, "expected one caption"),
        ({"a": "x"}, {"a": []}, "item 'a' has an empty reference list"),
        ({"a": "x"}, {"a": ["ok", 5]}, "reference #1 of item 'a'"),
        ({"a": "x"}, {"a": ["ok", "  "]}, "reference #1 of item 'a' is empty"),
        ({}, {}, "no candidates"),
    ],
)
def test_bad_values(cands, refs, pattern):
    with pytest.raises(InputError, match=pattern):
        capeval.score(cands, refs, metrics="rouge-l")


def test_unknown_metric_lists_known_ones():
    with pytest.raises(UnknownNameError, match="unknown metric 'blue-4'.*bleu-4"):
        capeval.score({"a": "x"}, {"a": ["x"]}, metrics="blue-4")


def test_ids_are_strings_and_lists_of_candidates_work():
    rep = capeval.score(["a dog", "a cat"], {0: ["a dog"], 1: ["a cat"]}, metrics="bleu-1")
    assert list(rep["bleu-1"].items) == ["0", "1"]


def test_import_is_light():
    import subprocess
    import sys

    code = "import capeval, sys; capeval.list_metrics(); print('torch' in sys.modules, 'scipy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False False"


def test_missing_heavy_dependency_names_the_extra():
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import capeval\n"
        "try:\n    capeval.load('clip-s')\nexcept capeval.MissingDependencyError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.startswith("torch is not installed (needed for clip-s)")
    assert 'pip install ".[clip]"' in out
