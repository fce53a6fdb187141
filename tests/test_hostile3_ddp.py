"""Issue 46, item 7 and part of item 8: ``CaptionScore`` under DDP never kills the job, and ids
and captions given as input are one line or one warning, never a traceback or a silent change.

- 2 gloo processes (CPU) run every DDP case in one launch: a rank without items (gloo used to
  abort, SIGABRT), ids on some ranks only, ranks built with other metrics or options (one
  ``InputError`` with the same text on every rank, and the group still usable after it),
  ``set_dtype(torch.float16)``, a lone surrogate; each result equals ``capeval.score`` on the
  union of the ranks' items.
- ``set_dtype`` keeps the caption and id states' dtypes (ids whose hashes differ in low bits).
- ``update()``'s bad arguments (``references=None``, non-string captions, list ids, ...): one line.
- ids like ``²`` (``isdigit()`` but not ``int()``), list/null/bool ids from files and from the
  API, an empty candidate (scored as pycocoevalcap does, with one warning naming it), through
  the CLI and ``capeval.score``.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchmetrics")

import capeval  # noqa: E402
from capeval.errors import InputError  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
_PATHS = os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")])
METRICS = "bleu-4,cider-d,rouge-l"
LOW_BITS = 2**60  # ids 2**60 + k: float64 keeps 53 bits (k lost), float16 overflows

LAUNCH = r'''
import datetime, json, sys
from pathlib import Path
import torch
import torch.distributed as dist
# a hang is a failure after a minute, not a stuck test
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
rank = dist.get_rank()
root = Path(sys.argv[1])
cases = json.loads((root / "cases.json").read_text())
from capeval.errors import InputError
from capeval.torchmetrics import CaptionScore

out = {}
for name, case in cases.items():
    spec = case["ranks"][rank]
    try:
        metric = CaptionScore(spec.get("metrics", case.get("metrics")), options=spec.get("options"))
        if case.get("dtype"):
            metric.set_dtype(getattr(torch, case["dtype"]))
        for batch in spec["batches"]:
            if batch.get("bad"):  # a refused update: this rank's error, the metric unchanged
                try:
                    metric.update(batch["candidates"], batch.get("references"), ids=batch.get("ids"))
                except InputError as exc:
                    out.setdefault(name + "/refused", []).append(str(exc))
                continue
            metric.update(batch["candidates"], batch["references"], ids=batch.get("ids"))
        out[name] = {"ok": {k: float(v) for k, v in metric.compute().items()}}
    except InputError as exc:
        out[name] = {"error": str(exc)}
(root / f"rank{rank}.json").write_text(json.dumps(out))
dist.destroy_process_group()
'''

ITEMS = [
    ("a man rides a red bike", ["a man riding a bike", "a person on a red bicycle"]),
    ("a dog runs in the park", ["a dog running on grass", "a brown dog plays in a park"]),
    ("two cats sit on a sofa", ["two cats on a couch"]),
    ("a woman holds an umbrella", ["a woman with an umbrella in the rain", "a lady holding an umbrella"]),
    ("a plate of food", ["a plate with rice and vegetables"]),
    ("children play football", ["kids playing soccer on a field", "a group of children with a ball"]),
    ("a bus on the street \ud800", ["a red bus driving down a street"]),  # a lone surrogate
]


def _batch(indices: list[int], ids: list | None = None) -> dict:
    return {"candidates": [ITEMS[i][0] for i in indices], "references": [ITEMS[i][1] for i in indices],
            **({"ids": ids} if ids is not None else {})}


def _want(indices: list[int], metrics: str = METRICS, options: dict | None = None) -> dict[str, float]:
    report = capeval.score({str(k): ITEMS[i][0] for k, i in enumerate(indices)},
                           {str(k): ITEMS[i][1] for k, i in enumerate(indices)}, metrics, options=options)
    return {m: report[m].system for m in report.scores}


CASES = {
    # mismatches first: after each, the process group must still work for the next case
    "ids_on_one_rank": {"metrics": METRICS, "ranks": [{"batches": [_batch([0, 1], ids=[0, 1])]},
                                                      {"batches": [_batch([2, 3])]}]},
    "other_metrics": {"ranks": [{"metrics": "bleu-4", "batches": [_batch([0])]},
                                {"metrics": "cider-d", "batches": [_batch([1])]}]},
    "other_options": {"metrics": "cider-d", "ranks": [
        {"options": {"cider-d": {"sigma": 6.0}}, "batches": [_batch([0])]},
        {"options": {"cider-d": {"sigma": 5.0}}, "batches": [_batch([1])]}]},
    "ids_then_none": {"metrics": METRICS, "ranks": [{"batches": [_batch([0], ids=[0]), {**_batch([1]), "bad": 1}]},
                                                    {"batches": [_batch([2], ids=[2])]}]},
    # empty ranks: compute() is capeval.score on the union
    "empty_rank1_ids": {"metrics": METRICS, "ranks": [{"batches": [_batch([0, 1, 2], ids=[0, 1, 2]),
                                                                   _batch([3, 4], ids=[3, 4])]},
                                                      {"batches": []}]},
    "empty_rank0_no_ids": {"metrics": METRICS, "ranks": [{"batches": []}, {"batches": [_batch([0, 1, 2, 3])]}]},
    "both_empty": {"metrics": METRICS, "ranks": [{"batches": []}, {"batches": []}]},
    # bad updates refused on one rank (one line), the rest scored
    "bad_updates": {"metrics": METRICS, "ranks": [
        {"batches": [{"candidates": ["a dog"], "references": None, "bad": 1},
                     {"candidates": [5], "references": [["a dog"]], "bad": 1},
                     {"candidates": ["a dog"], "references": [["a dog"]], "ids": [[1, 2]], "bad": 1},
                     _batch([0, 1], ids=[0, 1])]},
        {"batches": [{"candidates": ["a dog"], "references": [[]], "ids": [9], "bad": 1}, _batch([2, 3], ids=[2, 3])]}]},
    # float16 states: ids whose hashes differ in low bits, string ids, a padded duplicate
    "float16_ids": {"metrics": METRICS, "dtype": "float16", "ranks": [
        {"batches": [_batch([0, 1], ids=[LOW_BITS, LOW_BITS + 1]), _batch([2], ids=["img-2"])]},
        {"batches": [_batch([3, 4], ids=[LOW_BITS + 2, LOW_BITS + 3]), _batch([0], ids=[LOW_BITS])]}]},
    "float64_ids": {"metrics": METRICS, "dtype": "float64", "ranks": [
        {"batches": [_batch([0, 1], ids=[LOW_BITS, LOW_BITS + 1])]},
        {"batches": [_batch([2], ids=[LOW_BITS + 2])]}]},
    "lone_surrogate": {"metrics": METRICS, "ranks": [{"batches": [_batch([6, 0])]}, {"batches": [_batch([1])]}]},
}


@pytest.fixture(scope="module")
def ranks(tmp_path_factory) -> list[dict]:
    root = tmp_path_factory.mktemp("ddp")
    (root / "cases.json").write_text(json.dumps(CASES))
    (root / "launch.py").write_text(LAUNCH)
    env = {**os.environ, "PYTHONPATH": _PATHS, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                           str(root / "launch.py"), str(root)], env=env, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]  # SIGABRT before the fix
    return [json.loads((root / f"rank{r}.json").read_text()) for r in (0, 1)]


@pytest.mark.parametrize("case, fragments", [
    ("ids_on_one_rank", ["ids were given on rank 0 but not on rank 1"]),
    ("other_metrics", ["rank 0 and rank 1 were built with different metrics or options", "bleu-4", "cider-d"]),
    ("other_options", ["different metrics or options", '"sigma":6.0', '"sigma":5.0']),
])
def test_a_mismatch_between_ranks_is_one_input_error_on_every_rank(ranks, case, fragments):
    messages = [r[case].get("error") for r in ranks]
    assert messages[0] is not None and messages[0] == messages[1], messages  # the same line everywhere
    for f in fragments:
        assert f in messages[0], messages[0]


def test_ids_in_some_updates_of_a_rank_are_refused_at_the_update(ranks):
    refused = ranks[0]["ids_then_none/refused"]
    assert len(refused) == 1 and "ids not given in this update but given in an earlier one" in refused[0]
    want = _want([0, 2])  # the refused batch left nothing behind
    assert all(r["ids_then_none"]["ok"] == want for r in ranks)


@pytest.mark.parametrize("case, indices", [
    ("empty_rank1_ids", [0, 1, 2, 3, 4]),
    ("empty_rank0_no_ids", [0, 1, 2, 3]),
    ("bad_updates", [0, 1, 2, 3]),
    ("float16_ids", None),  # in id order (the string id's by its hash): computed below
    ("float64_ids", [0, 1, 2]),
    ("lone_surrogate", [6, 0, 1]),
])
def test_every_rank_computes_capeval_score_on_the_union(ranks, case, indices):
    if indices is None:
        from capeval.torchmetrics import hash_id

        keyed = sorted([(LOW_BITS, 0), (LOW_BITS + 1, 1), (hash_id("img-2"), 2), (LOW_BITS + 2, 3),
                        (LOW_BITS + 3, 4)])
        indices = [i for _, i in keyed]
    want = _want(indices)
    for got in ranks:
        assert got[case] == {"ok": want}, (case, got[case])
    assert want["cider-d"] > 0


def test_no_item_anywhere_is_nan_on_every_rank_not_an_abort(ranks):
    for got in ranks:
        assert set(got["both_empty"]["ok"]) == set(METRICS.split(","))
        assert all(math.isnan(v) for v in got["both_empty"]["ok"].values())


def test_bad_updates_on_a_rank_are_one_line_each(ranks):
    assert [m.split(":")[1].strip() for m in ranks[0]["bad_updates/refused"]] == [
        "references must be a list with one entry per item, got None",
        "item 0 of the batch", "id of item 0 of the batch must be an int or a string, got list ([1, 2])"]
    assert ranks[1]["bad_updates/refused"] == ["CaptionScore.update: item 0 of the batch (id 9): the reference list "
                                               "is empty"]


# -- one process ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64"])
def test_set_dtype_keeps_the_caption_and_id_states(dtype):
    from capeval.torchmetrics import CaptionScore

    metric = CaptionScore(METRICS)
    metric.set_dtype(getattr(torch, dtype))  # before and between updates
    metric.update([ITEMS[0][0], ITEMS[1][0]], [ITEMS[0][1], ITEMS[1][1]], ids=[LOW_BITS, LOW_BITS + 1])
    metric.set_dtype(getattr(torch, dtype))
    metric.update([ITEMS[2][0], ITEMS[0][0]], [ITEMS[2][1], ITEMS[0][1]], ids=[LOW_BITS + 2, LOW_BITS])  # a duplicate
    metric.to("cpu")
    assert {t.dtype for t in metric.cand_bytes} == {torch.uint8}
    assert {t.dtype for t in metric.ids} == {torch.int64}
    got = {k: float(v) for k, v in metric.compute().items()}
    assert got == _want([0, 1, 2])  # "id ... was given twice" with float16 / float64 states before


@pytest.mark.parametrize("args, fragment", [
    ((["a dog"], None), "references must be a list with one entry per item, got None"),
    ((None, [["a dog"]]), "candidates must be a list with one entry per item, got None"),
    (("a dog", [["a dog"]]), "candidates must be a list with one entry per item, got str"),
    ((["a dog"], [None]), "item 0 of the batch: the references must be a list of strings, got NoneType"),
    ((["a dog"], ["a dog"]), "item 0 of the batch: the references must be a list of strings, got str"),
    ((["a dog"], [[]]), "item 0 of the batch: the reference list is empty"),
    ((["a dog"], [["a cat", " "]]), "item 0 of the batch: reference #1 is empty"),
    ((["a dog"], [["a cat", 3]]), "reference #1 must be a string, got int"),
    (([b"a dog"], [["a dog"]]), "the candidate must be a string, got bytes"),
    (([None], [["a dog"]], ["x7"]), "item 0 of the batch (id 'x7'): the candidate must be a string, got NoneType"),
    ((["a dog"], [["a dog"]], [[1, 2]]), "id of item 0 of the batch must be an int or a string, got list"),
    ((["a dog"], [["a dog"]], [None]), "got NoneType"),
    ((["a dog"], [["a dog"]], [1.5]), "got float"),
    ((["a dog"], [["a dog"]], [True]), "got bool"),
    ((["a dog"], [["a dog"]], "ab"), "ids must be a list with one entry per item, got str"),
    ((["a dog"], [["a dog"]], [1, 2]), "1 candidates, 1 reference lists, 2 ids"),
])
def test_bad_update_arguments_are_one_line(args, fragment):
    from capeval.torchmetrics import CaptionScore

    metric = CaptionScore("bleu-4")
    with pytest.raises(InputError) as info:
        metric.update(args[0], args[1], ids=args[2] if len(args) > 2 else None)
    assert fragment in str(info.value) and "\n" not in str(info.value)
    assert metric.cand_lens == [] and metric.ids == []  # nothing kept from a refused batch


def test_ids_given_in_some_updates_only_are_refused_at_once():
    from capeval.torchmetrics import CaptionScore

    metric = CaptionScore("bleu-4")
    metric.update(["a dog"], [["a dog runs"]])
    with pytest.raises(InputError, match="ids given in this update but not in an earlier one"):
        metric.update(["a cat"], [["a cat sits"]], ids=[1])
    metric.update([], [], ids=[])  # an empty batch says nothing either way
    tensor_ids = CaptionScore("bleu-4")
    tensor_ids.update(["a dog", "a cat"], [["a dog runs"], ["a cat sits"]], ids=torch.tensor([LOW_BITS, LOW_BITS + 1]))
    assert tensor_ids.ids[0].tolist() == [LOW_BITS, LOW_BITS + 1]
    with pytest.raises(InputError, match="must be an int or a string, got list"):
        tensor_ids.update(["a dog"], [["a dog runs"]], ids=torch.tensor([[1]]))


# -- ids and captions through the CLI and capeval.score ------------------------------------------


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": _PATHS, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1",
           "CAPEVAL_CACHE": str(tmp_path / "cache")}
    return subprocess.run([sys.executable, "-m", "capeval.cli", *args], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=300)


def _one_error_line(proc: subprocess.CompletedProcess, *fragments: str) -> str:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    errors = [line for line in proc.stderr.splitlines() if line.startswith("capeval: error: ")]
    assert len(errors) == 1, proc.stderr
    for f in fragments:
        assert f in errors[0], errors[0]
    return errors[0]


def _write(path: Path, data) -> str:
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("candidate_id", ["²", "١"])  # isdigit(): int() refuses "²", reads "١" as 1
def test_a_unicode_digit_id_is_not_an_image_number(tmp_path, candidate_id):
    sys.path.insert(0, str(ROOT / "tests"))
    from test_foil_chair import write_fixture

    coco = write_fixture(tmp_path)
    cands = _write(tmp_path / "c.json", {candidate_id: "a cat on a couch"})
    proc = _cli(tmp_path, "score", "-m", "chair", "-c", cands, "-O", f"chair.annotations={coco}")
    _one_error_line(proc, f"candidate '{candidate_id}': not a COCO 2014 image id or file name")

    from capeval.metrics.amber.annotations import AmberData

    amber = AmberData(entries=({"id": 1},), association={}, vocabulary=frozenset(), safe_words=(), digest="")
    for bad in (candidate_id, f"AMBER_{candidate_id}.jpg"):
        with pytest.raises(InputError, match="not an AMBER id"):
            amber.entry(bad)
    assert amber.entry("AMBER_1.jpg")[0] == 1


@pytest.mark.parametrize("bad_id, shown", [([1, 2], "list ([1, 2])"), ({"a": 1}, "dict"), (None, "NoneType (None)"),
                                           (True, "bool (True)")])
def test_an_id_that_is_not_a_string_or_a_number_is_one_line(tmp_path, bad_id, shown):
    refs = _write(tmp_path / "r.json", {"1": ["a dog runs"], "[1, 2]": ["a cat"]})
    records = [{"image_id": 1, "caption": "a dog"}, {"image_id": bad_id, "caption": "a cat"}]
    listed = _write(tmp_path / "c.json", records)
    _one_error_line(_cli(tmp_path, "score", "-m", "bleu-4", "-c", listed, "-r", refs),
                    "c.json, record 2: an id must be a string or a number, got " + shown)
    lines = _write(tmp_path / "c.jsonl", "".join(json.dumps(r) + "\n" for r in records))
    _one_error_line(_cli(tmp_path, "score", "-m", "bleu-4", "-c", lines, "-r", refs),
                    "c.jsonl, line 2: an id must be a string or a number")
    table = _write(tmp_path / "items.jsonl", "".join(json.dumps({"id": r["image_id"], "candidate": r["caption"],
                                                                  "references": ["a dog runs"]}) + "\n"
                                                      for r in records))
    if bad_id is not None:  # an item table's null id is "no id" (a message of its own)
        _one_error_line(_cli(tmp_path, "score", "-m", "bleu-4", "--items", table),
                        "items.jsonl, row 2: an id must be a string or a number")
        with pytest.raises(InputError, match="row 2: an id must be a string or a number"):
            capeval.score(items=table, metrics="bleu-4")


def test_api_ids_that_are_not_strings_or_numbers_are_refused():
    for key in [(1, 2), None, True, frozenset({1}), b"x"]:
        with pytest.raises(InputError, match="candidates: an id must be a string or a number"):
            capeval.score({key: "a dog"}, {key: ["a dog runs"]}, "bleu-1")
    with pytest.raises(InputError, match="references: an id must be a string or a number"):
        capeval.score({"(1, 2)": "a dog"}, {(1, 2): ["a dog runs"]}, "bleu-1")
    # numbers, numpy scalars and 0-d tensors are their value as text
    report = capeval.score({7: "a dog", torch.tensor(8): "a cat"}, {"7": ["a dog runs"], "8": ["a cat sits"]}, "bleu-1")
    assert list(report["bleu-1"].items) == ["7", "8"]


def test_an_empty_candidate_is_scored_as_pycocoevalcap_does_with_one_warning(tmp_path):
    cands, refs = {"1": "", "2": "a cat sits on a mat", "3": "   "}, {k: ["a cat sits on the mat"] for k in "123"}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = capeval.score(cands, refs, "bleu-4,cider-d,rouge-l,meteor")
    said = [str(w.message) for w in caught if "empty candidate" in str(w.message)]
    assert said == ["2 empty candidate captions ('1', '3') scored as the empty sentence, as the reference "
                    "implementations do (0 for BLEU, METEOR, ROUGE-L, CIDEr-D and SPICE)"]
    assert all(report[m].items["1"] == 0.0 and report[m].items["3"] == 0.0 for m in report.scores)
    expected = ("capeval: warning: 2 empty candidate captions ('1', '3') scored as the empty sentence")
    refs_path = _write(tmp_path / "r.json", refs)
    for path in (_write(tmp_path / "c.json", cands),  # read whole
                 _write(tmp_path / "c.jsonl", "".join(json.dumps({"image_id": k, "caption": v}) + "\n"
                                                      for k, v in cands.items())),  # streamed
                 ):
        refs_arg = refs_path if path.endswith(".json") else _write(
            tmp_path / "r.jsonl", "".join(json.dumps({"image_id": k, "references": v}) + "\n" for k, v in refs.items()))
        proc = _cli(tmp_path, "score", "-m", "bleu-4,cider-d", "-c", path, "-r", refs_arg)
        assert proc.returncode == 0, proc.stderr
        warned = [line for line in proc.stderr.splitlines() if line.startswith("capeval: warning:")]
        assert len(warned) == 1 and warned[0].startswith(expected), proc.stderr
        assert json.loads(proc.stdout)["scores"] == {m: report[m].system for m in ("bleu-4", "cider-d")}
    table = _write(tmp_path / "items.jsonl", "".join(json.dumps({"id": k, "candidate": v, "references": refs[k]}) + "\n"
                                                      for k, v in cands.items()))
    proc = _cli(tmp_path, "score", "-m", "bleu-4", "--items", table)
    assert proc.returncode == 0 and sum(line.startswith(expected) for line in proc.stderr.splitlines()) == 1


def test_the_scst_reward_scores_empty_samples_without_a_warning_per_step():
    from capeval import Reward

    reward = Reward({"cider-d": 1.0, "bleu-4": 1.0})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):  # three training steps, each with an empty sample
            values = reward.scores(["a dog runs", ""], [["a dog is running"], ["a cat sits"]])
    assert [w for w in caught if "empty candidate" in str(w.message)] == []
    assert values["cider-d"][1] == 0.0 and values["bleu-4"][1] == 0.0
