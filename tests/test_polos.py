"""Polos (Wada et al. 2024) against a literal transcription of the official forward.

The ``polos`` package cannot be installed here (``python = ">3.9,<=3.10.0"`` and old
Lightning pins), so the reference below transcribes keio-smilab24/Polos (commit read with the
fetch tool) into this test module, on the same random weights:

- ``_OfficialScalarMix``: ``polos/modules/scalar_mix.py`` ``ScalarMixWithDropout`` (``__init__``
  and ``forward`` with ``do_layer_norm=True``, eval mode);
- ``_OfficialFeedForward``: ``polos/modules/feedforward.py`` ``FeedForward``;
- ``_official_forward``: ``polos/models/estimators/polos_estimator.py`` ``forward`` (the
  concatenation, ``self.ff`` + Sigmoid, ``torch.max`` over references) with
  ``estimator_base.py`` ``get_sentence_embedding`` (``pool == "cls"``) and ``predict``'s
  batching, ``torchnlp.collate_tensors``' ``zip`` over the reference lists.

The reference module's ``state_dict()`` has the released checkpoint's key names
(``scalar_mix.*``, ``ff.0.ff.linear_1.weight``, ``encoder.model.*``, ``clip.*``) and is what
capeval's loader reads.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from torch import nn  # noqa: E402

from capeval import registry  # noqa: E402
from capeval.errors import InputError, ResourceError  # noqa: E402
from capeval.metrics.polos.scorer import PROMPT, Polos  # noqa: E402
from capeval.models.clip.backbone import random_backbone  # noqa: E402


class _OfficialScalarMix(nn.Module):
    def __init__(self, mixture_size, dropout=0.1, dropout_value=-1e20):
        super().__init__()
        self.scalar_parameters = nn.ParameterList(
            [nn.Parameter(torch.FloatTensor([0.0])) for _ in range(mixture_size)])
        self.gamma = nn.Parameter(torch.FloatTensor([1.0]))
        self.register_buffer("dropout_mask", torch.zeros(mixture_size))
        self.register_buffer("dropout_fill", torch.empty(mixture_size).fill_(dropout_value))

    def forward(self, tensors, mask):
        def _do_layer_norm(tensor, broadcast_mask, num_elements_not_masked):
            tensor_masked = tensor * broadcast_mask
            mean = torch.sum(tensor_masked) / num_elements_not_masked
            variance = torch.sum(((tensor_masked - mean) * broadcast_mask) ** 2) / num_elements_not_masked
            return (tensor - mean) / torch.sqrt(variance + 1e-12)

        weights = torch.cat([parameter for parameter in self.scalar_parameters])
        normed_weights = torch.split(torch.nn.functional.softmax(weights, dim=0), split_size_or_sections=1)
        mask_float = mask.float()
        broadcast_mask = mask_float.unsqueeze(-1)
        num_elements_not_masked = torch.sum(mask_float) * tensors[0].size(-1)
        pieces = [w * _do_layer_norm(t, broadcast_mask, num_elements_not_masked)
                  for w, t in zip(normed_weights, tensors)]
        return self.gamma * sum(pieces)


class _OfficialFeedForward(nn.Module):
    def __init__(self, in_dim, out_dim=1, hidden_sizes="2304,1152", dropout=0.1):
        super().__init__()
        hidden_sizes = [int(x) for x in hidden_sizes.split(",")]
        self.ff = nn.Sequential()
        self.ff.add_module("linear_1", nn.Linear(in_dim, hidden_sizes[0]))
        self.ff.add_module("activation_1", nn.Tanh())
        self.ff.add_module("dropout_1", nn.Dropout(dropout))
        for i in range(1, len(hidden_sizes)):
            self.ff.add_module(f"linear_{i + 1}", nn.Linear(int(hidden_sizes[i - 1]), hidden_sizes[i]))
            self.ff.add_module(f"activation_{i + 1}", nn.Tanh())
            self.ff.add_module(f"dropout_{i + 1}", nn.Dropout(dropout))
        self.ff.add_module(f"linear_{len(hidden_sizes) + 1}", nn.Linear(hidden_sizes[-1], int(out_dim)))

    def forward(self, x):
        return self.ff(x)


class _Encoder(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model


class _OfficialEstimator(nn.Module):
    """The modules of PolosEstimator that hold weights, named as in the released checkpoint."""

    def __init__(self, roberta, clip_model, hidden="2304,1152"):
        super().__init__()
        self.encoder = _Encoder(roberta)
        n_layers = roberta.config.num_hidden_layers + 1
        self.scalar_mix = _OfficialScalarMix(n_layers)
        units = roberta.config.hidden_size
        self.ff = nn.Sequential(_OfficialFeedForward(units * 4 + 512 * 6, hidden_sizes=hidden), nn.Sigmoid())
        self.clip = clip_model


def _official_forward(est, tokenizer, clip_text, clip_img, mt, refs):
    """PolosEstimator.forward on one batch (``refs``: per item lists; transposed by zip)."""
    def sentemb(texts):
        ids = [torch.tensor(tokenizer(t, truncation=False)["input_ids"]) for t in texts]
        lengths = torch.tensor([len(i) for i in ids])
        tokens = torch.full((len(ids), int(lengths.max())), tokenizer.pad_token_id)
        for k, i in enumerate(ids):
            tokens[k, : len(i)] = i
        mask = torch.arange(tokens.shape[1])[None, :] < lengths[:, None]  # lengths_to_mask
        _, _, all_layers = est.encoder.model(tokens, mask, output_hidden_states=True, return_dict=False)
        return est.scalar_mix(all_layers, mask)[:, 0, :]

    refs_t = list(zip(*refs))  # torchnlp collate_tensors on lists
    mt_sentemb = sentemb(mt)
    imgs_clip, mts_clip = clip_img, clip_text(["A photo depicts " + x for x in mt])
    scores = []
    for ref_list in refs_t:
        ref_sentemb = sentemb(list(ref_list))
        ref_clip = clip_text(["A photo depicts " + r for r in ref_list])
        diff, mul = torch.abs(mt_sentemb - ref_sentemb), mt_sentemb * ref_sentemb
        diff_clip, mul_clip = torch.abs(imgs_clip - mts_clip), imgs_clip * mts_clip
        diff_clip_txt, mul_clip_txt = torch.abs(ref_clip - mts_clip), ref_clip * mts_clip
        x = torch.cat((ref_sentemb, mt_sentemb, diff, mul, imgs_clip, mts_clip, diff_clip, mul_clip,
                       diff_clip_txt, mul_clip_txt), dim=1)
        scores.append(est.ff(x))
    return torch.max(torch.stack(scores), dim=0).values[:, 0]


def _tiny_tokenizer_dir(tmp_path):
    """A byte-level BPE RoBERTa tokenizer with no merges (every byte one token) and a tiny config."""
    from transformers import RobertaConfig, RobertaTokenizer

    # GPT-2's byte-to-printable-character table (every byte its own symbol)
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("\xa1"), ord("\xac") + 1), *range(ord("\xae"), ord("\xff") + 1)]
    extra = iter(range(256, 512))
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "<mask>": 4}
    for b in range(256):
        vocab.setdefault(chr(b) if b in keep else chr(next(extra)), len(vocab))
    (tmp_path / "vocab.json").write_text(json.dumps(vocab))
    (tmp_path / "merges.txt").write_text("#version: 0.2\n")
    RobertaTokenizer(str(tmp_path / "vocab.json"), str(tmp_path / "merges.txt")).save_pretrained(tmp_path)
    RobertaConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                  intermediate_size=64, max_position_embeddings=130).save_pretrained(tmp_path)
    return tmp_path


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from transformers import AutoConfig, AutoTokenizer, RobertaModel

    folder = _tiny_tokenizer_dir(tmp_path_factory.mktemp("simcse"))
    torch.manual_seed(0)
    roberta = RobertaModel(AutoConfig.from_pretrained(folder)).eval()
    bb = random_backbone("tiny", seed=4)
    est = _OfficialEstimator(roberta, nn.Linear(2, 2), hidden="48,24").eval()
    with torch.no_grad():  # non-trivial mix weights and gamma
        for k, p in enumerate(est.scalar_mix.scalar_parameters):
            p.fill_(0.3 * k - 0.2)
        est.scalar_mix.gamma.fill_(1.7)
        for m in est.ff.modules():
            if isinstance(m, nn.Linear):
                m.weight.mul_(3.0)
    return folder, AutoTokenizer.from_pretrained(folder), bb, est


def _data(n, seed=3):
    from PIL import Image

    rng = np.random.default_rng(seed)
    words = "a dog cat man woman red blue ball runs sits on the grass street table".split()
    cap = lambda: " ".join(rng.choice(words, size=int(rng.integers(1, 9))))  # noqa: E731
    imgs = {f"i{k}": Image.fromarray(rng.integers(0, 255, (40, 40, 3), dtype=np.uint8)) for k in range(n)}
    return ({i: cap() for i in imgs}, {i: [cap() for _ in range(int(rng.integers(1, 4)))] for i in imgs}, imgs)


def _clip_fns(bb):
    def clip_text(texts):
        return bb.encode_texts(bb.tokenize(texts)[0]).float()

    def clip_img(imgs):
        return bb.encode_images(torch.stack([bb.load_image(i) for i in imgs])).float()

    return clip_text, clip_img


@pytest.mark.parametrize("batch_size", [None, 64, 3])
def test_items_match_the_official_forward_on_the_same_weights(setup, monkeypatch, batch_size):
    """batch_size None: the default, 32, as the official scripts that made the paper's numbers
    (predict(data, cuda=True, batch_size=32)); 40 items make two batches, so it differs from 64."""
    folder, tok, bb, _ = setup
    from transformers import AutoConfig, RobertaModel

    torch.manual_seed(1)
    roberta = RobertaModel(AutoConfig.from_pretrained(folder)).eval()
    est = _OfficialEstimator(roberta, nn.Linear(2, 2), hidden="48,24").eval()
    # the official in_dim uses 512 per CLIP vector; the tiny CLIP gives 16: rebuild ff at 16
    est.ff = nn.Sequential(_OfficialFeedForward(32 * 4 + 16 * 6, hidden_sizes="48,24"), nn.Sigmoid()).eval()
    with torch.no_grad():
        for name, p in roberta.named_parameters():  # token vectors with non-zero means: masking matters
            if "LayerNorm" in name:  # (LN outputs with unit weights have one mean per token: the bias mean)
                p.normal_(1.0 if name.endswith("weight") else 0.0, 0.5)
        for k, p in enumerate(est.scalar_mix.scalar_parameters):
            p.fill_(0.4 * k - 0.3)
        est.scalar_mix.gamma.fill_(0.8)
        for m in est.ff.modules():
            if isinstance(m, nn.Linear):
                m.weight.mul_(4.0)
    state = est.state_dict()
    assert {"scalar_mix.scalar_parameters.0", "scalar_mix.gamma", "scalar_mix.dropout_mask",
            "ff.0.ff.linear_1.weight", "ff.0.ff.linear_3.bias", "encoder.model.embeddings.word_embeddings.weight",
            "clip.weight"} <= set(state)
    cands, refs, imgs = _data(7 if batch_size else 40)
    opts = {"batch_size": batch_size} if batch_size else {}
    scorer = registry.get("polos").build(checkpoint=state, text_model=str(folder), backbone=bb, **opts)
    res = scorer.score(cands, refs, images=imgs)["polos"]
    if batch_size is None:
        batch_size = 32
        other = registry.get("polos").build(checkpoint=state, text_model=str(folder), backbone=bb, batch_size=64)
        items64 = other.score(cands, refs, images=imgs)["polos"].items
        assert max(abs(items64[i] - res.items[i]) for i in cands) > 1e-4  # the batch changes the scores
    clip_text, clip_img = _clip_fns(bb)
    ids = list(cands)
    expected = {}
    with torch.no_grad():
        for s in range(0, len(ids), batch_size):
            b = ids[s:s + batch_size]
            out = _official_forward(est, tok, clip_text, clip_img([imgs[i] for i in b]), [cands[i] for i in b],
                                    [refs[i] for i in b])
            expected.update(zip(b, out.tolist()))
    for i in ids:
        assert res.items[i] == pytest.approx(expected[i], abs=1e-5), i
        assert 0.0 <= res.items[i] <= 1.0
    assert res.system == pytest.approx(np.mean([expected[i] for i in ids]), abs=1e-5)
    assert len(set(np.round(list(res.items.values()), 6))) > 3  # the weights do discriminate
    sig = str(res.signature)
    assert f"batch_size:{batch_size}" in sig and "checkpoint_sha256:state-dict" in sig and PROMPT.strip() in sig


def test_batch_uses_the_smallest_reference_count_as_the_official_zip(setup, monkeypatch):
    folder, _, bb, _ = setup
    state = _state(monkeypatch, folder)
    cands, refs, imgs = _data(4)
    refs = {i: ["a dog", "a cat", "a man"][: 1 + k % 3] for k, i in enumerate(cands)}
    res = Polos(checkpoint=state, text_model=str(folder), backbone=bb, batch_size=2).score(cands, refs, images=imgs)
    assert list(res["polos"].extras["references_used"].values()) == [1, 1, 1, 1]


def _state(monkeypatch, folder):
    from transformers import AutoConfig, RobertaModel

    est = _OfficialEstimator(RobertaModel(AutoConfig.from_pretrained(folder)), nn.Linear(2, 2), hidden="8")
    est.ff = nn.Sequential(_OfficialFeedForward(32 * 4 + 16 * 6, hidden_sizes="8"), nn.Sigmoid())
    return est.state_dict()


def test_loader_errors_are_one_line(setup, monkeypatch, tmp_path):
    folder, _, bb, _ = setup
    with pytest.raises(ResourceError, match="capeval download polos/reprod"):
        Polos(checkpoint=tmp_path / "reprod.ckpt", text_model=str(folder), backbone=bb)
    with pytest.raises(ResourceError, match="not a Polos state dict"):
        Polos(checkpoint={"ff.0.weight": torch.zeros(1)}, text_model=str(folder), backbone=bb)
    state = _state(monkeypatch, folder)
    state.pop("encoder.model.encoder.layer.0.attention.self.query.weight")
    with pytest.raises(ResourceError, match="SimCSE weights do not fit"):
        Polos(checkpoint=state, text_model=str(folder), backbone=bb)
    for bad in (0, 2.5, True):
        with pytest.raises(InputError, match=r"option polos\.batch_size=.* out of range"):
            Polos(checkpoint=state, text_model=str(folder), backbone=bb, batch_size=bad)
    good = _state(monkeypatch, folder)
    scorer = Polos(checkpoint=good, text_model=str(folder), backbone=bb)
    cands, refs, imgs = _data(2)
    with pytest.raises(InputError, match="polos needs references"):
        scorer.score(cands, images=imgs)


def test_checkpoint_from_a_lightning_file_and_zip(setup, monkeypatch, tmp_path):
    import zipfile

    folder, _, bb, _ = setup
    state = _state(monkeypatch, folder)
    ckpt = tmp_path / "reprod.ckpt"
    torch.save({"state_dict": state, "epoch": 3}, ckpt)
    archive = tmp_path / "z" / "reprod.zip"
    archive.parent.mkdir()
    with zipfile.ZipFile(archive, "w") as zf:
        zf.write(ckpt, "reprod/reprod.ckpt")
    cands, refs, imgs = _data(3)
    a = Polos(checkpoint=ckpt, text_model=str(folder), backbone=bb).score(cands, refs, images=imgs)["polos"]
    b = Polos(checkpoint=archive, text_model=str(folder), backbone=bb).score(cands, refs, images=imgs)["polos"]
    assert a.items == b.items
    assert "checkpoint_sha256:" in str(a.signature) and "state-dict" not in str(a.signature)


def test_docs_state_the_official_precision_and_batch():
    """docs/baselines.md's Polos section: CLIP in fp32 as the official code (clip.load on the CPU in
    the estimator's constructor casts it to fp32), batch 32 as the paper's evaluation scripts."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "baselines.md").read_text(encoding="utf-8")
    section = " ".join(text.split("## Polos")[1].split("\n## ")[0].split())
    assert "fp16" not in section and "in fp32 as the official code" in section
    assert "The default, 32, is the batch of the scripts that made the paper's numbers" in section
