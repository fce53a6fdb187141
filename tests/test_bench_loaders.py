"""Benchmark loaders on the real files in ../shared/data: counts, protocol details, bad input."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

import capeval.bench as cb
from capeval.errors import ResourceError, UnknownNameError


def test_flickr8k_expert_counts(shared_data: Path) -> None:
    loaded = cb.load("flickr8k-expert", data_root=shared_data)
    items = loaded.settings[""].items
    assert len(items) == 5664
    assert loaded.data.shape == (5664, 3) and loaded.data.size == 16992
    assert loaded.info["dropped_candidate_is_reference"] == 158
    assert all(len(it.references) == 5 for it in items.values())
    assert all(it.candidate not in it.references for it in items.values())
    assert "56c2b1a9e1a4" in str(loaded.signature)


def test_flickr8k_cf_counts_and_reduced_references(shared_data: Path) -> None:
    loaded = cb.load("flickr8k-cf", data_root=shared_data)
    items = loaded.settings[""].items
    assert len(items) == 47830
    assert loaded.info["images_with_empty_reference_list"] == []
    assert loaded.info["reference_list_sizes"] == {"3": 3, "4": 718, "5": 279}
    by_image: dict[str, set[str]] = {}
    for key, it in items.items():
        by_image.setdefault(key.split("|")[0], set()).add(it.candidate)
    for key, it in items.items():  # no judged candidate of the image stays a reference
        assert not set(it.references) & by_image[key.split("|")[0]]
    assert np.all((loaded.data >= 0) & (loaded.data <= 1))


def test_flickr8k_cf_empty_reference_list_is_dropped_and_reported(shared_data: Path, tmp_path: Path) -> None:
    (tmp_path / "flickr8k").mkdir()
    img = "a.jpg"
    tokens = "".join(f"{img}#{k}\tcaption number {k} .\n" for k in range(5))
    tokens += "".join(f"b.jpg#{k}\tother caption {k} .\n" for k in range(5))
    (tmp_path / "flickr8k" / "Flickr8k.token.txt").write_text(tokens)
    # every caption of a.jpg is judged as a candidate for a.jpg -> its list becomes empty
    rows = "".join(f"{img}\t{img}#{k}\t1\t3\t0\n" for k in range(5)) + f"b.jpg\t{img}#0\t0\t0\t3\n"
    (tmp_path / "flickr8k" / "CrowdFlowerAnnotations.txt").write_text(rows)
    with pytest.warns(UserWarning, match="differ from the published release"):
        loaded = cb.load("flickr8k-cf", data_root=tmp_path)
    assert loaded.info["images_with_empty_reference_list"] == ["a.jpg"]
    assert loaded.info["pairs_dropped_empty_references"] == 5
    assert list(loaded.settings[""].items) == ["b.jpg|a.jpg#0"]
    assert "data:modified" in str(loaded.signature)


def test_pascal50s_counts_draws_and_fixed(shared_data: Path) -> None:
    loaded = cb.load("pascal-50s", data_root=shared_data, seed=0)
    assert loaded.info["pairs"] == {"HC": 1000, "HI": 1000, "HM": 1000, "MM": 1000}
    assert sorted(loaded.settings) == ["draw1", "draw2", "draw3", "draw4", "draw5", "fixed"]
    assert all(len(s.items) == 8000 for s in loaded.settings.values())
    d1 = loaded.settings["draw1"].items
    assert all(len(it.references) == 5 for it in d1.values())
    assert d1["0/a"].references == d1["0/b"].references
    assert loaded.settings["draw1"].items["0/a"].references != loaded.settings["draw2"].items["0/a"].references
    assert loaded.info["fixed_draw_references_found_in_mat"] == 4000
    again = cb.load("pascal-50s", data_root=shared_data, seed=0)
    assert again.settings["draw3"].items == loaded.settings["draw3"].items
    other = cb.load("pascal-50s", data_root=shared_data, seed=1)
    assert other.settings["draw1"].items != loaded.settings["draw1"].items


def test_pascal_mat_reader_matches_scipy(shared_data: Path) -> None:
    scipy_io = pytest.importorskip("scipy.io")
    from capeval.bench.pascal import read_pascal_mat

    ours = read_pascal_mat(shared_data / "pascal50s" / "pascal50S.mat")
    ref = scipy_io.loadmat(str(shared_data / "pascal50s" / "pascal50S.mat"))["train_sent_final"][0]
    assert len(ours) == len(ref) == 1000
    for entry in ref[:50]:
        name = str(entry["name"][0]).rsplit("/", 1)[-1]
        assert ours[name] == [str(s[0]).strip() for s in entry["sentences"][0]]


def test_thumb_counts(shared_data: Path) -> None:
    loaded = cb.load("thumb", data_root=shared_data)
    assert len(loaded.settings[""].items) == 2500
    assert loaded.info["human_rows"] == 500
    assert all(len(it.references) == 4 for it in loaded.settings[""].items.values())


def test_missing_file_names_file_and_location(shared_data: Path, tmp_path: Path) -> None:
    with pytest.raises(ResourceError, match=r"ExpertAnnotations\.txt.*looked for .*" + str(tmp_path.name)):
        cb.load("flickr8k-expert", data_root=tmp_path)


def test_malformed_file_is_named(shared_data: Path, tmp_path: Path) -> None:
    (tmp_path / "flickr8k").mkdir()
    shutil.copy(shared_data / "flickr8k" / "Flickr8k.token.txt", tmp_path / "flickr8k")
    (tmp_path / "flickr8k" / "ExpertAnnotations.txt").write_text("1000268201_693b08cb0e.jpg\tonly-two-columns\n")
    with pytest.raises(ResourceError, match=r"malformed data file .*ExpertAnnotations\.txt \(line 1\)"):
        cb.load("flickr8k-expert", data_root=tmp_path)
    (tmp_path / "pascal50s").mkdir()
    (tmp_path / "pascal50s" / "pascal_50s.json").write_text("{not json")
    with pytest.raises(ResourceError, match=r"pascal_50s\.json"):
        cb.load("pascal-50s", data_root=tmp_path, refs="fixed")
    (tmp_path / "pascal50s" / "pascal_50s.json").write_text("{}")
    (tmp_path / "pascal50s" / "pascal50S.mat").write_bytes(b"garbage" * 40)
    with pytest.raises(ResourceError, match=r"pascal_50s\.json"):
        cb.load("pascal-50s", data_root=tmp_path)


def test_corrupt_mat_file(tmp_path: Path) -> None:
    from capeval.bench.matfile import loadmat
    from capeval.errors import InputError

    p = tmp_path / "x.mat"
    p.write_bytes(b"garbage" * 40)
    with pytest.raises(InputError, match="not a MATLAB level-5"):
        loadmat(p)


def test_unknown_benchmark() -> None:
    with pytest.raises(UnknownNameError, match="unknown benchmark 'flickr9k'.*flickr8k-expert"):
        cb.get_benchmark("flickr9k")


def test_registry_lists_all_benchmarks() -> None:
    names = set(cb.benchmarks())
    assert {"flickr8k-expert", "flickr8k-cf", "pascal-50s", "thumb", "composite", "foil", "vatex-eval", "activitynet-foil"} <= names
    for b in cb.benchmarks().values():
        assert b.citation and b.protocol and b.title


def test_packaged_checksum_lists() -> None:
    from capeval.bench.media import checksum_table

    table = checksum_table(["flickr8k_checksum.txt"])
    assert len(table) == 8091
    assert table["1000268201_693b08cb0e.jpg"][0] == "2ced981ae965987bbe88552d5562ff10"
