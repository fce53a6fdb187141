"""The METEOR 1.5 index: string keys, building, concurrent builders, corruption, cold vs warm.

The index is built from pycocoevalcap's resources (:mod:`capeval.metrics.meteor.index_build`);
these tests check that whatever happens to it on disk (two processes building at once,
a file truncated, flipped or deleted, a bad manifest) the scores come out the same, and
that scoring with a freshly built index equals scoring with one loaded from disk.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from capeval.errors import ResourceError
from capeval.metrics.meteor import (
    Meteor15,
    index_build,
    paraphrase_build,
    string_groups,
    string_table,
)
from capeval.metrics.meteor import resources as meteor_resources

from _reference import SHARED_DATA, require_module, unavailable

_PYCOCO_WHY = "pycocoevalcap==1.2 holds the METEOR 1.5 resources (test extra)"
_SRC = str(Path(meteor_resources.__file__).parents[3])

PAIRS = [
    ("a man is riding a horse on the beach", ["a person rides a horse along the shore", "a man on a horse by the sea"]),
    ("two dogs are playing in the snow", ["two puppies play in snow", "dogs running through the snow"]),
    ("a little girl eats an ice cream cone", ["a child is eating ice cream", "a young girl with an ice-cream"]),
    ("the cyclist rides down the city street", ["a bicyclist is riding in traffic", "a man on a bike in town"]),
]  # fmt: skip


@pytest.fixture(scope="module")
def session_index() -> Path:
    """The session's index (built once per test session, see conftest)."""
    require_module("pycocoevalcap", _PYCOCO_WHY)
    return index_build.prepare()  # the full index (a first Meteor15 alone may scan instead: partial_index)


def _scores(index_dir: Path) -> list[float]:
    return Meteor15(index_dir).score([h for h, _ in PAIRS], [r for _, r in PAIRS])[1]


def _copy(index_dir: Path, dest: Path) -> Path:
    shutil.copytree(index_dir, dest, copy_function=shutil.copy)  # new mtimes: accepted by the CRCs
    return dest


# --------------------------------------------------------------------------- string keys


def test_vectorised_keys_equal_the_scalar_key() -> None:
    rng = random.Random(7)
    strings = [bytes(rng.randrange(256) for _ in range(rng.randrange(0, 90))) for _ in range(3000)]
    strings += [b"", b"a", b"a" * 8, b"a" * 9, b"a" * 16, b"a" * 17, "caf\u00e9".encode()]
    keys = string_table.keys64(strings)
    assert keys.dtype == np.uint64
    assert [int(k) for k in keys] == [string_table.key64(s) for s in strings]
    assert len(set(keys.tolist())) == len(set(strings))


def test_range_helpers_compare_and_copy_bytes_exactly() -> None:
    rng = random.Random(3)
    strings = [bytes(rng.randrange(1, 256) for _ in range(rng.randrange(0, 60))) for _ in range(2000)]
    lengths = np.array([len(s) for s in strings], dtype=np.int64)
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    buf = string_table.padded(b"".join(strings))
    assert string_table.ranges_equal(buf, starts, buf, starts, lengths).all()
    # one byte changed anywhere in a string makes it differ
    changed = []
    for s in strings:
        if s:
            j = rng.randrange(len(s))
            s = s[:j] + bytes([s[j] ^ 1]) + s[j + 1 :]
        changed.append(s)
    other = string_table.padded(b"".join(changed))
    assert (string_table.ranges_equal(buf, starts, other, starts, lengths) == (lengths == 0)).all()
    # copying into a shuffled layout gives the strings back
    order = np.array(rng.sample(range(len(strings)), len(strings)))
    dst_starts = np.concatenate(([0], np.cumsum(lengths[order])[:-1]))
    dst = np.zeros(int(lengths.sum()) + 8, dtype=np.uint8)
    string_table.copy_ranges(buf, starts[order], lengths[order], dst, dst_starts)
    assert dst[:-8].tobytes() == b"".join(strings[i] for i in order)


def test_dedupe_groups_equal_strings_and_splits_shared_high_bits(monkeypatch: pytest.MonkeyPatch) -> None:
    words = [b"cat", b"dog", b"cat", b"a longer string of words", b"dog", b"a longer string of words", b"emu"]
    lengths = np.array([len(w) for w in words], dtype=np.int64)
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    buf = string_table.padded(b"".join(words))
    keys = string_table.range_keys(buf, starts, lengths)
    reps, group = string_groups.dedupe(buf, starts, lengths, keys)
    assert [words[r] for r in reps[group]] == words
    assert sorted(words[r] for r in reps) == sorted(set(words))
    # keys that agree in their high bits but not in full: still told apart
    fake = np.array([5, 6, 5, 7, 6, 7, 8], dtype=np.uint64)  # all below the index bits
    reps, group = string_groups.dedupe(buf, starts, lengths, fake)
    assert [words[r] for r in reps[group]] == words
    # equal (wrong) keys on different strings: told apart by their bytes, never merged
    reps, group = string_groups.dedupe(buf, starts, lengths, np.zeros(len(words), dtype=np.uint64))
    assert [words[r] for r in reps[group]] == words and len(reps) == len(set(words))
    # two different strings whose real keys are equal: a collision, reported
    with pytest.raises(ResourceError, match="collision"):
        string_groups.key_order(np.array([3, 9, 5, 9], dtype=np.uint64))
    with monkeypatch.context() as m:
        m.setattr(string_groups, "key64", lambda data: 0)
        with pytest.raises(ResourceError, match="collision"):
            string_groups.dedupe(buf, starts, lengths, fake)


@pytest.mark.parametrize("tab", [b"\t", b" "])
def test_messy_table_takes_the_strict_path(tmp_path: Path, tab: bytes) -> None:
    """Strings that are not canonical (found per block for tabs, at the end for spaces)
    are read again strictly: the same index as a clean table with the same phrases."""
    clean = [b"0.5", b"a cat", b"the cat", b"0.25", b"the cat", b"a dog", b"0.1", b"x y", b"a cat"]
    messy = [b"0.5", b"a  cat", b"the cat ", b"0.25", b"the" + tab + b"cat", b"a dog", b"0.1", b"x y", b" a cat"]
    built = []
    for lines in (clean, messy):
        path = tmp_path / f"t{len(built)}.gz"
        path.write_bytes(gzip.compress(b"\n".join(lines) + b"\n"))
        out: dict = {}
        paraphrase_build.build_paraphrase(path, out.__setitem__)
        built.append(out)
    assert built[0].keys() == built[1].keys()
    for name in built[0]:
        assert np.array_equal(built[0][name], built[1][name]), name


# --------------------------------------------------------------------------- concurrency

_BUILD_AND_SCORE = """
import json, sys
from capeval.metrics.meteor import Meteor15, prepare
pairs = json.loads(sys.argv[2])
prepare(sys.argv[1], verbose=True)
print(json.dumps(Meteor15(sys.argv[1]).score([h for h, _ in pairs], [r for _, r in pairs])[1]))
"""


def test_two_processes_building_at_once_get_one_index(session_index: Path, tmp_path: Path) -> None:
    index = tmp_path / "cache" / "meteor-1.5"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([_SRC, os.environ.get("PYTHONPATH", "")])}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _BUILD_AND_SCORE, str(index), json.dumps(PAIRS)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-2000:]
    builds = sum(err.count("index built (") for _, err in outs)
    assert builds == 1, [err for _, err in outs]  # the other process waited and used it
    scores = [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]
    assert scores[0] == scores[1] == _scores(session_index)
    assert meteor_resources.index_problem(index, meteor_resources.source_paths(), verify=True) is None
    leftovers = [p.name for p in index.parent.iterdir() if p.name not in ("meteor-1.5", ".meteor-1.5.lock")]
    assert leftovers == []


# --------------------------------------------------------------------------- corruption


def test_copied_index_is_accepted_and_its_new_mtimes_recorded(session_index: Path, tmp_path: Path) -> None:
    index = _copy(session_index, tmp_path / "meteor-1.5")
    files = json.loads((index / "manifest.json").read_text())["files"]
    assert any(rec["mtime_ns"] != (index / f).stat().st_mtime_ns for f, rec in files.items())
    assert meteor_resources.usable(index, meteor_resources.source_paths())[1] is None  # CRCs match
    files = json.loads((index / "manifest.json").read_text())["files"]
    assert all(rec["mtime_ns"] == (index / f).stat().st_mtime_ns for f, rec in files.items())
    assert _scores(index) == _scores(session_index)


def _truncate(d: Path) -> None:
    with open(d / "para_entries.npy", "r+b") as f:
        f.truncate(1000)


def _flip_data(d: Path) -> None:
    p = d / "para_blob.npy"
    with open(p, "r+b") as f:
        f.seek(p.stat().st_size // 2)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0x20]))


def _flip_header_keep_stat(d: Path) -> None:
    """Change an array's dtype in its header, then put its mtime back: only opening it tells."""
    p = d / "para_start.npy"
    st = p.stat()
    data = bytearray(p.read_bytes())
    at = data.index(b"<i4")
    data[at : at + 3] = b"<u4"
    p.write_bytes(bytes(data))
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))


def _delete(d: Path) -> None:
    (d / "syn_sets.npy").unlink()


def _bad_manifest(d: Path) -> None:
    (d / "manifest.json").write_text("{not json")


def _manifest_wrong_array(d: Path) -> None:
    man = json.loads((d / "manifest.json").read_text())
    man["arrays"]["para_ntok"]["shape"] = [1]
    (d / "manifest.json").write_text(json.dumps(man))


@pytest.mark.parametrize(
    "damage", [_truncate, _flip_data, _flip_header_keep_stat, _delete, _bad_manifest, _manifest_wrong_array]
)
def test_damaged_index_is_detected(session_index: Path, tmp_path: Path, damage) -> None:
    index = _copy(session_index, tmp_path / "meteor-1.5")
    sources = meteor_resources.source_paths()
    assert meteor_resources.usable(index, sources)[1] is None  # a copy is fine
    damage(index)
    res, problem = meteor_resources.usable(index, sources)
    assert res is None and problem
    with pytest.raises(ResourceError, match="not usable"):
        meteor_resources.load(index, auto_prepare=False)


def test_damaged_index_is_rebuilt_with_the_same_scores(session_index: Path, tmp_path: Path) -> None:
    index = _copy(session_index, tmp_path / "meteor-1.5")
    before = _scores(index)
    _flip_data(index)
    _flip_header_keep_stat(index)
    after = _scores(index)  # Meteor15 -> load() -> rebuilt under the lock
    assert after == before == _scores(session_index)
    assert meteor_resources.index_problem(index, meteor_resources.source_paths(), verify=True) is None
    fresh = json.loads((index / "manifest.json").read_text())
    assert fresh["files"] == {
        f: {**rec, "mtime_ns": (index / f).stat().st_mtime_ns} for f, rec in fresh["files"].items()
    }


def test_failed_build_leaves_the_old_index_and_no_temporary_folder(
    session_index: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = _copy(session_index, tmp_path / "meteor-1.5")

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("disk full")

    monkeypatch.setattr(index_build, "build_paraphrase", broken)
    with pytest.raises(RuntimeError, match="disk full"):
        index_build.prepare(index, force=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".meteor-1.5.lock", "meteor-1.5"]
    assert meteor_resources.usable(index, meteor_resources.source_paths())[1] is None


# --------------------------------------------------------------------------- cold vs warm


def test_cold_and_warm_scores_are_identical_on_flickr8k_expert(session_index: Path, tmp_path: Path) -> None:
    if not (SHARED_DATA / "flickr8k").is_dir():
        unavailable(f"Flickr8k-Expert data not found under {SHARED_DATA}")
    import capeval
    from capeval.bench.flickr8k import expert_pairs

    ids, cands, refs = expert_pairs(SHARED_DATA)
    cands = {i: cands[i] for i in ids}
    refs = {i: refs[i] for i in ids}
    fresh = tmp_path / "cold" / "meteor-1.5"

    def per_item(cache: Path) -> dict:
        report = capeval.score(cands, refs, ["meteor"], options={"meteor": {"cache_dir": str(cache)}})
        return report["meteor"].items

    cold = per_item(fresh)  # builds the index first
    warm = per_item(fresh)  # loads it from disk
    assert cold == warm == per_item(session_index)
    assert len(cold) == len(ids)
