"""OpenAI's ``.pt`` files are TorchScript archives: read one made by OpenAI's own model code.

The archive is built the way the released files were: OpenAI's ``clip/model.py`` (shipped by
``clip-anytorch``, installed with ``--no-deps``; loaded by file path because its
``clip/__init__.py`` imports torchvision), weights converted to fp16 with its
``convert_weights``, the int metadata (``input_resolution``, ``context_length``,
``vocab_size``) stored as tensors (``build_model`` deletes exactly these keys, so the
released archives carry them), then ``torch.jit.trace`` + ``torch.jit.save``.

Checked: capeval detects the archive, extracts a state dict identical to the traced
module's, and its embeddings equal those of ``clip.load(..., jit=False)``'s path on CPU
(``build_model(archive.state_dict()).float()``) within 1e-5.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from capeval.models.clip import checkpoints as ck  # noqa: E402
from capeval.models.clip.backbone import load_backbone  # noqa: E402
from capeval.errors import ResourceError  # noqa: E402

from _upstream import clip_model_module, openai_tokenize, real_vocab  # noqa: E402

TOL = 1e-5
CAPTIONS = ["a photo of a cat", "Two dogs, one ball & a frisbee!", "x", "zebras " * 90]


@pytest.fixture(scope="module")
def openai():
    return clip_model_module()


def _random_openai_model(clip_model, seed: int = 0):
    # ViT-B/32's structure at a smaller size: 2 heads of 64, 3 layers per tower, the real vocabulary
    torch.manual_seed(seed)
    model = clip_model.CLIP(embed_dim=96, image_resolution=64, vision_layers=3, vision_width=128,
                            vision_patch_size=16, context_length=77, vocab_size=49408,
                            transformer_width=128, transformer_heads=2, transformer_layers=3)
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name != "logit_scale":  # biases start at 0 and norms at 1: randomise every tensor
                p.add_(torch.randn(p.shape, generator=gen) * (0.02 if p.dim() > 1 else 0.05))
    clip_model.convert_weights(model)  # the released archives are fp16
    for key, value in (("input_resolution", 64), ("context_length", 77), ("vocab_size", 49408)):
        if key in vars(model):
            delattr(model, key)
        model.register_buffer(key, torch.tensor(value))  # top level only: build_model loads strictly
    return model.eval()


@pytest.fixture(scope="module")
def archive(openai, tmp_path_factory):
    model = _random_openai_model(openai)
    example = (torch.randn(2, 3, 64, 64).half(), torch.randint(1, 49407, (2, 77)))
    with torch.no_grad():
        traced = torch.jit.trace(model, example, check_trace=False)
    path = tmp_path_factory.mktemp("jit") / "ViT-tiny.pt"
    torch.jit.save(traced, str(path))
    return path, {k: v.clone() for k, v in traced.state_dict().items()}


def test_archive_is_detected_and_read_exactly(archive):
    path, expected = archive
    assert ck.is_torchscript(path)
    state = ck.read_state_dict(path, trusted=True)
    assert set(state) == set(expected)
    for key in ("input_resolution", "context_length", "vocab_size"):
        assert key in state  # capeval's clean_state_dict must drop them
    for key, value in expected.items():
        assert state[key].dtype == value.dtype and torch.equal(state[key], value), key
    assert state["visual.conv1.weight"].dtype == torch.float16


def test_untrusted_archive_is_refused(archive):
    path, _ = archive
    with pytest.raises(ResourceError, match="TorchScript"):
        ck.read_state_dict(path, trusted=False)


def test_embeddings_equal_openai_jit_false_path(openai, archive):
    path, _ = archive
    # clip.load(path, device="cpu", jit=False): build_model(archive.state_dict()), then .float()
    jit_model = torch.jit.load(str(path), map_location="cpu").eval()
    ref = openai.build_model(jit_model.state_dict()).float().eval()
    rows = openai_tokenize(CAPTIONS)  # clip.tokenize(truncate=True) without the padding
    tokens = torch.zeros(len(rows), 77, dtype=torch.long)
    for i, ids in enumerate(rows):
        tokens[i, : len(ids)] = torch.tensor(ids)
    px = torch.randn(3, 3, 64, 64, generator=torch.Generator().manual_seed(5))

    backbone = load_backbone(path, tokenizer=real_vocab())  # a file the user names directly is trusted
    with torch.no_grad():
        ref_img, ref_txt = ref.encode_image(px), ref.encode_text(tokens)
    d_img = (backbone.encode_images(px) - ref_img).abs().max().item()
    d_txt = (backbone.encode_texts(rows) - ref_txt).abs().max().item()
    print(f"TorchScript archive: max|diff| image {d_img:.2e} text {d_txt:.2e}")
    assert d_img < TOL and d_txt < TOL
    # every weight went through: capeval's model holds exactly OpenAI's (fp16-rounded) tensors
    ours = backbone.model.state_dict()
    for key, value in ref.state_dict().items():
        assert torch.equal(ours[key], value.float()), key
