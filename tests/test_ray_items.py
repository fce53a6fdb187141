"""The Ray engine on item tables read as a Ray dataset, and on videos (issue 17).

Same numbers as the in-process engine on the same table: n-gram metrics bit-identical,
CLIP-S and EMScore within 1e-6 with identical signatures (EMScore's IDF table counted over
every shard and broadcast, as one in-process call builds it). Needs the ``ray`` extra.
"""

from __future__ import annotations

import csv
import json
import shutil

import numpy as np
import pytest

ray = pytest.importorskip("ray")
pa = pytest.importorskip("pyarrow")

from _ray_checks import assert_same, local_ray  # noqa: F401 (local_ray: the module's Ray instance)
from _reference import SHARED_DATA, unavailable

import capeval
from capeval.engines.ray_engine import default_shard_size, score_ray
from capeval.errors import InputError, ResourceError


@pytest.fixture(scope="module")
def expert_rows(tmp_path_factory):
    """60 Flickr8k-Expert items with a random image each (6 distinct files)."""
    from PIL import Image

    from capeval.bench.flickr8k import expert_pairs

    if not (SHARED_DATA / "flickr8k" / "ExpertAnnotations.txt").exists():
        unavailable(f"Flickr8k-Expert not found under {SHARED_DATA}")
    ids, cands, refs = expert_pairs(SHARED_DATA)
    folder = tmp_path_factory.mktemp("img")
    rng = np.random.default_rng(0)
    files = []
    for k in range(6):
        path = folder / f"img{k}.png"
        Image.fromarray(rng.integers(0, 256, (40, 48, 3), dtype=np.uint8)).save(path)
        files.append(str(path))
    return [{"id": i, "candidate": cands[i], "references": refs[i], "image": files[k % 6]}
            for k, i in enumerate(ids[:60])]


def _table(folder, rows, fmt):
    path = folder / f"items.{fmt}"
    if fmt == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    elif fmt == "csv":
        with open(path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(list(rows[0]))
            for r in rows:
                w.writerow([json.dumps(v) if isinstance(v, list) else v for v in r.values()])
    else:
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(rows), path)
    return path


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_tables_through_ray_equal_the_local_engine(expert_rows, tmp_path, fmt):
    backbone = pytest.importorskip("capeval.models.clip.backbone")
    opts = {"clip": {"backbone": backbone.random_backbone("tiny", seed=0)}}
    path = _table(tmp_path, expert_rows, fmt)
    metrics = "bleu-4,cider-d,meteor,clip-s,ref-clip-s"
    local = capeval.score(items=str(path), metrics=metrics, options=opts)
    distributed = score_ray(items=str(path), metrics=metrics, options=opts, batch_size=16)
    assert_same({m: local[m] for m in ("bleu-4", "cider-d", "meteor")},
          {m: distributed[m] for m in ("bleu-4", "cider-d", "meteor")})
    assert_same({m: local[m] for m in ("clip-s", "ref-clip-s")}, {m: distributed[m] for m in ("clip-s", "ref-clip-s")},
          exact=False)
    # and the table is the mappings it holds
    plain = capeval.score({r["id"]: r["candidate"] for r in expert_rows},
                          {r["id"]: r["references"] for r in expert_rows}, "bleu-4,cider-d")
    assert_same(plain, {m: local[m] for m in ("bleu-4", "cider-d")})


@pytest.mark.filterwarnings("ignore:.*paths in Ray Data are deprecated")  # its notice for local:// URIs
def test_a_folder_of_parts_is_read_in_name_order(expert_rows, tmp_path):
    folder = tmp_path / "parts"
    folder.mkdir()
    for k in range(3):
        _table(tmp_path, expert_rows[k * 20:(k + 1) * 20], "jsonl").rename(folder / f"part-{k:02d}.jsonl")
    (folder / "_SUCCESS").write_text("")  # as Spark and Ray write beside their parts
    local = capeval.score(items=str(folder), metrics="cider-d")
    distributed = score_ray(items=str(folder), metrics="cider-d", batch_size=7)
    assert_same(local, distributed)
    assert list(distributed["cider-d"].items) == [r["id"] for r in expert_rows]
    # the same folder as a URI (the object-store path: listed through pyarrow's filesystems)
    assert_same(local, score_ray(items=f"local://{folder}/", metrics="cider-d", batch_size=7))
    # and from the command line (a prefix has no extension: the engine lists it)
    from capeval.cli.main import main

    out = tmp_path / "cli.json"
    assert main(["score", "--items", f"local://{folder}/", "-m", "cider-d", "--engine", "ray", "-q",
                 "--shard-size", "7", "--out", str(out)]) == 0
    printed = json.loads(out.read_text())
    assert printed["inputs"]["items"]["format"] == "folder" and printed["inputs"]["items"]["n_items"] == 60
    assert printed["scores"]["cider-d"] == local["cider-d"].system


def test_bad_tables_are_one_line_errors(expert_rows, tmp_path):
    rows = [dict(r) for r in expert_rows[:30]]
    rows[25]["id"] = rows[3]["id"]
    path = _table(tmp_path, rows, "jsonl")
    with pytest.raises(InputError, match=r"row 26 .*appears twice \(first in row 4\)"):
        score_ray(items=str(path), metrics="bleu-4", batch_size=8)
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"id": "a", "candidate": "x"}\n{"id": \n')
    with pytest.raises(InputError, match=r"broken.jsonl: cannot read as jsonl") as err:
        score_ray(items=str(broken), metrics="bleu-4")
    assert "\n" not in str(err.value)
    with pytest.raises(InputError, match="items file not found"):
        score_ray(items=str(tmp_path / "none.jsonl"), metrics="bleu-4")
    empty = tmp_path / "empty.parquet"
    empty.write_bytes(b"")
    with pytest.raises(InputError, match=r"empty.parquet: cannot read as parquet"):
        score_ray(items=str(empty), metrics="bleu-4")  # no corpus pass: the error comes from the scoring pass
    with pytest.raises(InputError, match=r"empty.parquet: cannot read as parquet"):
        score_ray(items=str(empty), metrics="cider-d")  # the corpus pass reads the tables first
    no_refs = _table(tmp_path / "..", [{"id": "a", "candidate": "x"}], "jsonl")
    with pytest.raises(InputError, match="bleu-4 needs references; item 'a' has none"):
        score_ray(items=str(no_refs), metrics="bleu-4")


def test_resume_from_a_table_keeps_shards_and_refuses_a_changed_table(expert_rows, tmp_path):
    path = _table(tmp_path, expert_rows, "parquet")
    out = tmp_path / "run"
    marker = tmp_path / "crashed"
    with pytest.raises(ResourceError, match="resume=True"):
        score_ray(items=str(path), metrics="coco-ngram", batch_size=10, out_dir=out, _fault=(2, str(marker)))
    kept = {p.name: p.stat().st_mtime_ns for p in out.glob("shard-*.parquet")}
    assert 0 < len(kept) < 6 and "shard-000002.parquet" not in kept
    resumed = score_ray(items=str(path), metrics="coco-ngram", batch_size=10, out_dir=out, resume=True)
    assert all((out / n).stat().st_mtime_ns == t for n, t in kept.items())
    assert_same(capeval.score(items=str(path), metrics="coco-ngram"), resumed)
    rows = [dict(r) for r in expert_rows]
    rows[0]["candidate"] = "a different caption"
    _table(tmp_path, rows, "parquet")
    with pytest.raises(InputError, match="shard 0 was scored on other inputs"):
        score_ray(items=str(path), metrics="coco-ngram", batch_size=10, out_dir=out, resume=True)


@pytest.fixture(scope="module")
def clip_videos(tmp_path_factory):
    """Three sources: the sample clip, a frame folder, and a copy of the clip."""
    from PIL import Image

    sample = SHARED_DATA / "samples" / "video" / "Bfyp0C02sko_000248_000258.mp4"
    if not sample.exists():
        unavailable(f"sample video not found: {sample}")
    pytest.importorskip("av")
    folder = tmp_path_factory.mktemp("videos")
    frames = folder / "frames"
    frames.mkdir()
    rng = np.random.default_rng(1)
    for k in range(4):
        Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(frames / f"{k:03d}.png")
    copy = folder / "copy.mp4"
    shutil.copy(sample, copy)
    return [str(sample), str(frames), str(copy)]


def test_emscore_idf_is_counted_over_every_shard(expert_rows, clip_videos, tmp_path):
    """EMScore/RefEMScore with IDF from the references: the Ray engine broadcasts the table of
    the whole job (signature idf:references(n=...)); shard-local tables would differ."""
    backbone = pytest.importorskip("capeval.models.clip.backbone")
    opts = {"emscore": {"backbone": backbone.random_backbone("tiny", seed=0), "n_frames": 4}}
    rows = [{"id": r["id"], "candidate": r["candidate"], "references": r["references"],
             "video": clip_videos[k % 3], **({"start": 1.0, "end": 3.5} if k % 6 == 3 else {})}
            for k, r in enumerate(expert_rows[:12])]
    path = _table(tmp_path, rows, "jsonl")
    local = capeval.score(items=str(path), metrics="emscore,ref-emscore", options=opts)
    distributed = score_ray(items=str(path), metrics="emscore,ref-emscore", options=opts, batch_size=5)
    assert_same(local, distributed, exact=False)
    assert "idf:references(n=" in str(distributed["emscore"].signature)
    first = capeval.score(items=str(_table(tmp_path / "..", rows[:5], "jsonl")), metrics="emscore", options=opts)
    some = rows[0]["id"]
    assert abs(first["emscore"].items[some] - distributed["emscore"].items[some]) > 1e-6
    # the in-memory form of the same inputs (videos and segments as mappings)
    mem = score_ray({r["id"]: r["candidate"] for r in rows}, {r["id"]: r["references"] for r in rows},
                    "emscore,ref-emscore", opts, videos={r["id"]: r["video"] for r in rows},
                    segments={r["id"]: (r["start"], r["end"]) for r in rows if "start" in r}, batch_size=5)
    assert_same(local, mem, exact=False)


def test_default_shard_size_by_metric_family():
    assert default_shard_size(["bleu-4", "cider-d"]) == 2048
    assert default_shard_size(["bleu-4", "clip-s"]) == 512
    assert default_shard_size(["clip-s", "emscore"]) == 64


def test_a_checkpoint_that_cannot_load_is_one_line(tmp_path):
    """An actor that cannot build its metric reports the metric's own error, not 'worker died'."""
    bad = tmp_path / "empty.pt"
    bad.write_bytes(b"")
    with pytest.raises(capeval.errors.CapevalError) as err:
        score_ray({"a": "x"}, None, "clip-s", {"clip-s": {"backbone": str(bad)}}, images={"a": "none.png"})
    assert "worker died" not in str(err.value) and "\n" not in str(err.value)


def test_cli_items_through_both_engines(expert_rows, tmp_path, capsys):
    from capeval.cli.main import main

    path = _table(tmp_path, expert_rows, "jsonl")
    outs = {}
    for engine in ("local", "ray"):
        out = tmp_path / f"{engine}.json"
        per_item = tmp_path / f"{engine}-items.json"
        assert main(["score", "--items", str(path), "-m", "bleu-4,cider-d", "--engine", engine, "-q",
                     "--out", str(out), "--per-item", str(per_item)]) == 0
        outs[engine] = (json.loads(out.read_text()), per_item.read_text())
    assert outs["local"][1] == outs["ray"][1]
    assert outs["ray"][0]["inputs"]["items"]["n_items"] == 60
    capsys.readouterr()
    assert main(["score", "--items", str(path), "-r", str(path), "-m", "bleu-4"]) == 2
    assert "--items carries every input; -r cannot be given with it" in capsys.readouterr().err


def test_shards_on_a_uri_folder_and_resume(expert_rows, tmp_path):
    """``out_dir`` as a URI goes through pyarrow's filesystems (here ``local://``: the code path of
    s3:// / gs://): temporary object + move, listing, resume, merge."""
    from capeval.engines.storage import ShardDir

    path = _table(tmp_path, expert_rows, "jsonl")
    uri = f"local://{tmp_path / 'uri-run'}"
    store = ShardDir(uri)
    assert store.local is None and store.fs is not None
    marker = tmp_path / "crashed"
    with pytest.raises(ResourceError, match="resume=True"):
        score_ray(items=str(path), metrics="bleu-4,cider-d", batch_size=10, out_dir=uri, _fault=(3, str(marker)))
    kept = store.names("shard-", ".parquet")
    assert 0 < len(kept) < 6 and "shard-000003.parquet" not in kept
    assert not store.names(".", ".tmp")  # no temporary object left behind
    resumed = score_ray(items=str(path), metrics="bleu-4,cider-d", batch_size=10, out_dir=uri, resume=True)
    assert_same(capeval.score(items=str(path), metrics="bleu-4,cider-d"), resumed)
    assert store.names("shard-", ".parquet") == [f"shard-{k:06d}.parquet" for k in range(6)]
    with pytest.raises(InputError, match="shard folder nosuch://x"):
        ShardDir("nosuch://x")
