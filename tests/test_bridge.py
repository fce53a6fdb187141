"""BRIDGE (Sarto et al. 2024): CLIP's embeddings path, templates and masking, psi,
frozen-CLIP gradients, training on synthetic shapes, checkpoints, scoring, CLI, captioner.

Independent references: OpenAI's ``clip/model.py`` (the embeddings path against its token
path), transformers' PIL BLIP image processor (capeval's BLIP preprocessing), per-replica
computation (the batched scorer); the losses are in test_bridge_loss.py. Models are tiny and
random, built here.
"""

from __future__ import annotations

import argparse
import json
import math
import random

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from capeval.errors import InputError, ResourceError  # noqa: E402
from capeval.metrics.bridge import templates as tpl  # noqa: E402
from capeval.metrics.bridge.checkpoint import read_checkpoint, save_checkpoint  # noqa: E402
from capeval.metrics.bridge.mapping import BridgeConfig, BridgeModel, image_features, pseudo_captions  # noqa: E402
from capeval.metrics.bridge.scorer import BridgeScore, bridge_formula  # noqa: E402
from capeval.models.clip.backbone import random_backbone  # noqa: E402
from capeval.train.bridge import BridgeObjective, train_bridge  # noqa: E402
from capeval.train.bridge_config import BridgeTrainConfig  # noqa: E402
from capeval.train.bridge_data import ImageTemplates, StepBuilder  # noqa: E402
from capeval.train.coco import CaptionedImage  # noqa: E402
from _reference import SHARED_DATA, unavailable  # noqa: E402

SAMPLES = SHARED_DATA / "samples" / "clipscore_example"
COLORS = {"red": (220, 30, 30), "green": (30, 180, 60), "blue": (40, 60, 220), "yellow": (230, 210, 40)}


@pytest.fixture(scope="module")
def tiny():
    return random_backbone("tiny", seed=0)


@pytest.fixture(scope="module")
def nlp():
    try:
        return tpl.load_spacy()
    except Exception as exc:  # MissingDependencyError, or spaCy itself missing
        unavailable(f"spaCy + en_core_web_sm (capeval[spice]) are needed for noun chunks: {exc}")


def shape_image(color: str, shape: str, background: tuple[int, int, int]) -> np.ndarray:
    from PIL import Image, ImageDraw

    im = Image.new("RGB", (64, 64), background)
    draw = ImageDraw.Draw(im)
    (draw.ellipse if shape == "circle" else draw.rectangle)((14, 14, 50, 50), fill=COLORS[color])
    return np.asarray(im)


def shapes_dataset() -> tuple[list[CaptionedImage], dict[str, str]]:
    """8 images with known captions, and template captions phrased differently (a caption file)."""
    items, templates = [], {}
    for k, (color, shape) in enumerate((c, s) for c in COLORS for s in ("circle", "square")):
        bg, bg_name = ((250, 250, 250), "white") if shape == "circle" else ((10, 10, 10), "black")
        items.append(CaptionedImage(f"img{k}", shape_image(color, shape, bg),
                                    (f"a {color} {shape} on a {bg_name} background",)))
        templates[f"img{k}"] = f"a {color} {shape} in front of a {bg_name} wall"
    return items, templates


# -- CLIP's embeddings path -------------------------------------------------------------

def test_embeddings_path_equals_token_path(tiny):
    model = tiny.model
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(1, model.config.vocab_size, (4, 11), generator=gen)
    eot = torch.tensor([10, 3, 7, 1])
    embeds = model.token_embedding(ids).detach().requires_grad_(True)
    out = model.encode_text_embeddings(embeds, eot)
    assert torch.equal(out, model.encode_text(ids, eot))  # same ops in the same order: bit for bit
    out.sum().backward()
    assert embeds.grad is not None and embeds.grad[0, :11].abs().sum() > 0
    assert embeds.grad[1, 4:].abs().sum() == 0  # causal: positions after a row's EOT do not matter


def test_embeddings_path_matches_openai_model():
    from _upstream import clip_model_module

    from capeval.models.clip.model import build_model, clean_state_dict, infer_config

    openai = clip_model_module()
    torch.manual_seed(0)
    ref = openai.CLIP(embed_dim=32, image_resolution=32, vision_layers=1, vision_width=64, vision_patch_size=16,
                      context_length=77, vocab_size=500, transformer_width=128, transformer_heads=2,
                      transformer_layers=2).float().eval()
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, p in ref.named_parameters():
            if name != "logit_scale":
                p.add_(torch.randn(p.shape, generator=gen) * (0.02 if p.dim() > 1 else 0.05))
    state = clean_state_dict(ref.state_dict())
    ours = build_model(infer_config(state), state)
    rows = [[498, 5, 17, 300, 499], [498, 42, 499], [498, *range(1, 70), 499]]  # 499 = highest id = EOT (argmax)
    tokens = torch.zeros(len(rows), 77, dtype=torch.long)
    for i, r in enumerate(rows):
        tokens[i, : len(r)] = torch.tensor(r)
    n = max(len(r) for r in rows)
    eot = torch.tensor([len(r) - 1 for r in rows])
    with torch.no_grad():
        expected = ref.encode_text(tokens)
        got = ours.encode_text_embeddings(ours.token_embedding(tokens[:, :n]), eot)
    assert (got - expected).abs().max().item() < 1e-5


# -- templates, replicas, padding -------------------------------------------------------

def test_noun_chunk_rules_follow_the_papers_example(nlp):
    caption = "A man running with a white dog"
    chunks = tpl.noun_chunks([caption], nlp)[0]
    assert [c.text for c in chunks] == ["man", "white dog"]
    reps = tpl.make_replicas(caption, chunks, random_backbone("tiny").tokenizer)
    assert [r.text for r in reps] == ["A [MASK] running with a white dog", "A man running with a [MASK]"]
    assert [c.text for c in tpl.noun_chunks(["a man's hat on his head next to it"], nlp)[0]] == ["man's hat", "head"]
    assert tpl.noun_chunks(["it is raining"], nlp)[0] == []
    assert [c.text for c in tpl.noun_chunks(["two cats sleeping on a couch"], nlp)[0]] == ["two cats", "couch"]
    for caption in ("a cat in front of a door", "a cat on top of a door", "a cat in the middle of a door"):
        assert [c.text for c in tpl.noun_chunks([caption], nlp)[0]] == ["cat", "door"], caption
    assert [c.text for c in tpl.noun_chunks(["the front of a red bus"], nlp)[0]] == ["front", "red bus"]


@pytest.mark.parametrize("us", [1, 2, 3, 4, 8])
def test_replica_ids_and_mask_slots(tiny, us):
    tok = tiny.tokenizer
    for caption, spans in (("A man running with a white dog", [(2, 5), (21, 30)]),
                           ("Two cats, sleeping by a dog's bone.", [(0, 8), (24, 34)])):
        chunks = [tpl.Chunk(s, e, caption[s:e]) for s, e in spans]
        # CLIP's pre-tokeniser splits at chunk boundaries: the pieces tokenise like the whole caption
        for ch in chunks:
            pieces = tok.encode(caption[: ch.start]) + tok.encode(ch.text) + tok.encode(caption[ch.end:])
            assert pieces == tok.encode(caption)
        reps = tpl.make_replicas(caption, chunks, tok, us)
        assert len(reps) == len(chunks)  # one replica per chunk
        for r, ch in zip(reps, chunks):
            prefix, suffix = tok.encode(caption[: ch.start]), tok.encode(caption[ch.end:])
            assert list(r.ids) == [tok.sot_id, *prefix, *[tpl.SLOT_ID] * us, *suffix, tok.eot_id]
            assert list(r.slots) == list(range(1 + len(prefix), 1 + len(prefix) + us))
            assert r.chunk == ch.text and "[MASK]" in r.text and ch.text not in r.text.replace("[MASK]", "")


def test_truncation_and_prompt_replica(tiny):
    tok = tiny.tokenizer
    caption = "a dog " + "and a cat " * 40
    (r,) = tpl.make_replicas(caption, [tpl.Chunk(2, 5, "dog")], tok, 3)
    assert len(r.ids) == 77 and r.ids[-1] == tok.eot_id and list(r.slots) == [2, 3, 4]
    late = caption.rindex("cat")
    assert tpl.make_replicas(caption, [tpl.Chunk(late, late + 3, "cat")], tok, 3) == []  # slots past the context
    p = tpl.prompt_replica(tok, 3)
    assert p.text == "a photo of [MASK]" and list(p.ids[-4:]) == [0, 0, 0, tok.eot_id]


def test_pack_pads_and_marks_positions(tiny):
    tok = tiny.tokenizer
    caption = "a red circle on a white background"
    reps = tpl.make_replicas(caption, [tpl.Chunk(2, 12, "red circle"), tpl.Chunk(18, 34, "white background")], tok, 3)
    reps.append(tpl.prompt_replica(tok, 2))
    batch = tpl.pack(reps, [0, 0, 1])
    lengths = [len(r.ids) for r in reps]
    assert batch.ids.shape == (3, max(lengths)) and batch.owner.tolist() == [0, 0, 1]
    assert batch.valid.sum(1).tolist() == lengths and batch.eot.tolist() == [n - 1 for n in lengths]
    assert batch.slots.sum(1).tolist() == [3, 3, 2]
    for k, r in enumerate(reps):
        assert batch.slots[k].nonzero().flatten().tolist() == list(r.slots)
        assert batch.ids[k, len(r.ids):].eq(0).all() and batch.ids[k, r.ids.index(tok.eot_id)] == tok.eot_id
    assert batch.chunks == ["red circle", "white background", ""]


# -- the mapping module --------------------------------------------------------------------

@pytest.mark.parametrize("mapping,template,grid", [("transformer", "caption", "projected"),
                                                    ("transformer", "caption", "tokens"),
                                                    ("transformer", "none", "projected"), ("mlp", "none", "projected")])
def test_mapping_fills_only_the_slots(tiny, mapping, template, grid):
    clip = tiny.model
    cfg = BridgeConfig.for_clip(clip.config, mapping=mapping, template=template, grid=grid, dropout=0.0)
    model = BridgeModel(cfg).eval()
    tok = tiny.tokenizer
    long_rep = tpl.make_replicas("a black dog wearing a red hat looks at the camera", [tpl.Chunk(2, 11, "black dog")],
                                 tok, cfg.us)[0]
    short_rep = tpl.prompt_replica(tok, cfg.us)
    batch = tpl.pack([short_rep, long_rep, short_rep], [0, 0, 1])
    px = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        g, v = image_features(clip, px, grid)
        assert g.shape == (2, 17, cfg.grid_dim) and torch.allclose(v, clip.encode_image(px), atol=1e-6)
        embeds = clip.token_embedding(batch.ids)
        filled = model.mapping(embeds, batch.slots, batch.valid, g[batch.owner])
        assert filled.shape == embeds.shape
        assert torch.equal(filled[~batch.slots], embeds[~batch.slots])  # words untouched
        assert not torch.allclose(filled[0][batch.slots[0]], filled[2][batch.slots[2]])  # depends on the image
        feats = pseudo_captions(clip, model.mapping, batch, g)
        alone = pseudo_captions(clip, model.mapping, tpl.pack([short_rep], [0]), g)
    assert feats.shape == (3, cfg.embed_dim)
    assert (feats[0] - alone[0]).abs().max() < 1e-5  # padding to a longer replica changes nothing


# -- gradients reach only psi and the regulariser -----------------------------------------

def test_gradients_reach_only_mapping_and_regularizer(tiny, nlp):
    items, templates = shapes_dataset()
    texts = [templates[it.id] for it in items]
    tpls = [ImageTemplates([t], [c]) for t, c in zip(texts, tpl.noun_chunks(texts, nlp))]
    cfg = BridgeTrainConfig(dropout=0.0)
    clip = random_backbone("tiny", seed=0).model  # a copy: the test changes nothing shared
    model = BridgeModel(cfg.model_config(clip.config))
    objective = BridgeObjective(clip, model, cfg)
    before = {k: v.clone() for k, v in clip.state_dict().items()}
    builder = StepBuilder(items, tpls, tiny.tokenizer, 3, "caption", cfg.prompt, 2, False)
    batch = builder.build(list(range(8)), random.Random(0))
    px = torch.stack([tiny.load_image(it.image) for it in items])
    out = objective(px, batch)
    assert all(torch.isfinite(out[k]) for k in ("loss", "l1", "l2", "l3"))
    out["loss"].backward()
    assert not any(p.requires_grad for p in clip.parameters())
    assert all(p.grad is None for p in clip.parameters())
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name
    torch.optim.AdamW(model.parameters(), lr=1e-3).step()
    assert all(torch.equal(before[k], v) for k, v in clip.state_dict().items())


def test_reference_templates_draw_a_caption_with_chunks(tiny, nlp):
    """A drawn caption without a maskable chunk (spaCy finds none in 'a square painted blue') would
    leave its image without pseudo-captions (N_i = 0): another caption of that image is drawn."""
    colors = ("red", "green", "blue")
    items = [CaptionedImage(f"i{k}", np.zeros((8, 8, 3), np.uint8),
                            (f"a square painted {c}", f"A {c} square on a white background.")) for k, c in enumerate(colors)]
    tpls = [ImageTemplates(list(it.captions), tpl.noun_chunks(list(it.captions), nlp)) for it in items]
    assert all(t.chunks[0] == [] and len(t.chunks[1]) == 2 for t in tpls)
    builder = StepBuilder(items, tpls, tiny.tokenizer, 3, "caption", "A photo depicts ", 2, True)
    rng = random.Random(0)
    for _ in range(10):
        batch = builder.build([0, 1, 2], rng)
        assert batch.replicas.owner.tolist() == [0, 0, 1, 1, 2, 2]
        assert set(batch.replicas.chunks) == {f"{c} square" for c in colors} | {"white background"}


def test_one_image_batches_are_left_out_and_one_image_splits_refused(tiny, nlp, tmp_path):
    items, templates = shapes_dataset()
    (tmp_path / "t.json").write_text(json.dumps(templates))
    base = dict(templates=str(tmp_path / "t.json"), batch_size=4, max_epochs=1, workers=0, device="cpu",
                accelerate="no")
    result = train_bridge(BridgeTrainConfig(output_dir=str(tmp_path / "a"), **base), backbone=tiny,
                          train_data=items[:5], val_data=items[:5], progress=False)  # batches of 4 and 1
    assert result.steps == 1 and math.isfinite(result.best_val)
    with pytest.raises(InputError, match="the train split needs at least 2 images"):
        train_bridge(BridgeTrainConfig(output_dir=str(tmp_path / "b"), **base), backbone=tiny, train_data=items[:1],
                     progress=False)


# -- training end to end on synthetic shapes, export -> reload -> identical scores ----------

@pytest.fixture(scope="module")
def trained(tiny, nlp, tmp_path_factory):
    items, templates = shapes_dataset()
    root = tmp_path_factory.mktemp("bridge")
    (root / "templates.json").write_text(json.dumps(templates))
    cfg = BridgeTrainConfig(output_dir=str(root / "run"), templates=str(root / "templates.json"), batch_size=8,
                            max_epochs=80, lr=3e-3, dropout=0.0, workers=0, log_every=1, patience=0,
                            device="cpu", accelerate="no")
    result = train_bridge(cfg, backbone=tiny, train_data=items, val_data=items, progress=False)
    return items, root, result


@pytest.mark.slow
def test_training_loss_falls_and_overfits(trained, tiny):
    items, root, result = trained
    first, last = result.history[0], result.history[-1]
    assert result.epochs == 80 and result.steps == 80 and result.stopped == "max_epochs"
    assert last["train_loss"] < 0.25 * first["train_loss"] and last["train_l2"] < 0.5
    from capeval.train.logging import read_log

    rows = read_log(result.run_dir / "metrics.csv")
    assert len([r for r in rows if r["phase"] == "train"]) == 80 and {"l1", "l2", "l3", "time"} <= set(rows[0])
    # overfitted: the images' t* are closest to their own captions among the 8 (untrained: 1 of 8). Not
    # all 8: the tiny random CLIP embeds 'green circle' and 'yellow circle' captions almost alike, and
    # Eq. 5/6 (no positive in the denominators, unbounded below) keeps widening the margins of the
    # images it already separates (seeds 0-3: 7 of 8; at seed 0 these 7 lead by >= 0.1 in score units)
    scorer = BridgeScore(checkpoint=str(result.best), backbone=tiny, templates=root / "templates.json",
                         similarity="textual")
    images = {it.id: it.image for it in items}
    table = np.array([[scorer.score({i: cand.captions[0]}, images=images)["bridge"].items[i] for cand in items]
                      for i in images])
    assert (table.argmax(axis=1) == np.arange(len(items))).sum() >= 7
    meta = read_checkpoint(result.best).meta
    assert meta["train"]["config"]["lr"] == 3e-3 and meta["capeval_version"]
    assert meta["train"]["config"]["loss_weighting"] == "paper"


@pytest.mark.slow
def test_export_reload_gives_identical_scores_and_resume_continues(trained, tiny, tmp_path):
    items, root, result = trained
    images = {it.id: it.image for it in items}
    cands = {it.id: items[(k + 1) % len(items)].captions[0] for k, it in enumerate(items)}
    a = BridgeScore(checkpoint=str(result.best), backbone=tiny, templates=root / "templates.json").score(cands, images=images)
    ckpt = read_checkpoint(result.best)
    copy = save_checkpoint(tmp_path / "exported.safetensors", ckpt.build(), tiny, ckpt.meta["train"])
    b = BridgeScore(checkpoint=str(copy), backbone=tiny, templates=root / "templates.json").score(cands, images=images)
    assert dict(a["bridge"].items) == dict(b["bridge"].items)
    assert all(0 <= s <= 2.5 for s in a["bridge"].items.values())
    cfg = BridgeTrainConfig(**{**json.loads(json.dumps(ckpt.meta["train"]["config"])), "max_epochs": 82})
    again = train_bridge(cfg, backbone=tiny, train_data=items, val_data=items, resume=True, progress=False)
    assert again.epochs == 82 and again.steps == 82 and len(again.history) == 82
    with pytest.raises(InputError, match="resume"):
        train_bridge(cfg, backbone=tiny, train_data=items, val_data=items, progress=False)


# -- scoring the shared samples with tiny random models -------------------------------------

@pytest.fixture(scope="module")
def samples():
    if not SAMPLES.is_dir():
        unavailable(f"CLIPScore example samples not found: {SAMPLES}")
    return tuple(json.loads((SAMPLES / f"{n}.json").read_text()) for n in ("good_captions", "bad_captions", "refs"))


@pytest.fixture(scope="module")
def random_checkpoint(tiny, tmp_path_factory):
    torch.manual_seed(0)
    model = BridgeModel(BridgeConfig.for_clip(tiny.model.config))
    return save_checkpoint(tmp_path_factory.mktemp("ckpt") / "random.safetensors", model, tiny, {"note": "random"})


def test_scoring_samples_end_to_end_matches_per_replica_computation(tiny, nlp, samples, random_checkpoint, tmp_path):
    good, bad, refs = samples
    tfile = tmp_path / "templates.json"
    tfile.write_text(json.dumps({i: r[1] for i, r in refs.items()}))  # a reference as each image's template
    scorer = BridgeScore(checkpoint=str(random_checkpoint), backbone=tiny, templates=tfile)
    rep = scorer.score(good, images=SAMPLES / "images")["bridge"]
    assert list(rep.items) == list(good) and rep.extras["images_without_chunks"] == 0
    assert "checkpoint_sha256:" in str(rep.signature) and "w:2.5" in str(rep.signature)
    model = read_checkpoint(random_checkpoint).build()
    for i, cand in good.items():
        template = refs[i][1]
        chunks = tpl.noun_chunks([template], nlp)[0]
        assert rep.extras["pseudo_captions"][i] == len(chunks) > 0
        with torch.no_grad():
            px = tiny.load_image(SAMPLES / "images" / f"{i}.jpg")[None]
            grid, v = image_features(tiny.model, px, "projected")
            feats = [pseudo_captions(tiny.model, model.mapping, tpl.pack([r], [0]), grid)[0]
                     for r in tpl.make_replicas(template, chunks, tiny.tokenizer, 3)]  # one replica at a time
            t_star = torch.stack([f / f.norm() for f in feats]).mean(0)
            t = tiny.encode_texts(tiny.tokenize(["A photo depicts " + cand])[0])[0]
        cos = lambda a, b: float(a @ b / (a.norm() * b.norm()))  # noqa: E731
        expected = 0.5 * (2.5 * max(cos(v[0], t), 0) + 2.5 * max(cos(t_star, t), 0))
        assert rep.items[i] == pytest.approx(expected, abs=1e-5)
        assert rep.extras["clip-s"][i] == pytest.approx(2.5 * max(cos(v[0], t), 0), abs=1e-5)
    visual = BridgeScore(checkpoint=str(random_checkpoint), backbone=tiny, templates=tfile, similarity="visual")
    assert dict(visual.score(bad, images=SAMPLES / "images")["bridge"].items) == pytest.approx(
        dict(scorer.score(bad, images=SAMPLES / "images")["bridge"].extras["clip-s"]), abs=1e-6)


def test_formula_constants():
    cos_v, cos_p = np.array([0.3, -0.2, 0.5, -0.1]), np.array([0.6, 0.4, -0.3, -0.5])
    want = 0.5 * (2.5 * np.maximum(cos_v, 0) + 2.5 * np.maximum(cos_p, 0))
    assert np.allclose(bridge_formula(cos_v, cos_p), want)
    assert np.allclose(bridge_formula(cos_v, cos_p, 2.0, "visual"), 2.0 * np.maximum(cos_v, 0))
    assert np.allclose(bridge_formula(cos_v, cos_p, 2.0, "textual"), 2.0 * np.maximum(cos_p, 0))


def test_bad_items_and_options(tiny, random_checkpoint, samples, tmp_path):
    good, _, refs = samples
    tfile = tmp_path / "t.json"
    tfile.write_text(json.dumps({"image1": refs["image1"][0]}))  # image2 has no template
    scorer = BridgeScore(checkpoint=str(random_checkpoint), backbone=tiny, templates=tfile)
    with pytest.raises(InputError, match="image2.*no template caption"):
        scorer.score(good, images=SAMPLES / "images")
    rep = scorer.score(good, images=SAMPLES / "images", skip_bad_items=True)["bridge"]
    assert list(rep.items) == ["image1"] and rep.skipped == ("image2",)
    with pytest.raises(InputError, match="similarity"):
        BridgeScore(checkpoint=str(random_checkpoint), backbone=tiny, similarity="both-ways")
    with pytest.raises(ResourceError, match="needs trained weights"):
        BridgeScore(backbone=tiny)
    with pytest.raises(ResourceError, match="trained on random/tiny.*sha256"):
        BridgeScore(checkpoint=str(random_checkpoint), backbone=random_backbone("tiny", seed=1))


def test_registered_metric_runs_through_capeval_score(tiny, random_checkpoint, samples, tmp_path, monkeypatch):
    import capeval
    from capeval import registry

    monkeypatch.setattr(registry, "_METRICS", dict(registry._METRICS))
    monkeypatch.setattr(registry, "_ALIASES", dict(registry._ALIASES))
    registry.register(BRIDGE_SPEC())
    good, _, refs = samples
    tfile = tmp_path / "t.json"
    tfile.write_text(json.dumps({i: r[0] for i, r in refs.items()}))
    report = capeval.score(good, metrics="bridge", images=SAMPLES / "images",
                           options={"bridge": {"checkpoint": str(random_checkpoint), "backbone": tiny, "templates": str(tfile)}})
    direct = BridgeScore(checkpoint=str(random_checkpoint), backbone=tiny, templates=tfile).score(good, images=SAMPLES / "images")
    assert dict(report["bridge"].items) == dict(direct["bridge"].items)


def BRIDGE_SPEC():
    """The registry's entry for bridge (re-registering it is harmless)."""
    from capeval import registry

    spec = registry.get("bridge")
    assert spec.factory == "capeval.metrics.bridge.scorer:BridgeScore" and spec.needs == frozenset({"images"})
    return spec


# -- template captions from a captioner (tiny random BLIP), cached ---------------------------

def _tiny_blip(folder):
    transformers = pytest.importorskip("transformers")
    words = "a picture of the dog cat man woman red blue white black ball grass on in with and sitting".split()
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[DEC]", *words]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tok = transformers.BertTokenizer(str(folder / "vocab.txt"), bos_token="[DEC]")
    cfg = transformers.BlipConfig(
        text_config=dict(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, encoder_hidden_size=32, bos_token_id=5, sep_token_id=3,
                         pad_token_id=0, eos_token_id=3, max_position_embeddings=64),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                           image_size=32, patch_size=16), projection_dim=16)
    torch.manual_seed(0)
    transformers.BlipForConditionalGeneration(cfg).eval().save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def test_captioner_templates_are_cached_per_image_and_captioner(tiny, nlp, random_checkpoint, samples, tmp_path):
    from capeval.train.captioner import load_captioner

    good, _, _ = samples
    captioner = load_captioner(_tiny_blip(tmp_path / "blip"))
    calls = []
    real = captioner.caption
    captioner.caption = lambda images: calls.append(len(images)) or real(images)
    cache = tmp_path / "cache"
    first = BridgeScore(checkpoint=str(random_checkpoint), backbone=tiny, captioner=captioner, caption_cache=cache)
    a = first.score(good, images=SAMPLES / "images")["bridge"]
    assert calls == [2] and len(list(cache.rglob("*.txt"))) == 2
    assert set(a.extras["templates"]) == set(good) and not a.extras["templates"]["image1"].startswith("a picture of")
    b = BridgeScore(checkpoint=str(random_checkpoint), backbone=tiny, captioner=captioner,
                    caption_cache=cache).score(good, images=SAMPLES / "images")["bridge"]
    assert calls == [2] and dict(a.items) == dict(b.items)  # second run: every template from the cache
    assert "captioner:" in str(a.signature)


def test_blip_preprocessing_equals_the_documented_processor():
    pytest.importorskip("transformers")
    from PIL import Image
    from transformers.image_utils import OPENAI_CLIP_MEAN, OPENAI_CLIP_STD, PILImageResampling
    from transformers.models.blip.image_processing_pil_blip import BlipImageProcessorPil

    from capeval.train.captioner import BLIP_MEAN, BLIP_SIZE, BLIP_STD, blip_preprocess

    proc = BlipImageProcessorPil()
    assert (BLIP_SIZE, BLIP_MEAN, BLIP_STD) == (384, (0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711))
    assert tuple(OPENAI_CLIP_MEAN) == BLIP_MEAN and tuple(OPENAI_CLIP_STD) == BLIP_STD
    assert proc.size == {"height": 384, "width": 384} and proc.resample == PILImageResampling.BICUBIC
    assert tuple(proc.image_mean) == BLIP_MEAN and tuple(proc.image_std) == BLIP_STD
    rng = np.random.default_rng(0)
    images = [Image.fromarray(rng.integers(0, 256, (50, 70, 3), dtype=np.uint8)),
              Image.fromarray(rng.integers(0, 256, (401, 390, 4), dtype=np.uint8), "RGBA"),
              Image.fromarray(rng.integers(0, 256, (30, 90), dtype=np.uint8), "L")]
    if SAMPLES.is_dir():
        images.append(Image.open(SAMPLES / "images" / "image1.jpg"))
    for im in images:
        ours = blip_preprocess(im)
        ref = proc(im, return_tensors="np")["pixel_values"][0]
        assert ours.shape == ref.shape == (3, 384, 384) and np.abs(ours - ref).max() < 1e-5


# -- broken checkpoints ------------------------------------------------------------------

def test_broken_checkpoints_are_one_line_resource_errors(tiny, random_checkpoint, tmp_path):
    from safetensors.torch import save_file

    good = random_checkpoint.read_bytes()
    cases = {
        "missing.safetensors": None,
        "empty.safetensors": b"",
        "page.safetensors": b"<!DOCTYPE html><html><title>Sign in</title></html>",
        "truncated.safetensors": good[: len(good) // 2],
        "noise.safetensors": bytes(range(256)) * 8,
    }
    for name, data in cases.items():
        if data is not None:
            (tmp_path / name).write_bytes(data)
    save_file({"x": torch.zeros(2)}, str(tmp_path / "plain.safetensors"))
    ckpt = read_checkpoint(random_checkpoint)
    save_checkpoint(tmp_path / "wrong.safetensors", BridgeModel(ckpt.config.replace(us=4)), tiny)
    raw = (tmp_path / "wrong.safetensors").read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = raw[8: 8 + n].replace(b'\\"us\\": 4', b'\\"us\\": 3')  # metadata says 3 slots, tensors hold 4
    (tmp_path / "mismatch.safetensors").write_bytes(raw[:8] + header + raw[8 + n:])
    expect = {"missing": "not found", "empty": "empty", "page": "HTML", "truncated": "truncated or corrupt",
              "noise": "not a safetensors", "plain": "not a capeval BRIDGE checkpoint", "mismatch": "does not fit"}
    for stem, words in expect.items():
        path = tmp_path / f"{stem}.safetensors"
        with pytest.raises(ResourceError) as info:
            BridgeScore(checkpoint=str(path), backbone=tiny)
        message = str(info.value)
        assert words in message and str(path) in message and "\n" not in message, (stem, message)
    with pytest.raises(ResourceError, match="is a directory"):
        read_checkpoint(tmp_path)


# -- configs, COCO, CLI ------------------------------------------------------------------

def test_yaml_config_errors_name_file_and_key(tmp_path):
    from capeval.train.config import load_config

    path = tmp_path / "c.yaml"
    path.write_text("lr: 1e-4\nbatch_size: 16\nus: 2\n")
    cfg = load_config(BridgeTrainConfig, path)
    assert cfg.lr == 1e-4 and isinstance(cfg.lr, float) and cfg.batch_size == 16 and cfg.us == 2
    path.write_text("learning_rate: 1e-4\n")
    with pytest.raises(InputError, match=r"c\.yaml.*unknown setting learning_rate"):
        load_config(BridgeTrainConfig, path)
    path.write_text("batch_size: many\n")
    with pytest.raises(InputError, match="batch_size='many' should be int"):
        load_config(BridgeTrainConfig, path)
    path.write_text("mapping: mlp\n")
    with pytest.raises(InputError, match="template='none'"):
        load_config(BridgeTrainConfig, path)
    path.write_text("lr: [1\n")
    with pytest.raises(InputError, match="not valid YAML"):
        load_config(BridgeTrainConfig, path)


def _mini_coco(root):
    from PIL import Image

    images = []
    for k, (color, shape) in enumerate((c, s) for c in COLORS for s in ("circle", "square")):
        split = "val" if k >= 6 else "train" if k % 2 else "restval"
        folder = "val2014" if split == "val" else "train2014"
        name = f"COCO_{folder}_{k:012d}.jpg"
        (root / folder).mkdir(parents=True, exist_ok=True)
        Image.fromarray(shape_image(color, shape, (250, 250, 250))).save(root / folder / name, quality=95)
        images.append({"filepath": folder, "filename": name, "cocoid": 1000 + k, "split": split, "sentences": [
            {"raw": f"A {color} {shape} on a white background."}, {"raw": f"a {shape} painted {color}"}]})
    (root / "dataset_coco.json").write_text(json.dumps({"images": images, "dataset": "coco"}))


def test_cli_trains_from_coco_resumes_and_scores(tiny, nlp, samples, tmp_path, monkeypatch, capsys):
    from capeval import registry
    from capeval.cli import train as train_cli
    from capeval.cli.main import main
    from capeval.models.clip.tokenizer import write_vocab
    from capeval.train.coco import load_karpathy

    _mini_coco(tmp_path / "coco")
    assert [len(load_karpathy(tmp_path / "coco", s)) for s in ("train", "val", "test")[:2]] == [6, 2]
    with pytest.raises(InputError, match="no image in split 'test'"):
        load_karpathy(tmp_path / "coco", "test")
    clip_file = tmp_path / "tiny_clip.pth"
    torch.save(tiny.model.state_dict(), clip_file)
    monkeypatch.setenv("CAPEVAL_CLIP_VOCAB", str(write_vocab(tmp_path / "vocab", tiny.tokenizer.merges)))
    config = tmp_path / "bridge.yaml"
    config.write_text(f"coco_root: {tmp_path / 'coco'}\nbackbone: {clip_file}\ntemplates: reference\n"
                      f"batch_size: 4\nmax_epochs: 2\nworkers: 0\ndevice: cpu\naccelerate: 'no'\nlog_every: 1\n")
    parser = argparse.ArgumentParser(prog="capeval")
    train_cli.add_parser(parser.add_subparsers(dest="command"))
    run = tmp_path / "run"

    def cli(*argv):
        args = parser.parse_args(["train", "bridge", "--config", str(config), "-o", str(run), "-q", *argv])
        return args.func(args)

    assert cli("--print-config") == 0 and "templates: reference" in capsys.readouterr().out
    assert cli() == 0
    first = json.loads(capsys.readouterr().out)
    assert first["epochs"] == 2 and first["steps"] == 4 and first["best"]
    assert cli("--resume", "--set", "max_epochs=3") == 0
    assert json.loads(capsys.readouterr().out)["epochs"] == 3
    assert read_checkpoint(first["last"]).backbone == str(clip_file)
    monkeypatch.setattr(registry, "_METRICS", dict(registry._METRICS))
    registry.register(BRIDGE_SPEC())
    good, _, refs = samples
    tfile = tmp_path / "templates.json"
    tfile.write_text(json.dumps({i: r[0] for i, r in refs.items()}))
    code = main(["score", "-q", "-m", "bridge", "-O", f"bridge.checkpoint={first['best']}", "-O",
                 f"bridge.templates={tfile}", "--images", str(SAMPLES / "images"),
                 "--candidates", str(SAMPLES / "good_captions.json")])
    out = capsys.readouterr()
    assert code == 0, out.err
    payload = json.loads(out.out)
    assert payload["results"][0]["n"] == len(good) and 0 <= payload["scores"]["bridge"] <= 2.5
    assert "checkpoint:best.safetensors" in payload["signatures"]["bridge"]


@pytest.mark.parametrize("settings", [dict(mapping="mlp", template="none"), dict(template="none", us=1),
                                      dict(us=8, lambda3=0.0)])
def test_ablations_train_and_score(tiny, nlp, settings, tmp_path):
    items, templates = shapes_dataset()
    (tmp_path / "t.json").write_text(json.dumps(templates))
    cfg = BridgeTrainConfig(output_dir=str(tmp_path / "run"), templates=str(tmp_path / "t.json"), batch_size=4,
                            max_epochs=1, workers=0, device="cpu", accelerate="no", **settings)
    result = train_bridge(cfg, backbone=tiny, train_data=items, val_data=items[:4], progress=False)
    assert result.steps == 2 and math.isfinite(result.best_val)
    scorer = BridgeScore(checkpoint=str(result.best), backbone=tiny, templates=tmp_path / "t.json")
    rep = scorer.score({it.id: it.captions[0] for it in items[:3]}, images={it.id: it.image for it in items[:3]})
    expected_reps = 1 if settings.get("template") == "none" else 2
    assert set(rep["bridge"].extras["pseudo_captions"].values()) == {expected_reps}


def test_accelerate_loop_runs_on_cpu(tiny, nlp, tmp_path):
    pytest.importorskip("accelerate")
    items, templates = shapes_dataset()
    (tmp_path / "t.json").write_text(json.dumps(templates))
    cfg = BridgeTrainConfig(output_dir=str(tmp_path / "run"), templates=str(tmp_path / "t.json"), batch_size=4,
                            max_epochs=2, workers=0, device="cpu", accelerate="yes", log_every=1)
    result = train_bridge(cfg, backbone=tiny, train_data=items, val_data=items[:4], progress=False)
    assert result.steps == 4 and result.epochs == 2 and result.best is not None
    assert all(math.isfinite(h["val_loss"]) and math.isfinite(h["train_loss"]) for h in result.history)
    with pytest.raises(InputError, match="fp16 needs accelerate"):
        train_bridge(BridgeTrainConfig(output_dir=str(tmp_path / "r2"), mixed_precision="fp16", accelerate="no"),
                     backbone=tiny, train_data=items)


def test_early_stopping_and_max_steps(tiny, nlp, tmp_path):
    items, templates = shapes_dataset()
    (tmp_path / "t.json").write_text(json.dumps(templates))
    base = dict(templates=str(tmp_path / "t.json"), batch_size=4, workers=0, device="cpu", accelerate="no")
    stop = train_bridge(BridgeTrainConfig(output_dir=str(tmp_path / "a"), max_epochs=5, patience=1, min_delta=100.0,
                                          **base), backbone=tiny, train_data=items, val_data=items[:4], progress=False)
    assert (stop.stopped, stop.epochs, stop.steps) == ("early_stopping", 2, 4)  # epoch 2 did not beat epoch 1 by 100
    capped = train_bridge(BridgeTrainConfig(output_dir=str(tmp_path / "b"), max_epochs=5, max_steps=3, **base),
                          backbone=tiny, train_data=items, progress=False)
    assert (capped.stopped, capped.epochs, capped.steps, capped.best) == ("max_steps", 2, 3, None)
