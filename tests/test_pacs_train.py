"""PAC-S / PAC-S++ training: loss vs a loop-written oracle, gradients only where intended, a tiny
end-to-end run whose loss falls, export -> capeval's normal loading -> the same scores, and
released-layout round trips."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("yaml")

from capeval.models.clip.backbone import load_backbone, random_backbone
from capeval.models.clip.tokenizer import write_vocab
from capeval.train.coco import CaptionedImage
from capeval.train.pacs import PacsObjective, pacs_loss, train_pacs
from capeval.train.pacs_config import PacsTrainConfig
from capeval.train.pacs_data import read_positives
from capeval.train.pacs_lora import (
    add_lora,
    export_state,
    import_state,
    trainable_names,
)

COLOURS = {"red": (220, 30, 30), "green": (30, 200, 40), "blue": (30, 40, 220), "yellow": (230, 220, 20)}
SHAPES = ("square", "circle")


def shape_image(colour: str, shape: str, jitter: int = 0) -> np.ndarray:
    img = np.full((32, 32, 3), 245, np.uint8)
    yy, xx = np.mgrid[:32, :32]
    c = 16 + jitter
    mask = (abs(yy - c) < 9) & (abs(xx - c) < 9) if shape == "square" else (yy - c) ** 2 + (xx - c) ** 2 < 81
    img[mask] = COLOURS[colour]
    return img


def synthetic_items() -> list[CaptionedImage]:
    out = []
    for colour in COLOURS:
        for shape in SHAPES:
            out.append(CaptionedImage(f"{colour}-{shape}", shape_image(colour, shape),
                                      (f"a {colour} {shape}", f"the {shape} is {colour}")))
    return out


@pytest.fixture()
def positives(tmp_path):
    """A generated-positives folder as `capeval train pacs generate` writes it (fixture generators)."""
    from PIL import Image

    root = tmp_path / "positives"
    (root / "images").mkdir(parents=True)
    lines = []
    for it in synthetic_items():
        colour, shape = it.id.split("-")
        lines.append({"kind": "caption", "image_id": it.id, "text": f"a picture of a {colour} {shape}"})
        for j in range(len(it.captions)):
            Image.fromarray(shape_image(colour, shape, jitter=2)).save(root / "images" / f"{it.id}_{j}.png")
            lines.append({"kind": "image", "image_id": it.id, "caption_index": j, "path": f"images/{it.id}_{j}.png"})
    (root / "positives-000-of-001.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return root


def test_loss_matches_loop_oracle():
    g = torch.Generator().manual_seed(0)
    v, t, gv, gt = (torch.randn(5, 8, generator=g) for _ in range(4))
    scale, lv, lt = 7.0, 0.1, 0.001

    def unit(x):
        return [r / math.sqrt(sum(float(a) ** 2 for a in r)) for r in x]

    def sym(a, b):  # journal Eq. 1, the two directions averaged
        a, b = unit(a), unit(b)
        n = len(a)
        s = [[scale * float(sum(x * y for x, y in zip(a[i], b[j]))) for j in range(n)] for i in range(n)]
        l1 = -sum(s[i][i] - math.log(sum(math.exp(s[i][j]) for j in range(n))) for i in range(n)) / n
        l2 = -sum(s[i][i] - math.log(sum(math.exp(s[j][i]) for j in range(n))) for i in range(n)) / n
        return (l1 + l2) / 2

    want = sym(v, t) + lv * sym(gv, t) + lt * sym(v, gt)
    got = pacs_loss(v, t, gv, gt, scale, lv, lt)
    assert abs(float(got["loss"]) - want) < 1e-5
    assert abs(float(got["l_gv_t"]) - sym(gv, t)) < 1e-5
    assert float(pacs_loss(v, t, None, None, scale, lv, lt)["loss"]) == pytest.approx(sym(v, t), abs=1e-5)


def _batch(items, gen_images=True):
    bb = random_backbone("tiny")
    v = torch.stack([torch.from_numpy(bb.preprocess(it.image)) for it in items])
    return {"v": v, "v_gen": v.flip(-1) if gen_images else torch.zeros(0), "t": [it.captions[0] for it in items],
            "t_gen": [it.captions[1] for it in items]}


@pytest.mark.parametrize("mode", ["pacs", "pacs++"])
def test_only_intended_parameters_get_gradients(mode):
    bb = random_backbone("tiny")
    obj = PacsObjective(bb.model, bb.tokenizer, PacsTrainConfig(mode=mode))
    obj(_batch(synthetic_items()))["loss"].backward()
    got = {n for n, p in obj.clip.named_parameters() if p.grad is not None}
    if mode == "pacs":
        assert got == {"visual.proj", "text_projection"} == set(trainable_names(obj.clip))
    else:
        assert got == set(trainable_names(obj.clip))
        assert got and all(n.endswith((".lora_A", ".lora_B")) for n in got)
        assert len(got) == 2 * (4 * 2 * 2 + 1)  # q/k/v, out, c_fc, c_proj x 2 layers x 2 towers + conv1
        # loralib's B starts at zero, so its A gets no gradient at step 0; pacscore's q/k/v start
        # with xavier A and B, so both get one
        grads = {n: float(p.grad.abs().sum()) for n, p in obj.clip.named_parameters() if p.grad is not None}
        assert all(g > 0 for n, g in grads.items() if n.endswith("lora_B") or "in_proj_weight" in n)
        assert all(g == 0 for n, g in grads.items() if n.endswith("lora_A") and "in_proj_weight" not in n)


def _score(backbone, items):
    from capeval.metrics.clip_score import PacScorePlusPlus

    scorer = PacScorePlusPlus(backbone=backbone)
    cands = {it.id: it.captions[0] for it in items}
    refs = {it.id: [it.captions[1]] for it in items}
    rep = scorer.score(cands, refs, images={it.id: it.image for it in items})
    return rep.per_item()


@pytest.mark.parametrize("mode", ["pacs++", "pacs"])
def test_end_to_end_loss_falls_and_export_reloads(tmp_path, positives, mode):
    items = synthetic_items()
    bb = random_backbone("tiny")
    cfg = PacsTrainConfig(mode=mode, batch_size=8, grad_accum=2, max_epochs=40, val_every=5, patience_steps=1000,
                          lr=2e-2 if mode == "pacs" else 1e-2, workers=0, log_every=1,
                          output_dir=str(tmp_path / "run"), device="cpu", accelerate="no")
    res = train_pacs(cfg, backbone=bb, train_data=items, val_data=items, positives=read_positives(positives),
                     progress=False)
    vals = [h["val_loss"] for h in res.history]
    assert len(vals) == 8 and res.steps == 40 and vals[-1] < 0.8 * vals[0]
    assert res.best is not None and (tmp_path / "run" / "metrics.csv").exists()
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert len(run["config_hash"]) == 16 and run["data"]["positives"]
    # the last export is the in-memory model; capeval's normal loading must score it identically
    vocab = write_vocab(tmp_path / "vocab", sorted(bb.tokenizer.ranks, key=bb.tokenizer.ranks.get))
    mem = _score(bb, items)
    for name in ("last.safetensors", "last.pth"):
        loaded = load_backbone(tmp_path / "run" / name, tokenizer=vocab)
        assert loaded.signature["sha256"] == run["files"][name]["sha256"]  # the signature leads to run.json
        if name.endswith(".safetensors"):  # and names the run itself
            assert loaded.signature["run"] == f"config:{run['config_hash']},train:{run['data']['train']}"
        else:
            assert "run" not in loaded.signature
        again = _score(loaded, items)
        for metric, scores in mem.items():
            assert max(abs(scores[k] - again[metric][k]) for k in scores) < 1e-5, (name, metric)
        if mode == "pacs++":
            assert loaded.signature["lora"] == "effective(attention+conv1;r4;a1)"
    fresh = _score(random_backbone("tiny"), items)
    assert max(abs(fresh["pac-s++"][k] - mem["pac-s++"][k]) for k in fresh["pac-s++"]) > 1e-3


def _released_fixture(seed=3):
    """A PAC-S++-layout state dict (every LoRA factor nonzero), built as tests/test_clip_lora.py does."""
    bb = random_backbone("tiny", seed=seed)
    g = torch.Generator().manual_seed(seed)
    state = {k: v.clone() for k, v in bb.model.state_dict().items()}
    r, w, k = 4, 32, 8
    for prefix in ("transformer.resblocks", "visual.transformer.resblocks"):
        for i in range(2):
            p = f"{prefix}.{i}"
            for key, shape in ((".attn.in_proj_weight_lora_A", (r, w)), (".attn.in_proj_weight_lora_B", (3 * w, r)),
                               (".attn.out_proj.lora_A", (r, w)), (".attn.out_proj.lora_B", (w, r)),
                               (".mlp.c_fc.lora_A", (r, w)), (".mlp.c_fc.lora_B", (4 * w, r)),
                               (".mlp.c_proj.lora_A", (r, 4 * w)), (".mlp.c_proj.lora_B", (w, r))):
                state[p + key] = torch.randn(*shape, generator=g) * 0.3
    state["visual.conv1.lora_A"] = torch.randn(r * k, 3 * k, generator=g) * 0.3
    state["visual.conv1.lora_B"] = torch.randn(w * k, r * k, generator=g) * 0.3
    return bb, state


def test_released_lora_fixture_round_trips_and_matches_capeval_loading(tmp_path):
    bb, state = _released_fixture()
    model = random_backbone("tiny", seed=9).model
    add_lora(model, 4, 1.0)
    extras = import_state(model, state)
    assert extras == {}
    out = export_state(model)
    assert set(out) == set(state)
    assert all(torch.equal(out[k], state[k]) for k in state)  # bit for bit
    # the trainer's model computes what capeval (and pacscore) compute from the file
    path = tmp_path / "released.pth"
    torch.save({"state_dict": state}, path)
    vocab = write_vocab(tmp_path / "vocab", sorted(bb.tokenizer.ranks, key=bb.tokenizer.ranks.get))
    ref = load_backbone(path, tokenizer=vocab)
    px = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert (model.encode_image(px) - ref.encode_images(px)).abs().max() < 1e-5
        ids = torch.tensor([[49406 % model.config.vocab_size, 5, 7, 9]])
        eot = torch.tensor([3])
        assert (model.encode_text(ids, eot) - ref.model.encode_text(ids, eot)).abs().max() < 1e-5


def test_released_full_fixture_round_trips():
    bb, _ = _released_fixture()
    state = {k: v.clone() for k, v in bb.model.state_dict().items()}
    state["input_resolution"] = torch.tensor(32)  # OpenAI metadata kept as is
    model = random_backbone("tiny", seed=9).model
    extras = import_state(model, state)
    out = export_state(model, extras)
    assert set(out) == set(state) and all(torch.equal(out[k], state[k]) for k in state)


def test_lora_keys_must_match(tmp_path):
    from capeval.errors import ResourceError

    _, state = _released_fixture()
    model = random_backbone("tiny").model
    add_lora(model, 4, 1.0, targets=("attn", "conv1"))
    with pytest.raises(ResourceError, match="LoRA keys"):
        import_state(model, state)


def test_missing_positives_are_named(tmp_path, positives):
    items = synthetic_items() + [CaptionedImage("extra", shape_image("red", "circle"), ("x",))]
    cfg = PacsTrainConfig(batch_size=4, output_dir=str(tmp_path / "r"), workers=0)
    from capeval.errors import InputError

    with pytest.raises(InputError, match="image extra has no generated caption"):
        train_pacs(cfg, backbone=random_backbone("tiny"), train_data=items, positives=read_positives(positives))
    with pytest.raises(InputError, match="need generated positives"):
        train_pacs(cfg, backbone=random_backbone("tiny"), train_data=items)


def test_cli_dry_run_prints_plan(tmp_path, capsys):
    from PIL import Image

    from capeval.cli.main import main

    root = tmp_path / "coco"
    (root / "train2014").mkdir(parents=True)
    images = []
    for n, it in enumerate(synthetic_items()):
        Image.fromarray(it.image).save(root / "train2014" / f"{n}.jpg")
        images.append({"filepath": "train2014", "filename": f"{n}.jpg", "cocoid": n, "split": "train",
                       "sentences": [{"raw": c} for c in it.captions]})
    (root / "dataset_coco.json").write_text(json.dumps({"images": images}))
    cfg = tmp_path / "pacs.yaml"
    cfg.write_text(f"mode: pacs++\ncoco_root: {root}\nbackbone: openai/ViT-B-32\nlambda_v: 0\nlambda_t: 0\n"
                   "batch_size: 4\nmax_epochs: 3\n")
    assert main(["train", "pacs", "--config", str(cfg), "--dry-run"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["steps_per_epoch"] == 2 and plan["max_steps"] == 6
    assert 0 < plan["trainable"] < plan["parameters"] / 20 and plan["memory_estimate_gib"] > 0.5


def test_generate_is_sharded_and_resumable(tmp_path):
    from PIL import Image

    from capeval.train.pacs_generate import generate_positives

    class Captioner:
        key = "fixture-captioner"

        def caption(self, images):
            return [f"an image of mean {int(np.asarray(im).mean())}" for im in images]

    class T2I:
        provenance = {"model": "fixture", "revision": "0"}
        calls = 0

        def generate(self, prompts, seeds):
            T2I.calls += len(prompts)
            return [Image.new("RGB", (8, 8), (s % 256, len(p), 0)) for p, s in zip(prompts, seeds)]

    items = synthetic_items()
    out = tmp_path / "pos"
    for i in range(2):
        counts = generate_positives(items, out, captioner=Captioner(), text_to_image=T2I(), shard=(i, 2),
                                    batch_size=3, progress=False)
        assert counts == {"captions": 4, "images": 8, "skipped": 0}
    again = generate_positives(items, out, captioner=Captioner(), text_to_image=T2I(), shard=(0, 2), progress=False)
    assert again == {"captions": 0, "images": 0, "skipped": 12} and T2I.calls == 16
    pos = read_positives(out)
    assert len(pos.captions) == 8 and len(pos.images) == 16 and len(pos.hashes) == 2
    prov = json.loads((out / "provenance-001-of-002.json").read_text())
    assert prov["text_to_image"]["model"] == "fixture" and prov["shard"] == "1/2"


def test_diffusers_missing_is_a_clear_error(monkeypatch):
    import sys

    from capeval.errors import MissingDependencyError
    from capeval.train.pacs_generate import DiffusersTextToImage

    monkeypatch.setitem(sys.modules, "diffusers", None)  # as if it were not installed
    with pytest.raises(MissingDependencyError, match=r"diffusers.*generate"):
        DiffusersTextToImage()


def test_resume_continues_exactly(tmp_path, positives):
    from safetensors.torch import load_file

    items = synthetic_items()
    pos = read_positives(positives)

    def cfg(name, steps):
        return PacsTrainConfig(batch_size=4, grad_accum=2, max_steps=steps, val_every=100, workers=0, lr=1e-2,
                               output_dir=str(tmp_path / name), device="cpu", accelerate="no")

    train_pacs(cfg("straight", 7), backbone=random_backbone("tiny"), train_data=items, positives=pos, progress=False)
    train_pacs(cfg("split", 3), backbone=random_backbone("tiny"), train_data=items, positives=pos, progress=False)
    with pytest.raises(Exception, match="already holds a training run"):
        train_pacs(cfg("split", 7), backbone=random_backbone("tiny"), train_data=items, positives=pos)
    res = train_pacs(cfg("split", 7), backbone=random_backbone("tiny"), train_data=items, positives=pos,
                     resume=True, progress=False)
    assert res.steps == 7
    a = load_file(str(tmp_path / "straight" / "last.safetensors"))
    b = load_file(str(tmp_path / "split" / "last.safetensors"))
    assert max(float((a[k] - b[k]).abs().max()) for k in a) < 1e-6
    assert max(float(a[k].abs().max()) for k in a if k.endswith("lora_B")) > 0


def test_diffusers_pipeline_end_to_end(tmp_path):
    """A tiny random Stable Diffusion pipeline saved to disk, loaded by name as a real one would be
    (skipped where diffusers is not installed)."""
    pytest.importorskip("diffusers")
    from diffusers import (
        AutoencoderKL,
        DDIMScheduler,
        StableDiffusionPipeline,
        UNet2DConditionModel,
    )
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTokenizer

    from capeval.train.pacs_generate import DiffusersTextToImage, generate_positives

    bb = random_backbone("tiny")
    vocab = write_vocab(tmp_path / "vocab", sorted(bb.tokenizer.ranks, key=bb.tokenizer.ranks.get))
    torch.manual_seed(0)
    unet = UNet2DConditionModel(sample_size=8, in_channels=4, out_channels=4, layers_per_block=1,
                                block_out_channels=(8, 16), down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                                up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), cross_attention_dim=16,
                                attention_head_dim=2, norm_num_groups=4)
    vae = AutoencoderKL(in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",) * 2,
                        up_block_types=("UpDecoderBlock2D",) * 2, block_out_channels=(8, 16), latent_channels=4,
                        norm_num_groups=4, sample_size=16)
    tok = CLIPTokenizer(str(vocab / "vocab.json"), str(vocab / "merges.txt"), model_max_length=77)
    te = CLIPTextModel(CLIPTextConfig(vocab_size=len(tok), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                      num_attention_heads=2, max_position_embeddings=77))
    StableDiffusionPipeline(vae=vae, text_encoder=te, tokenizer=tok, unet=unet, scheduler=DDIMScheduler(),
                            safety_checker=None, feature_extractor=None,
                            requires_safety_checker=False).save_pretrained(tmp_path / "sd")
    # the journal's safety checker is the default: a model without one is refused unless it is off
    with pytest.raises(Exception, match="has no safety checker"):
        DiffusersTextToImage(str(tmp_path / "sd"), steps=2, size=16)
    t2i = DiffusersTextToImage(str(tmp_path / "sd"), steps=2, size=16, safety_checker=False)
    assert t2i.provenance["safety_checker"] is False
    items = synthetic_items()[:2]
    counts = generate_positives(items, tmp_path / "pos", text_to_image=t2i, batch_size=3, progress=False)
    assert counts == {"captions": 0, "images": 4, "skipped": 0}
    prov = json.loads((tmp_path / "pos" / "provenance-000-of-001.json").read_text())
    assert prov["text_to_image"]["safety_checker"] is False
    pos = read_positives(tmp_path / "pos")
    alone = t2i.generate([items[1].captions[1]], [json.loads(
        (tmp_path / "pos" / "positives-000-of-001.jsonl").read_text().splitlines()[-1])["seed"]])[0]
    from PIL import Image

    assert np.array_equal(np.asarray(Image.open(pos.images[(items[1].id, 1)])), np.asarray(alone))
