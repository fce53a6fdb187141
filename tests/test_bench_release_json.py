"""A benchmark's own JSON files (HAT, nocaps-FOIL, FOIL, PASCAL-50S, Composite, the video
benchmarks) are read within the bounds of every other JSON (issue 46 item 3): nesting, 4,300-digit
integers, size; what is wrong is one malformed-data-file line naming the file, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

import capeval.bench as cb
from capeval.bench.base import read_release_json
from capeval.errors import ResourceError


@pytest.mark.parametrize("text, fragment", [
    ("[" * 100_000 + "]" * 100_000, "nest"),
    ('[{"sample_id": ' + "9" * 5000 + "}]", "digits"),
    ("{not json", "invalid JSON"),
    ("", "invalid JSON"),
])
def test_hat_release_bounded(tmp_path: Path, text: str, fragment: str) -> None:
    (tmp_path / "hat").mkdir()
    (tmp_path / "hat" / "hat-trainval.json").write_text(text)
    with pytest.raises(ResourceError) as info:
        cb.get_benchmark("hat").load(tmp_path)
    message = str(info.value)
    assert message.startswith("malformed data file") and "hat-trainval.json" in message and "\n" not in message
    assert fragment.lower() in message.lower(), message


def test_size_cap_applies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAPEVAL_MAX_JSON_BYTES", "1000")
    path = tmp_path / "big.json"
    path.write_text("[" + ",".join(["1"] * 1000) + "]")
    with pytest.raises(ResourceError, match="big.json.*1,000"):
        read_release_json(path)


def test_good_file_reads(tmp_path: Path) -> None:
    path = tmp_path / "ok.json"
    path.write_text('{"a": [1, 2.5, "x"], "a": 3}')  # a repeated key kept as json.loads keeps it
    assert read_release_json(path) == {"a": 3}
