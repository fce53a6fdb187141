"""Per-item scores are stored compactly (ItemScores) and still behave as a read-only dict."""

from __future__ import annotations

import gc
import json
import math
import pickle

import pytest

from capeval.result import ItemScores, MetricResult, Signature


def _result(items, metric="m"):
    return MetricResult(metric, 0.5, items, Signature.build(metric))


def test_items_behave_as_the_dict_they_came_from():
    src = {"b": 0.1, "a": 1 / 3, "c": float("nan"), "d": -0.0, "e": 1e-300}
    r = _result(src)
    assert isinstance(r.items, ItemScores)
    assert list(r.items) == ["b", "a", "c", "d", "e"]  # input order
    for k, v in src.items():
        got = r.items[k]
        assert got == v or (math.isnan(got) and math.isnan(v))
        assert math.copysign(1, got) == math.copysign(1, v)  # bit for bit, -0.0 included
    assert dict(r.items).keys() == src.keys() and r.items.get("zz") is None
    with pytest.raises(KeyError):
        r.items["zz"]
    with pytest.raises(TypeError):
        r.items["a"] = 2.0  # read-only
    assert _result({"x": 1.0}).items == {"x": 1.0}
    assert json.loads(r.to_json())["items"]["a"] == src["a"]
    copy = pickle.loads(pickle.dumps(r.items))
    assert list(copy.items())[:2] == list(r.items.items())[:2]


def test_non_float_scores_stay_a_plain_mapping():
    r = _result({"a": 1, "b": 0.5})
    assert not isinstance(r.items, ItemScores) and r.items == {"a": 1, "b": 0.5}
    assert _result({}).items == {}


def test_metrics_of_one_call_share_the_id_index():
    ids = [f"img{i}" for i in range(1000)]
    a = _result(dict(zip(ids, map(float, range(1000)))), "a")
    b = _result(dict(zip(ids, map(float, range(1000, 2000)))), "b")
    assert a.items._index is b.items._index
    assert b.items["img7"] == 1007.0
    other = _result({"img1": 1.0, "img0": 2.0}, "c")  # other ids or order: its own index
    assert other.items._index is not a.items._index and list(other.items) == ["img1", "img0"]
    del a, b, other
    gc.collect()  # the cache holds the index weakly
    from capeval import result

    assert result._LAST_INDEX[0] is None or result._LAST_INDEX[0]() is None or len(result._LAST_INDEX[0]()) == 2


def test_per_item_extras_stay_out_of_the_summary():
    ids = {"a": 0.5, "b": 0.25}
    r = MetricResult("m", 0.375, ids, Signature.build("m"),
                     extras={"precision": {"a": 1.0, "b": 0.5}, "count": 2, "by_cat": {"x": 1.0}})
    summary = r.to_dict(per_item=False)
    assert summary["extras"] == {"count": 2, "by_cat": {"x": 1.0}}
    assert summary["per_item_extras"] == ["precision"]
    assert r.to_dict()["extras"]["precision"] == {"a": 1.0, "b": 0.5}  # with per-item data: everything
    from capeval.result import Report

    assert Report([r]).per_item_extras() == {"m": {"precision": {"a": 1.0, "b": 0.5}}}


def test_item_scores_from_an_array_equal_the_dict_path_bit_for_bit():
    """What the text metrics' merges build (no dict in between) equals what a dict of the
    same floats gives, with the id index shared with the call's other results."""
    import numpy as np

    from capeval.result import item_scores

    rng = np.random.default_rng(3)
    values = np.concatenate([rng.standard_normal(500), [np.nan, -0.0, 0.0, np.inf, -np.inf, 5e-324, 1e308]])
    ids = [f"i{k}" for k in range(len(values))]
    fast = _result(item_scores(ids, values), "a")
    slow = _result(dict(zip(ids, values.tolist())), "b")
    assert isinstance(fast.items, ItemScores) and list(fast.items) == ids
    assert [struct_bits(x) for x in fast.items.values()] == [struct_bits(x) for x in slow.items.values()]
    assert fast.items._index is slow.items._index  # one index for the call's metrics
    strided = np.stack([values, values[::-1]], axis=1)[:, 1]  # a column: not contiguous
    assert [struct_bits(x) for x in item_scores(ids, strided).values()] == [struct_bits(x) for x in values[::-1]]
    assert dict(item_scores([], np.zeros(0))) == {}
    with pytest.raises(ValueError, match="2 ids but 3 scores"):
        item_scores(["a", "b"], np.zeros(3))


def struct_bits(x: float) -> bytes:
    import struct

    return struct.pack("<d", x)
