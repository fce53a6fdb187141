"""PAC-S / PAC-S++ on SigLIP and SigLIP 2 (PAC-S++ journal Table 8): training changes only the intended
tensors and lowers the loss, resume equals an uninterrupted run, and export -> scoring equals an
independent computation: transformers' own SiglipModel / Siglip2Model with the LoRA factors merged
by hand into its weights, get_text_features / get_image_features, and the score formula written out.

Tiny random models built from configs (no download). The reference runs the same float32 modules
on the same weights; features of unit scale agree to float32 rounding of identical ops, so the
bound 1e-5 holds on any CPU (the formula itself is float64 on both sides).
"""

from __future__ import annotations

import numpy as np
import pytest

tf = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")
pytest.importorskip("PIL")
pytest.importorskip("safetensors")

from bertscore_models import tiny_roberta  # noqa: E402  (a tokenizer to save next to the model)
from test_pacs_train import COLOURS, shape_image  # noqa: E402

from capeval.errors import InputError  # noqa: E402
from capeval.train.coco import CaptionedImage  # noqa: E402
from capeval.train.pacs import PacsObjective, train_pacs  # noqa: E402
from capeval.train.pacs_config import PacsTrainConfig  # noqa: E402
from capeval.train.pacs_data import PacsDataset, Positives, collate  # noqa: E402

PROMPT = "A photo depicts "
_image = shape_image  # the PAC-S training tests' synthetic images


def _items() -> list[CaptionedImage]:
    return [CaptionedImage(f"{c}-{s}", _image(c, s), (f"a {c} {s}", f"the {s} is {c}"))
            for c in COLOURS for s in ("square", "circle")]


def _positives(items) -> Positives:
    caps = {it.id: "a picture of a " + it.id.replace("-", " ") for it in items}
    imgs = {(it.id, j): _image(*it.id.split("-"), jitter=2) for it in items for j in range(len(it.captions))}
    return Positives(None, caps, imgs)


def _build(folder, arch: str, seed: int):
    folder.mkdir(parents=True, exist_ok=True)
    tiny_roberta(folder / "tok")
    tok = tf.AutoTokenizer.from_pretrained(str(folder / "tok"))
    tok.save_pretrained(str(folder))
    torch.manual_seed(seed)
    text = dict(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                max_position_embeddings=64, pad_token_id=tok.pad_token_id, bos_token_id=None, eos_token_id=None)
    vision = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, patch_size=8)
    if arch == "siglip":
        tf.SiglipModel(tf.SiglipConfig(text_config=text, vision_config={**vision, "image_size": 32})
                       ).save_pretrained(str(folder))
        tf.SiglipImageProcessor(size={"height": 32, "width": 32}).save_pretrained(str(folder))
    else:
        tf.Siglip2Model(tf.Siglip2Config(text_config=text, vision_config={**vision, "num_patches": 16})
                        ).save_pretrained(str(folder))
        tf.Siglip2ImageProcessor(patch_size=8, max_num_patches=16).save_pretrained(str(folder))
    return folder


@pytest.fixture(scope="module", params=["siglip", "siglip2"])
def model_dir(request, tmp_path_factory):
    return _build(tmp_path_factory.mktemp(request.param), request.param, 0)


def _cfg(tmp_path, name, mode, steps, **kw):
    return PacsTrainConfig(mode=mode, batch_size=4, grad_accum=2, max_steps=steps, val_every=kw.pop("val_every", 100),
                           workers=0, lr=1e-2, output_dir=str(tmp_path / name), device="cpu", accelerate="no", **kw)


def _train(model_dir, tmp_path, name, mode, steps, resume=False, **kw):
    from capeval.models.clip.siglip import SiglipBackbone

    items = _items()
    return train_pacs(_cfg(tmp_path, name, mode, steps, **kw), backbone=SiglipBackbone(str(model_dir)),
                      train_data=items, val_data=items, positives=_positives(items), resume=resume, progress=False)


@pytest.mark.parametrize("mode", ["pacs", "pacs++"])
def test_steps_change_only_trainable_tensors_and_lower_the_loss(model_dir, mode):
    from capeval.models.clip.siglip import SiglipBackbone

    bb = SiglipBackbone(str(model_dir))
    before = {k: v.clone() for k, v in bb.model.state_dict().items()}
    cfg = PacsTrainConfig(mode=mode, lr=1e-2, device="cpu", accelerate="no", workers=0)
    obj = PacsObjective(bb.model, bb.tokenizer, cfg)
    items = _items()
    data = PacsDataset(items, _positives(items), bb.preprocess, True, True)
    batch = collate([data[k] for k in range(len(items))])
    params = [p for p in obj.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-2)
    losses = []
    for _ in range(8):
        out = obj(batch)
        losses.append(float(out["loss"].detach()))
        out["loss"].backward()
        opt.step()
        opt.zero_grad()
    assert losses[-1] < losses[0] and all(float(out[k].detach()) > 0 for k in ("l_vt", "l_gv_t", "l_v_gt"))
    names = {n for n, p in obj.clip.model.named_parameters() if p.requires_grad}
    if mode == "pacs":
        assert names and all(n.startswith(("text_model.head.", "vision_model.head.")) for n in names)
    else:  # LoRA factors of q/k/v, out_proj, fc1/fc2 in both towers' layers, and the patch embedding
        assert names and all(".lora_" in n for n in names)
        assert len([n for n in names if n.endswith("lora_A")]) == 2 * 2 * 6 + 1
    # the frozen tensors did not move (LoRA targets keep their original under parametrizations)
    after = {k.replace("parametrizations.", "").replace(".original", ""): v for k, v in obj.clip.model.state_dict().items()
             if ".lora_" not in k}
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    if mode == "pacs":
        assert changed and all(k.startswith(("text_model.head.", "vision_model.head.")) for k in changed)
    else:
        assert not changed


def _reference_scores(folder, ckpt, arch, cands, refs, images, w):
    """transformers' model, LoRA merged by hand, features, then w*max(cos,0) and the harmonic mean."""
    from safetensors import safe_open
    from safetensors.torch import load_file

    model = (tf.SiglipModel if arch == "siglip" else tf.Siglip2Model).from_pretrained(str(folder)).eval()
    tok = tf.AutoTokenizer.from_pretrained(str(folder))
    proc = tf.AutoImageProcessor.from_pretrained(str(folder))
    with safe_open(str(ckpt), "pt") as f:
        import json

        scaling = json.loads(f.metadata()["lora_scaling"])
    state = load_file(str(ckpt))
    sd = model.state_dict()
    with torch.no_grad():
        for k, v in state.items():
            if k.endswith("lora_A"):
                stem = k[: -len("lora_A")]
                wgt = sd[stem + "weight"]
                wgt.copy_(wgt + (state[stem + "lora_B"] @ v).view(wgt.shape) * scaling)
            elif not k.endswith("lora_B"):
                sd[k].copy_(v)
        ids = list(cands)
        t = model.get_text_features(**tok([PROMPT + cands[i] for i in ids], padding="max_length", max_length=64,
                                          truncation=True, return_tensors="pt"))
        im = model.get_image_features(**proc(images=[images[i] for i in ids], return_tensors="pt"))
        r = {i: model.get_text_features(**tok([PROMPT + x for x in refs[i]], padding="max_length", max_length=64,
                                              truncation=True, return_tensors="pt")) for i in ids}
    feat = lambda x: getattr(x, "pooler_output", x).double().numpy()  # noqa: E731
    t, im = feat(t), feat(im)
    out, ref_out = {}, {}
    for k, i in enumerate(ids):
        tc, vi = t[k] / np.linalg.norm(t[k]), im[k] / np.linalg.norm(im[k])
        s = w * max(float(tc @ vi), 0.0)
        rr = feat(r[i])
        best = max(0.0, max(float(tc @ (x / np.linalg.norm(x))) for x in rr))
        out[i], ref_out[i] = s, (0.0 if s + best == 0 else 2 * s * best / (s + best))
    return out, ref_out


@pytest.mark.parametrize("mode", ["pacs", "pacs++"])
def test_export_then_score_equals_merged_transformers_forward(model_dir, tmp_path, mode):
    from PIL import Image

    from capeval.metrics.clip_score import PacScore, PacScorePlusPlus

    res = _train(model_dir, tmp_path, "run", mode, 4, val_every=2)
    ckpt = res.best
    assert ckpt is not None and ckpt.is_file()
    arch = "siglip2" if (model_dir / "config.json").read_text().count('"siglip2"') else "siglip"
    rng = np.random.default_rng(1)
    images = {str(k): Image.fromarray(rng.integers(0, 256, (20 + 9 * k, 40 - 5 * k, 3), dtype=np.uint8))
              for k in range(4)}
    images["4"] = Image.fromarray(_image("red", "circle"))
    cands = {"0": "a red circle", "1": "the square is blue", "2": "a dog", "3": "green", "4": "a red circle"}
    refs = {i: ["a red circle", "a green square"][: 1 + int(i) % 2] for i in cands}
    cls = PacScore if mode == "pacs" else PacScorePlusPlus
    scorer = cls(backbone=str(model_dir), checkpoint=str(ckpt), metrics=None)
    report = scorer.score(cands, refs, images=images)
    want, want_ref = _reference_scores(model_dir, ckpt, arch, cands, refs, images, scorer.w)
    base = "pac-s" if mode == "pacs" else "pac-s++"
    got, got_ref = report[base].items, report["ref-" + base].items
    for i in cands:
        assert abs(got[i] - want[i]) <= 1e-5 and abs(got_ref[i] - want_ref[i]) <= 1e-5, i
    assert len({round(v, 4) for v in want.values()}) > 2  # the comparison is not vacuous
    from capeval.hashing import file_digest

    sig = report[base].signature.fields
    assert sig["backbone"] == str(model_dir) and sig["w"] == scorer.w and sig["arch"] == arch
    assert sig["checkpoint_sha256"] == file_digest(ckpt, "sha256", cached=False) and sig["mode"] == mode
    # backbone=FILE alone loads the backbone recorded in the file: the same scores
    again = cls(backbone=str(ckpt)).score(cands, refs, images=images)
    assert again[base].items == got


def test_resume_equals_uninterrupted_run(model_dir, tmp_path):
    from safetensors.torch import load_file

    _train(model_dir, tmp_path, "straight", "pacs++", 5)
    _train(model_dir, tmp_path, "split", "pacs++", 2)
    res = _train(model_dir, tmp_path, "split", "pacs++", 5, resume=True)
    assert res.steps == 5
    a = load_file(str(tmp_path / "straight" / "last.safetensors"))
    b = load_file(str(tmp_path / "split" / "last.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert max(float(a[k].abs().max()) for k in a if k.endswith("lora_B")) > 0


def test_mismatched_backbone_is_refused(model_dir, tmp_path):
    from capeval.metrics.clip_score import PacScorePlusPlus

    res = _train(model_dir, tmp_path, "run", "pacs++", 1)
    arch = "siglip2" if '"siglip2"' in (model_dir / "config.json").read_text() else "siglip"
    other = _build(tmp_path / "other", arch, seed=1)  # same architecture, other weights
    with pytest.raises(InputError, match="was trained on") as err:
        PacScorePlusPlus(backbone=str(other), checkpoint=str(res.last))
    assert "\n" not in str(err.value)
    wrong = _build(tmp_path / "wrong", "siglip2" if arch == "siglip" else "siglip", seed=0)
    with pytest.raises(InputError, match="was trained on"):
        PacScorePlusPlus(backbone=str(wrong), checkpoint=str(res.last))
    with pytest.raises(InputError, match="not a SigLIP model"):
        PacScorePlusPlus(backbone="openai/ViT-B-32", checkpoint=str(res.last))
    with pytest.raises(InputError, match="not a SigLIP PAC-S checkpoint"):
        PacScorePlusPlus(backbone=str(model_dir), checkpoint=str(model_dir / "config.json"))


def test_dry_run_plans_from_the_config_only(model_dir, tmp_path):
    cfg = _cfg(tmp_path, "dry", "pacs++", 10, backbone=str(model_dir))
    plan = train_pacs(cfg, train_data=_items(), positives=_positives(_items()), dry_run=True)
    assert plan["trainable"] > 0 and plan["parameters"] > plan["trainable"] and plan["steps_per_epoch"] == 2


def test_paper_w_is_refused_on_siglip(model_dir):
    from capeval.metrics.clip_score import PacScorePlusPlus

    with pytest.raises(InputError, match="w='paper'"):
        PacScorePlusPlus(backbone=str(model_dir), w="paper")


def test_sigmoid_loss_matches_a_loop_transcription():
    import math

    from capeval.train.losses import sigmoid_pairs

    g = torch.Generator().manual_seed(3)
    a = torch.nn.functional.normalize(torch.randn(5, 7, generator=g, dtype=torch.float64), dim=-1)
    b = torch.nn.functional.normalize(torch.randn(5, 7, generator=g, dtype=torch.float64), dim=-1)
    t, bias = 10.0, -4.0
    want = 0.0  # Zhai et al. 2023, Algorithm 1: -sum log sigmoid(z_ij (t cos + b)) / n
    for i in range(5):
        for j in range(5):
            z = 1.0 if i == j else -1.0
            x = z * (t * float(a[i] @ b[j]) + bias)
            want -= -math.log1p(math.exp(-x))
    assert abs(float(sigmoid_pairs(a, b, t, bias)) - want / 5) <= 1e-12


def test_sigmoid_option_trains_on_siglip_and_is_refused_on_clip(model_dir, tmp_path):
    from safetensors import safe_open

    from capeval.models.clip.backbone import random_backbone

    res = _train(model_dir, tmp_path, "sig", "pacs++", 2, loss="sigmoid", val_every=1)
    assert res.history[-1]["val_loss"] > 0
    with safe_open(str(res.last), "pt") as f:
        assert f.metadata()["loss"] == '"sigmoid"'
    with pytest.raises(InputError, match="loss=sigmoid needs a SigLIP backbone"):
        PacsObjective(random_backbone("tiny").model, None, PacsTrainConfig(loss="sigmoid"))
    with pytest.raises(InputError, match="loss="):
        PacsTrainConfig(loss="hinge")


def test_evaluator_merges_into_its_own_backbone(model_dir, tmp_path):
    """checkpoint= must not change the backbone the evaluator shares with clip-s; without backbone=
    the backbone recorded in the file is used."""
    from capeval.evaluator import Evaluator

    res = _train(model_dir, tmp_path, "run", "pacs++", 1)
    images = {"a": _image("red", "circle"), "b": _image("blue", "square")}
    cands = {"a": "a red circle", "b": "a red circle"}
    alone = Evaluator(["clip-s"], options={"clip-s": {"backbone": str(model_dir)}}).score(cands, images=images)
    both = Evaluator(["clip-s", "pac-s++"], options={"clip-s": {"backbone": str(model_dir)},
                                                     "pac-s++": {"backbone": str(model_dir),
                                                                 "checkpoint": str(res.last)}}).score(cands, images=images)
    recorded = Evaluator(["pac-s++"], options={"pac-s++": {"checkpoint": str(res.last)}}).score(cands, images=images)
    assert both["clip-s"].items == alone["clip-s"].items
    assert recorded["pac-s++"].items == both["pac-s++"].items


def test_cli_trains_resumes_and_scores(model_dir, tmp_path, capsys):
    import json

    from PIL import Image

    from capeval.cli.main import main

    root = tmp_path / "coco"
    (root / "train2014").mkdir(parents=True)
    records = []
    for n, it in enumerate(_items()):
        Image.fromarray(it.image).save(root / "train2014" / f"{n}.png")
        records.append({"filepath": "train2014", "filename": f"{n}.png", "cocoid": n, "split": ["train", "val"][n % 2],
                        "sentences": [{"raw": c} for c in it.captions]})
    (root / "dataset_coco.json").write_text(json.dumps({"images": records}))
    cfg = tmp_path / "pacs.yaml"
    cfg.write_text(f"mode: pacs++\ncoco_root: {root}\nbackbone: {model_dir}\nlambda_v: 0\nlambda_t: 0\nbatch_size: 2\n"
                   f"val_every: 1\nworkers: 0\ndevice: cpu\naccelerate: 'no'\noutput_dir: {tmp_path / 'run'}\n")
    assert main(["train", "pacs", "--config", str(cfg), "--set", "max_steps=1"]) == 0
    assert main(["train", "pacs", "--config", str(cfg), "--set", "max_steps=2", "--resume"]) == 0
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["backbone"] == str(model_dir) and run["files"]["last.safetensors"]["step"] == 2
    (tmp_path / "c.json").write_text(json.dumps({"0": "a red square", "1": "a red circle"}))
    capsys.readouterr()
    assert main(["score", "-m", "pac-s++", "--backbone", str(tmp_path / "run" / "last.safetensors"), "-c",
                 str(tmp_path / "c.json"), "--images", str(root / "train2014"), "-o", str(tmp_path / "out.json")]) == 0
    out = json.loads((tmp_path / "out.json").read_text())
    assert "checkpoint_sha256:" + run["files"]["last.safetensors"]["sha256"] in out["signatures"]["pac-s++"]
