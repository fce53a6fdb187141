"""METEOR without the full index (issue 36, cold start): a first small run scans the
paraphrase table for its own n-grams (capeval.metrics.meteor.partial_index). Every per-item
value must be the full index's, bit for bit: the README example, Flickr8k-Expert and random
inputs with edge cases, and the scan's answers themselves, string by string, against the
full index (built by the other code path, which test_meteor.py checks against Java)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from capeval.metrics.meteor import Meteor15, index_build, partial_index
from capeval.metrics.meteor import resources as meteor_resources
from capeval.metrics.meteor.paraphrase_scan import scan_paraphrases
from capeval.metrics.meteor.string_table import StringTable

from _reference import require_module

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def full() -> Meteor15:
    require_module("pycocoevalcap", "pycocoevalcap==1.2 holds the METEOR 1.5 resources (test extra)")
    return Meteor15(index_build.prepare())


def _partial(tmp_path: Path) -> Meteor15:
    m = Meteor15(tmp_path / "cache" / "meteor-1.5")
    assert not m.resources.complete  # no index there: the scan path
    return m


def _table_strings(res, k: int, seed: int) -> list[str]:
    """``k`` random strings of the full table and, for each, up to 3 of its paraphrases."""
    rng = random.Random(seed)
    out = []
    for i in rng.sample(range(len(res.para)), k):
        out.append(res.para.string(i))
        a, b = int(res.para_start[i]), int(res.para_start[i + 1])
        out += [res.para.string(int(e)) for e in res.para_entries[a : min(b, a + 3)]]
    return out


def test_scan_answers_every_lookup_as_the_full_index(full: Meteor15, tmp_path: Path) -> None:
    """For table strings, their paraphrases, near misses and made-up n-grams: found or not,
    paraphrases in the same order, word counts, pair keys: as in the full index."""
    res = full.resources
    strings = _table_strings(res, 300, 1)
    grams = list(dict.fromkeys(strings + [s + "s" for s in strings[:100]] + [s.upper() for s in strings[:50]]
                                + ["zzqx", "a", "the", "of the", "a man", "é", "naïve café", "日本"]))
    arr = scan_paraphrases(meteor_resources.source_paths()["paraphrase"], [g.encode() for g in grams])
    small = StringTable(arr["para_hash"], arr["para_off"], arr["para_blob"])
    assert len(arr["para_ntok"]) == len(small) and len(arr["para_start"]) == len(small) + 1
    got, want = small.lookup_many(grams), res.para.lookup_many(grams)
    assert [g >= 0 for g in got] == [w >= 0 for w in want]
    assert sum(w >= 0 for w in want) > 300

    def entries(table, start, ents, i):
        return [table.string(int(e)) for e in ents[int(start[i]) : int(start[i + 1])]]

    for g, i, j in zip(grams, got, want):
        if j >= 0:
            assert entries(small, arr["para_start"], arr["para_entries"], i) == entries(
                res.para, res.para_start, res.para_entries, j), g
            assert arr["para_ntok"][i] == res.para_ntok[j]
    assert np.isin(arr["para_pairs"], res.para_pairs).all()


def _edge_cases(res, seed: int) -> tuple[list[str], list[list[str]]]:
    """Items made of table phrases and their paraphrases (so every matcher stage fires),
    with case, punctuation, non-ASCII, ``|||``, runs of spaces and tabs, empty and very long
    sentences (over the 255-token cap of the n-grams the scan looks for)."""
    rng = random.Random(seed)
    pool = _table_strings(res, 120, seed) + ["a", "the", "dog", "dogs", "running", "ran", "café", "Man", "?", "."]
    hyps, refs = [], []
    for _ in range(60):
        def sent() -> str:
            return " ".join(rng.choice(pool) for _ in range(rng.randint(1, 6)))

        h = sent()
        kind = rng.random()
        if kind < 0.1:
            h = ""
        elif kind < 0.2:
            h = h.upper() + " ,  and\tthe " + sent()
        elif kind < 0.25:
            h = " ".join(["a"] * 300) + " " + h  # 300 tokens
        hyps.append(h)
        refs.append([sent() for _ in range(rng.randint(1, 4))] + ([h.lower()] if rng.random() < 0.2 else [])
                    + (["x ||| y"] if rng.random() < 0.05 else []))
    return hyps, refs


def test_cold_and_full_index_per_item_values_are_identical(full: Meteor15, tmp_path: Path, monkeypatch) -> None:
    hyps, refs = _edge_cases(full.resources, 7)
    monkeypatch.setattr(partial_index, "SCAN_LIMIT", 10**6)  # the 300-token sentences have ~70,000 n-grams
    cold = _partial(tmp_path)
    got = cold.score(hyps, refs, workers=1)
    assert not cold.resources.complete and cold.resources.max_phrase <= full.resources.max_phrase
    want = full.score(hyps, refs, workers=1)
    assert got[1] == want[1] and got[0] == want[0]  # exact: same floats
    # the reference implementation (a direct port of Java) on the scan's tables too
    for h, rs in list(zip(hyps, refs))[:12]:
        assert cold.reference_segment_stats(h, rs).to_string() == full.reference_segment_stats(h, rs).to_string()


def test_flickr8k_expert_cold_equals_full(full: Meteor15, expert_pairs, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """All 5,664 Flickr8k-Expert items through one scan (the limit raised for the test)."""
    ids, cands, refs = expert_pairs
    hyps, rs = [cands[k] for k in ids], [refs[k] for k in ids]
    monkeypatch.setattr(partial_index, "SCAN_LIMIT", 10**7)
    cold = _partial(tmp_path)
    got = cold.score(hyps, rs, workers=1)
    assert not cold.resources.complete
    assert got == full.score(hyps, rs, workers=1)


def test_uncovered_sentences_switch_to_the_full_index(full: Meteor15, tmp_path: Path, monkeypatch) -> None:
    """A second call with new sentences builds the index and goes on with it (same values);
    so does the next run after a scan (the marker), and a call over the scan limit."""
    hyps, refs = _edge_cases(full.resources, 11)
    monkeypatch.setattr(partial_index, "SCAN_LIMIT", 10**6)
    cold = _partial(tmp_path)
    first = cold.score(hyps[:20], refs[:20])
    assert not cold.resources.complete
    assert cold.score(hyps[:20], refs[:20]) == first  # covered: still the scan's tables
    assert not cold.resources.complete
    rest = cold.score(hyps[20:], refs[20:])
    assert cold.resources.complete and cold.resources.max_phrase == full.resources.max_phrase
    assert first == full.score(hyps[:20], refs[:20]) and rest == full.score(hyps[20:], refs[20:])
    assert partial_index.marker(cold.resources.index_dir).exists()
    assert Meteor15(cold.resources.index_dir).resources.complete  # built: loads as usual
    other = tmp_path / "other" / "meteor-1.5"
    partial_index.marker(other).parent.mkdir()
    partial_index.marker(other).touch()  # a run scanned before: this one builds (not here)
    assert not partial_index.scans(other) and partial_index.scans(tmp_path / "new" / "meteor-1.5")


def test_scans_are_counted_and_the_build_comes_once_they_cost_one(tmp_path: Path) -> None:
    """The marker counts the runs that scanned (ski rental): SCANS_BEFORE_BUILD of them, then
    the next run builds; a marker whose text is not a count means build, a missing one scan."""
    index_dir = tmp_path / "c" / "meteor-1.5"
    assert partial_index.scan_count(index_dir) == 0 and partial_index.scans(index_dir)
    for n in range(1, partial_index.SCANS_BEFORE_BUILD + 1):
        partial_index._count_scan(index_dir)
        assert partial_index.scan_count(index_dir) == n
        assert partial_index.scans(index_dir) is (n < partial_index.SCANS_BEFORE_BUILD)
    assert sorted(p.name for p in index_dir.parent.iterdir()) == [".meteor-1.5.scanned"]  # no temp file left
    for text in ("", "x\n", "-1", "9" * 12, "\xff"):
        partial_index.marker(index_dir).write_text(text, encoding="latin-1")
        assert not partial_index.scans(index_dir), text
    partial_index.marker(index_dir).unlink()
    (tmp_path / "file").write_text("")
    assert partial_index.scan_count(tmp_path / "file" / "c" / "meteor-1.5") == 0  # an unusable cache scans
    index_dir.mkdir()  # an index there: never a scan, whatever the count
    assert not partial_index.scans(index_dir)


def test_over_the_scan_limit_builds_the_index(full: Meteor15, tmp_path: Path, monkeypatch) -> None:
    hyps, refs = _edge_cases(full.resources, 3)
    monkeypatch.setattr(partial_index, "SCAN_LIMIT", 50)
    cold = _partial(tmp_path)
    assert cold.score(hyps, refs) == full.score(hyps, refs)
    assert cold.resources.complete


def _cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    env = {**os.environ, **env, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "capeval.cli", *args], capture_output=True, text=True, env=env,
                          timeout=300, check=False, cwd=ROOT)


def test_readme_example_cold_per_item_file_equals_warm(full: Meteor15, tmp_path: Path) -> None:
    """The README command on an empty cache writes the per-item file of a warm run, byte for
    byte, without building the index; with an unwritable cache it still does."""
    args = ["score", "-m", "coco-ngram", "-c", "examples/candidates.json", "-r", "examples/references.json", "-q"]
    warm = _cli([*args, "--per-item", str(tmp_path / "warm.json")],
                {"CAPEVAL_CACHE": str(full.resources.index_dir.parent)})
    assert warm.returncode == 0, warm.stderr
    cold = _cli([*args, "--per-item", str(tmp_path / "cold.json")], {"CAPEVAL_CACHE": str(tmp_path / "c")})
    assert cold.returncode == 0, cold.stderr
    assert (tmp_path / "cold.json").read_bytes() == (tmp_path / "warm.json").read_bytes()
    assert cold.stdout == warm.stdout and "preparing" not in cold.stderr
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == [".meteor-1.5.scanned"]  # no index written
    (tmp_path / "file").write_text("")
    ro = _cli([*args, "--per-item", str(tmp_path / "ro.json")], {"CAPEVAL_CACHE": str(tmp_path / "file" / "c")})
    assert ro.returncode == 0, ro.stderr
    assert (tmp_path / "ro.json").read_bytes() == (tmp_path / "warm.json").read_bytes()
    assert json.loads(ro.stdout)["scores"]["meteor"] == 0.2805079484001792


def test_damaged_or_short_paraphrase_file_is_one_line(tmp_path: Path) -> None:
    """The scan reads the gzip stream whole: its CRC-32 and length are checked (zlib or ISA-L)."""
    import gzip

    from capeval.errors import ResourceError

    data = gzip.compress(b"".join(b"0.5\na b %d\nc d\n" % i for i in range(20000)))
    path = tmp_path / "paraphrase-en.gz"
    path.write_bytes(data)
    arr = scan_paraphrases(path, [b"a b 7", b"c d", b"zz"])
    table = StringTable(arr["para_hash"], arr["para_off"], arr["para_blob"])
    assert len(table) == 2 and arr["para_entries"].tolist() == [table.lookup("c d")]  # "c d" is only a paraphrase
    bad = bytearray(data)
    bad[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(bad))
    with pytest.raises(ResourceError, match="is damaged|ended before") as err:
        scan_paraphrases(path, [b"c d"])
    assert "\n" not in str(err.value) and "pycocoevalcap==1.2" in str(err.value)
    path.write_bytes(data[: len(data) - 20])
    with pytest.raises(ResourceError, match="ended before the end of its gzip stream"):
        scan_paraphrases(path, [b"c d"])


def test_pipeline_per_item_values_equal_for_1_2_3_workers_cold_and_warm(full: Meteor15, expert_pairs,
                                                                        tmp_path: Path, monkeypatch) -> None:
    """``coco-ngram`` on 300 Flickr8k-Expert items in chunks of 40: one process or 2 or 3
    forked workers, with the full index and (2 workers) from an empty cache, where the
    workers build the index: every per-item value equal."""
    import capeval

    ids, cands, refs = expert_pairs
    c = {k: cands[k] for k in ids[:300]}
    r = {k: refs[k] for k in ids[:300]}

    def run(workers: int) -> dict:
        res = capeval.Evaluator("coco-ngram", chunk_size=40, workers=workers).score(c, r)
        return {m: (x.system, dict(x.items)) for m, x in res.items()}

    monkeypatch.setenv("CAPEVAL_CACHE", str(full.resources.index_dir.parent))
    one = run(1)
    assert run(2) == one and run(3) == one
    monkeypatch.setenv("CAPEVAL_CACHE", str(tmp_path / "cold"))
    assert run(2) == one
    assert meteor_resources.index_problem(tmp_path / "cold" / "meteor-1.5", meteor_resources.source_paths()) is None


def test_two_first_runs_at_once_both_scan_and_agree(full: Meteor15, tmp_path: Path) -> None:
    """Two first runs on one empty cache at the same time: each scans (nothing is written but
    the marker, created with O_CREAT), both give the warm run's per-item file."""
    env = {**os.environ, "CAPEVAL_CACHE": str(tmp_path / "c"),
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    procs = [subprocess.Popen([sys.executable, "-m", "capeval.cli", "score", "-m", "meteor", "-c",
                               "examples/candidates.json", "-r", "examples/references.json", "-q", "--per-item",
                               str(tmp_path / f"{k}.json")], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for k in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err for _, err in outs]
    assert (tmp_path / "0.json").read_bytes() == (tmp_path / "1.json").read_bytes()
    assert json.loads(outs[0][0])["scores"]["meteor"] == 0.2805079484001792
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == [".meteor-1.5.scanned"]


def test_direct_sentence_data_uses_the_full_index(full: Meteor15, tmp_path: Path) -> None:
    """``fast_sentences`` called by itself (no scoring call said which texts come) never
    works on a scan: texts a scoring call covered stay on its tables, others get the index."""
    cold = _partial(tmp_path)
    cold.score(["a dog runs"], [["a dog is running"]])
    assert not cold.resources.complete
    cold.fast_sentences(["a dog runs"])  # covered by the scoring call
    assert not cold.resources.complete
    got = cold.fast_sentences(["a man rides a horse"])
    assert cold.resources.complete
    assert got["a man rides a horse"].ngram_ids == full.fast_sentences(["a man rides a horse"])[
        "a man rides a horse"].ngram_ids
