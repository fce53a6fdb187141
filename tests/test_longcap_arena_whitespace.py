"""Issue 47 item 10 (LongCap-Arena): captions and references are whitespace-collapsed by default,
as CaptionEvalKit's loader reads the dataset (``" ".join(str(value).split())``, ``_normalize_text``
in capevalkit/infrastructure/benchmarks/legacy.py at 23f154b); ``-B longcap-arena.whitespace=keep``
keeps the strings as written and is named in the benchmark signature. Fixtures in the released
layout (tests/test_longcap_arena.py's writer)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from capeval.bench import get_benchmark
from capeval.cli.main import main

# double spaces, tabs, newlines, carriage returns, leading/trailing blanks, and the other characters
# str.split() takes for whitespace (NBSP, em space, line separator, \x1c), as CaptionEvalKit's loader
BLANKS = ["  ", "\t", "\n", "\r\n", " \t \n ", "\u00a0", "\u2003", "\u2028", "\x1c", "\x0b\x0c"]


def _messy(rng: random.Random, words: list[str]) -> str:
    out = rng.choice(BLANKS + [""])
    for w in words:
        out += w + rng.choice(BLANKS + [" ", " "])
    return out + rng.choice(BLANKS + [""])


def _write(root: Path, n: int = 12, seed: int = 5, split: str = "dci_val", perspective: str = "desc"):
    """Shards with messy captions (``_write`` of test_longcap_arena, then the strings replaced)."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    rng = random.Random(seed)
    words = "a man in a red coat walks his dog past the old stone bridge at dusk".split()
    rows = []
    for k in range(n):
        cand = _messy(rng, rng.sample(words, rng.randint(3, 10)))
        refs = [_messy(rng, rng.sample(words, rng.randint(3, 10))) for _ in range(rng.randint(1, 3))]
        rows.append((cand, refs, rng.choice([0.0, 0.25, 0.5, 0.75, 1.0])))
    rows[0] = ("  A  man\twalks\n\nhis dog.  ", ["\tA man walking a dog. ", "a  man\r\nand a dog\n"], 0.5)
    folder = root / "longcap-arena" / "data"
    folder.mkdir(parents=True, exist_ok=True)
    table = pa.table({
        "file_name": [f"sa_{k:05d}.jpg" for k in range(n)],
        "image": pa.array([{"bytes": b"\xff\xd8\xff", "path": None}] * n,
                          pa.struct([("bytes", pa.binary()), ("path", pa.string())])),
        "refs": pa.array([r[1] for r in rows], pa.list_(pa.string())),
        "cand": [r[0] for r in rows], "score": pa.array([r[2] for r in rows], pa.float64()),
    })
    pq.write_table(table, folder / f"{split}.{perspective}-00000-of-00001.parquet")
    return rows


def _kit(s: str) -> str:
    """CaptionEvalKit's ``_normalize_text``."""
    return " ".join(str(s).split())


def test_default_collapses_whitespace_as_captionevalkit(tmp_path: Path) -> None:
    rows = _write(tmp_path)
    loaded = get_benchmark("longcap-arena").load(tmp_path)
    items = list(loaded.settings[""].items.values())
    assert [(i.candidate, list(i.references)) for i in items] == [(_kit(c), [_kit(r) for r in refs])
                                                                   for c, refs, _ in rows]
    assert items[0].candidate == "A man walks his dog." and items[0].references == ("A man walking a dog.",
                                                                                    "a man and a dog")
    assert all(not any(ch.isspace() and ch != " " for ch in i.candidate + "".join(i.references)) for i in items)
    # the default is protocol v2 (collapsed); the options keep their names of before
    assert loaded.options == {"split": "test-a", "perspective": "desc"}
    assert "protocol:longcap-arena-v2" in str(loaded.signature) and "whitespace" not in str(loaded.signature)
    assert loaded.info["whitespace"] == "collapse"


def test_keep_gives_the_strings_as_written_and_says_so(tmp_path: Path) -> None:
    rows = _write(tmp_path)
    loaded = get_benchmark("longcap-arena").load(tmp_path, whitespace="keep")
    items = list(loaded.settings[""].items.values())
    assert [(i.candidate, list(i.references)) for i in items] == [(c, refs) for c, refs, _ in rows]
    assert loaded.options["whitespace"] == "keep" and "whitespace:keep" in str(loaded.signature)


def test_cli_option_scores_and_a_bad_value_is_one_line(tmp_path: Path, capsys) -> None:
    _write(tmp_path, n=16)
    base = ["bench", "longcap-arena", "-m", "bleu-1", "--data-root", str(tmp_path), "--bootstrap", "0", "-q", "--json"]
    capsys.readouterr()
    assert main(base) == 0
    collapsed = json.loads(capsys.readouterr().out)
    assert main(base + ["-B", "longcap-arena.whitespace=keep"]) == 0
    kept = json.loads(capsys.readouterr().out)
    sig = {d["results"][0]["benchmark_signature"] for d in (collapsed, kept)}
    assert any("whitespace:keep" in s for s in sig) and any("whitespace" not in s for s in sig)
    assert main(base + ["-B", "longcap-arena.whitespace=strip"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["capeval: error: bench option longcap-arena.whitespace='strip': use one of collapse, keep"]


def test_blank_only_strings_are_still_refused(tmp_path: Path) -> None:
    """A reference of whitespace alone is an error naming the row before and after the change (not
    an empty reference after collapsing)."""
    from capeval.errors import CapevalError

    rows = _write(tmp_path, n=4)
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    shard = next((tmp_path / "longcap-arena" / "data").glob("*.parquet"))
    t = pq.read_table(shard)
    refs = [r[1] for r in rows]
    refs[2] = ["a dog", "\t\u00a0\n"]
    pq.write_table(t.set_column(t.schema.get_field_index("refs"), "refs", pa.array(refs, pa.list_(pa.string()))), shard)
    with pytest.raises(CapevalError, match=r"\(row 2\): refs must be a non-empty list of non-empty strings"):
        get_benchmark("longcap-arena").load(tmp_path)
