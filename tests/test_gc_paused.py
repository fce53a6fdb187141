"""The cyclic collector is paused only inside the work that makes many acyclic objects (issue 47).

Reading a caption file's JSON and compare's input checks, scoring and resampling run with the
collector off (the third of three 40,000-item files read took a tenth of its time in full
collections); after them, on success or error, it is as it was before: on if it was on, off if
the caller had turned it off.
"""

from __future__ import annotations

import gc

import pytest

from capeval.errors import InputError
from capeval.io.nesting import MAX_DEPTH, json_loads
from capeval.significance.compare import compare


@pytest.fixture(params=[True, False])
def collector(request):
    was = gc.isenabled()
    (gc.enable if request.param else gc.disable)()
    yield request.param
    (gc.enable if was else gc.disable)()


def test_json_reading_leaves_the_collector_as_it_was(collector):
    seen = []
    assert json_loads('{"a": [1, 2]}', "x.json", object_pairs_hook=lambda kv: seen.append(gc.isenabled()) or dict(kv)) \
        == {"a": [1, 2]}
    assert seen == [False]  # off while the document is decoded
    assert gc.isenabled() is collector
    with pytest.raises(InputError, match="nested more than"):
        json_loads("[" * (MAX_DEPTH * 100) + "]" * (MAX_DEPTH * 100), "deep.json")
    assert gc.isenabled() is collector


def test_compare_leaves_the_collector_as_it_was(collector):
    refs = {str(i): [f"a cat sat on mat {i}", "the dog ran"] for i in range(6)}
    out = compare({"a": {str(i): "a cat sat" for i in range(6)}, "b": {str(i): "the dog" for i in range(6)}}, refs,
                  "bleu-4", samples=5)
    assert set(out["systems"]) == {"a", "b"}
    assert gc.isenabled() is collector
    with pytest.raises(InputError):
        compare({"a": {"0": "x"}, "b": {"1": "y"}}, refs, "bleu-4")
    assert gc.isenabled() is collector
