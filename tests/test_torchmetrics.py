"""capeval.torchmetrics.CaptionScore: under DDP (gloo, 2 and 3 processes, uneven splits, padded
duplicates) every rank's compute() equals capeval.score on all items."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchmetrics")
pytest.importorskip("PIL.Image")

import capeval  # noqa: E402
from capeval.errors import InputError  # noqa: E402

from test_scst_distributed import _write_inputs  # noqa: E402

_PATHS = os.pathsep.join(str(Path(__file__).resolve().parents[k] / d) for k, d in ((1, "src"), (0, "")))
WORDS = "a the man woman dog cat red blue sits runs on in with near park street ball frisbee".split()

LAUNCH = r'''
import json, sys
from pathlib import Path
import torch.distributed as dist
sys.path.insert(0, str(Path(__file__).parent))
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
root = Path(sys.argv[1])
case = json.loads((root / "case.json").read_text())
from capeval.torchmetrics import CaptionScore

out = {}
for name, spec in case["runs"].items():
    metric = CaptionScore(spec["metrics"], options=spec.get("options"))
    for epoch in range(2):  # reset() between epochs: the same numbers again
        metric.reset()
        part = spec["parts"][rank]
        for start in range(0, len(part), 4):
            batch = part[start:start + 4]
            items = [spec["items"][i] for i in batch]
            metric.update([it["candidate"] for it in items], [it["references"] for it in items],
                          images=[it["image"] for it in items] if "image" in items[0] else None,
                          ids=batch if spec.get("ids") else None)
        out[f"{name}/{epoch}"] = {k: float(v) for k, v in metric.compute().items()}
(root / f"rank{rank}.json").write_text(json.dumps(out))
dist.destroy_process_group()
'''


def _text_items(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    return [{"candidate": " ".join(rng.choices(WORDS, k=rng.randint(1, 9))),
             "references": [" ".join(rng.choices(WORDS, k=rng.randint(3, 9))) for _ in range(rng.randint(1, 4))]}
            for _ in range(n)]


def _parts(n: int, world: int, seed: int) -> list[list[int]]:
    """An uneven split of range(n) (one rank may get nothing) plus a DistributedSampler-like
    padded duplicate on the last non-empty rank."""
    rng = random.Random(seed)
    order = list(range(n))
    rng.shuffle(order)
    cuts = sorted(rng.sample(range(n + 1), world - 1))
    parts = [order[a:b] for a, b in zip([0, *cuts], [*cuts, n])]
    parts[-1] = parts[-1] + [order[0]]
    return parts


def _run(tmp_path: Path, world: int, case: dict) -> list[dict]:
    (tmp_path / "case.json").write_text(json.dumps(case))
    script = tmp_path / "launch.py"
    script.write_text(LAUNCH)
    env = {**os.environ, "PYTHONPATH": _PATHS, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
                           str(world), str(script), str(tmp_path)], env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(world)]


@pytest.mark.parametrize("world", [2, 3])
def test_every_rank_computes_capeval_score_on_all_items(tmp_path, monkeypatch, world):
    clip_file, vocab, coco = _write_inputs(tmp_path)
    monkeypatch.setenv("CAPEVAL_CLIP_VOCAB", str(vocab))
    text = _text_items(37, seed=world)
    images = sorted((coco / "val2014").glob("*.png"))
    clip_items = [{"candidate": it["candidate"], "references": it["references"], "image": str(images[k % len(images)])}
                  for k, it in enumerate(_text_items(11, seed=10 + world))]
    clip_opts = {"clip": {"backbone": str(clip_file)}}
    case = {"runs": {
        "ngram": {"metrics": "coco-ngram", "items": text, "parts": _parts(37, world, world), "ids": True},
        "clip": {"metrics": "clip-s,ref-clip-s", "options": clip_opts, "items": clip_items,
                 "parts": _parts(11, world, 7 + world), "ids": True},
    }}
    capeval.score({"0": "a dog"}, {"0": ["a dog runs"]}, "meteor")  # the METEOR index once, not per process
    ranks = _run(tmp_path, world, case)
    want_text = capeval.score({str(i): it["candidate"] for i, it in enumerate(text)},
                              {str(i): it["references"] for i, it in enumerate(text)}, "coco-ngram")
    want_clip = capeval.score({str(i): it["candidate"] for i, it in enumerate(clip_items)},
                              {str(i): it["references"] for i, it in enumerate(clip_items)}, "clip-s,ref-clip-s",
                              options=clip_opts, images={str(i): it["image"] for i, it in enumerate(clip_items)})
    for got in ranks:
        for epoch in (0, 1):
            for m in want_text:  # corpus-level: the union's statistics, exactly
                assert got[f"ngram/{epoch}"][m] == want_text[m].system, (m, epoch)
            for m in want_clip:  # each rank embeds its own items, in other batches: float32 rounding only
                assert got[f"clip/{epoch}"][m] == pytest.approx(want_clip[m].system, rel=1e-5), (m, epoch)
    assert 0 < want_text["cider-d"].system and 0 < want_text["bleu-1"].system


def test_without_ids_every_item_counts_and_bad_updates_are_one_line(tmp_path, monkeypatch):
    from capeval.torchmetrics import CaptionScore

    items = _text_items(9, seed=1)
    metric = CaptionScore("bleu-4,cider-d")
    metric.update([it["candidate"] for it in items], [it["references"] for it in items])
    metric.update([items[0]["candidate"]], [items[0]["references"]])  # a padded duplicate, counted
    cands = {str(i): it["candidate"] for i, it in enumerate(items)}
    refs = {str(i): it["references"] for i, it in enumerate(items)}
    cands["9"], refs["9"] = items[0]["candidate"], items[0]["references"]
    want = capeval.score(cands, refs, "bleu-4,cider-d")
    got = metric.compute()
    assert float(got["bleu-4"]) == want["bleu-4"].system and float(got["cider-d"]) == want["cider-d"].system
    with pytest.raises(InputError, match="one of each per item"):
        metric.update(["a"], [["a"], ["b"]])
    with pytest.raises(InputError, match="different captions"):
        m2 = CaptionScore("bleu-1")
        m2.update(["a dog", "a cat"], [["a dog"], ["a cat"]], ids=[1, 1])
        m2.compute()
    with pytest.raises(InputError, match="cannot run per process"):
        CaptionScore("mid")
