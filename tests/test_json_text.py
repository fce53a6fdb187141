"""The fast indented JSON writer against the standard library's, on random trees."""

import json
import math
import random

import numpy as np

from capeval.io.json_text import dumps_indented

_ODD_TEXT = ["", "a", "é", "\u2028", '"q"', "back\\slash", "\x00\x1f", "tab\tnew\nline", "😀", "1000268201_693b.jpg#0"]


def _scalar(rng: random.Random):
    kind = rng.randrange(9)
    if kind == 0:
        return rng.choice([math.nan, math.inf, -math.inf, -0.0, 0.0, 1e-300, 1e300, 5e-324])
    if kind == 1:
        return rng.choice([None, True, False])
    if kind == 2:
        return rng.choice([0, -1, 2**70, -(2**63)])
    if kind == 3:
        return rng.choice(_ODD_TEXT)
    if kind == 4:
        return np.float64(rng.random())
    return rng.random() * 10 ** rng.randint(-20, 20)


def _tree(rng: random.Random, depth: int):
    out = {}
    for _ in range(rng.randrange(5)):
        key = rng.choice(_ODD_TEXT) + str(rng.randrange(50))
        out[key] = _tree(rng, depth - 1) if depth and rng.random() < 0.4 else _scalar(rng)
    return out


def test_random_trees_are_written_as_json_dumps_writes_them():
    rng = random.Random(7)
    for _ in range(3000):
        obj = _tree(rng, rng.randrange(4))
        assert dumps_indented(obj) == json.dumps(obj, indent=2, ensure_ascii=False)


def test_what_the_fast_path_does_not_take_falls_back_to_the_same_text():
    for obj in ({"a": [1, 2.5]}, {"a": {"b": (1,)}}, {1: {"x": 1.0}}, {"m": {None: 0.5}}, [1, {"a": 2}], 3.5, "x", {}):
        assert dumps_indented(obj) == json.dumps(obj, indent=2, ensure_ascii=False)


def test_a_score_table_with_an_empty_metric_and_nan():
    table = {"bleu-1": {f"img{k}.jpg#{k % 5}": k / 7 for k in range(1000)}, "meteor": {}, "cider-d": {"x": math.nan}}
    assert dumps_indented(table) == json.dumps(table, indent=2, ensure_ascii=False)
