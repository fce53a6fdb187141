"""The Ray engine (issue 17): same numbers as the in-process path, exact merge, resume.

Needs the ``ray`` extra; the whole module is skipped without it. A 2-CPU local Ray
instance is started once for the module (2 actors), as on a 2-worker cluster.
"""

from __future__ import annotations

import numpy as np
import pytest

ray = pytest.importorskip("ray")

from _ray_checks import assert_same, local_ray  # noqa: F401 (local_ray: the module's Ray instance)
from _reference import SHARED_DATA, unavailable

import capeval
from capeval.bench.flickr8k import expert_pairs
from capeval.engines import shards
from capeval.engines.merge import merge_shards
from capeval.engines.storage import ShardDir
from capeval.engines.ray_engine import score_ray
from capeval.errors import InputError, ResourceError


@pytest.fixture(scope="module")
def expert():
    if not (SHARED_DATA / "flickr8k" / "ExpertAnnotations.txt").exists():
        unavailable(f"Flickr8k-Expert not found under {SHARED_DATA}")
    return expert_pairs(SHARED_DATA)


def _subset(expert, n):
    ids, cands, refs = expert
    ids = ids[:n]
    return {i: cands[i] for i in ids}, {i: refs[i] for i in ids}


def test_coco_identical_on_flickr8k_expert(expert, tmp_path):
    """All 5,664 pairs, the whole coco preset (BLEU-1..4, METEOR, ROUGE-L, CIDEr-D, SPICE), 6
    shards over 2 actors: every per-item and system score bit-identical (~20 s: CI runs it)."""
    cands, refs = _subset(expert, len(expert[0]))
    local = capeval.score(cands, refs, "coco")
    distributed = score_ray(cands, refs, "coco", num_workers=2, batch_size=1000, out_dir=tmp_path)
    assert_same(local, distributed)
    # BLEU's system score is not the mean of its items: it needs the summed statistics
    assert local["bleu-4"].system != pytest.approx(np.mean(list(local["bleu-4"].items.values())))
    assert sorted(p.name for p in tmp_path.glob("shard-*.parquet")) == [f"shard-{k:06d}.parquet" for k in range(6)]


def test_shard_size_does_not_change_cider(expert):
    """CIDEr-D's df comes from all references (broadcast), not from each shard's."""
    cands, refs = _subset(expert, 300)
    local = capeval.score(cands, refs, "cider-d,bleu-4")
    distributed = score_ray(cands, refs, "cider-d,bleu-4", batch_size=64)
    assert_same(local, distributed)
    # the failure mode the corpus pass prevents: per-shard df gives other numbers
    first = capeval.score({i: cands[i] for i in list(cands)[:64]}, {i: refs[i] for i in list(cands)[:64]}, "cider-d")
    some = next(iter(first["cider-d"].items))
    assert first["cider-d"].items[some] != distributed["cider-d"].items[some]


def _images(tmp_path, ids, n_files=6):
    from PIL import Image

    rng = np.random.default_rng(0)
    files = []
    for k in range(n_files):
        path = tmp_path / f"img{k}.png"
        Image.fromarray(rng.integers(0, 256, (40, 48, 3), dtype=np.uint8)).save(path)
        files.append(str(path))
    return {i: files[k % n_files] for k, i in enumerate(ids)}


def test_clip_s_and_text_metrics_together(expert, tmp_path):
    """CLIP-S / RefCLIP-S (tiny random backbone) within 1e-6, n-gram metrics exact, one call."""
    backbone = pytest.importorskip("capeval.models.clip.backbone")
    bb = backbone.random_backbone("tiny", seed=0)
    cands, refs = _subset(expert, 90)
    images = _images(tmp_path, list(cands))
    opts = {"clip": {"backbone": bb}}
    local = capeval.score(cands, refs, "clip-s,ref-clip-s,bleu-4,cider-d", options=opts, images=images)
    distributed = score_ray(cands, refs, "clip-s,ref-clip-s,bleu-4,cider-d", opts, images=images, batch_size=32)
    assert_same({m: local[m] for m in ("bleu-4", "cider-d")}, {m: distributed[m] for m in ("bleu-4", "cider-d")})
    assert_same({m: local[m] for m in ("clip-s", "ref-clip-s")},
                      {m: distributed[m] for m in ("clip-s", "ref-clip-s")}, exact=False)
    assert str(local["clip-s"].signature) == str(distributed["clip-s"].signature)


def test_killed_actor_then_resume_is_complete_and_identical(expert, tmp_path):
    """An actor dies on shard 3 (process exit); the finished shards stay; resume completes."""
    cands, refs = _subset(expert, 400)
    cands_ids = list(cands)
    out = tmp_path / "run"
    marker = tmp_path / "crashed"
    with pytest.raises(ResourceError, match="resume=True"):
        score_ray(cands, refs, "coco-ngram", batch_size=50, out_dir=out, _fault=(3, str(marker)))
    assert marker.exists()
    kept = {p.name: p.stat().st_mtime_ns for p in out.glob("shard-*.parquet")}
    assert 0 < len(kept) < 8 and "shard-000003.parquet" not in kept
    # a worker killed while writing leaves at most a temporary file, never a partial shard
    assert all(shards.shard_complete(ShardDir(out), int(n[6:12]), cands_ids[int(n[6:12]) * 50:][:50]) is not None
               for n in kept)
    resumed = score_ray(cands, refs, "coco-ngram", batch_size=50, out_dir=out, resume=True,
                        _fault=(3, str(marker)))
    # kept shards were not rescored; temporary files of the killed run are gone
    assert all((out / name).stat().st_mtime_ns == t for name, t in kept.items())
    assert not list(out.glob(".*.tmp"))
    assert_same(capeval.score(cands, refs, "coco-ngram"), resumed)


def test_a_worker_lost_while_building_is_a_resource_error(expert, tmp_path):
    cands, refs = _subset(expert, 20)
    with pytest.raises(ResourceError, match="a Ray worker died"):
        score_ray(cands, refs, "bleu-4", batch_size=10, out_dir=tmp_path, _fault=(-1, str(tmp_path / "m")))


def test_resume_refuses_another_job_and_merge_checks_coverage(expert, tmp_path):
    cands, refs = _subset(expert, 120)
    score_ray(cands, refs, "bleu-4", batch_size=40, out_dir=tmp_path)
    other = dict(cands)
    other[next(iter(other))] = "a completely different caption"
    with pytest.raises(InputError, match="cannot resume"):
        score_ray(other, refs, "bleu-4", batch_size=40, out_dir=tmp_path, resume=True)
    (tmp_path / "shard-000001.parquet").unlink()
    ids = list(cands)
    with pytest.raises(ResourceError, match="missing"):
        merge_shards(tmp_path, shards.spans(len(ids), 40), ids, "5", ["bleu-4"], capeval.Evaluator("bleu-4"))
    # a truncated file is not complete: resume rescored it
    path = tmp_path / "shard-000002.parquet"
    path.write_bytes(path.read_bytes()[:100])
    assert shards.shard_complete(ShardDir(tmp_path), 2, ids[80:120]) is None
    assert shards.shard_complete(ShardDir(tmp_path), 0, ids[:40]) is not None


def test_codec_round_trip_is_exact():
    from capeval.metrics.meteor.stats import MeteorStats

    values = np.random.default_rng(1).standard_normal((7, 4))
    obj = (values, [1, 2, 3], {"a": float("nan"), "b": 0.1 + 0.2}, MeteorStats(test_length=3.0))
    back = shards.decode(shards.encode(obj))
    assert back[0].tobytes() == values.tobytes() and back[0].shape == (7, 4)
    assert back[1] == [1, 2, 3] and np.isnan(back[2]["a"]) and back[2]["b"] == 0.1 + 0.2
    assert back[3] == MeteorStats(test_length=3.0)
    with pytest.raises(TypeError):
        shards.encode(object())


def test_engine_dispatch_and_cli_flags(expert):
    import argparse

    from capeval.engines.dispatch import (
        add_engine_arguments,
        engine_options_from_args,
        score_with_engine,
    )

    p = argparse.ArgumentParser()
    add_engine_arguments(p)
    opts = engine_options_from_args(p.parse_args(["--engine", "ray", "--shard-size", "50"]))
    assert opts["batch_size"] == 50 and opts["num_workers"] == 2 and opts["address"] is None
    with pytest.raises(InputError, match="--engine ray"):
        engine_options_from_args(p.parse_args(["--resume"]))
    with pytest.raises(InputError, match="--shard-dir"):
        engine_options_from_args(p.parse_args(["--engine", "ray", "--resume"]))
    cands, refs = _subset(expert, 120)
    assert_same(capeval.score(cands, refs, "bleu,rouge-l"),
                      score_with_engine("ray", cands, refs, "bleu,rouge-l", engine_options=opts))
    with pytest.raises(InputError, match="unknown engine"):
        score_with_engine("spark", cands, refs, "bleu")
    with pytest.raises(InputError, match="either items"):
        score_with_engine("ray", cands, refs, "bleu", items="items.jsonl")
