"""A checkpoint file whose tensors are not the architecture of its table entry is refused.

Entries without a published sha256 (PAC-S, PAC-S++, open_clip) are accepted only when the
file is a state dict of the expected architecture; the message names both architectures.
Full-size state dicts are written as zero tensors expanded from one element (the file
holds one float per tensor, the shapes are real), so a "ViT-L/14 file" costs nothing.
"""

from __future__ import annotations

import hashlib
import json

import pytest

torch = pytest.importorskip("torch")

from capeval.models.clip import checkpoints as ck  # noqa: E402
from capeval.models.clip.backbone import load_backbone  # noqa: E402
from capeval.models.clip.model import CLIP, build_model, get_config  # noqa: E402
from capeval.models.clip.tokenizer import train_bpe, write_vocab  # noqa: E402
from capeval.errors import ResourceError  # noqa: E402


def shaped_state_dict(arch: str) -> dict[str, torch.Tensor]:
    """OpenAI-named zero tensors of the shapes of ``arch`` (built on the meta device: no memory)."""
    with torch.device("meta"):
        shapes = {k: v.shape for k, v in CLIP(get_config(arch)).state_dict().items()}
    return {k: torch.zeros(1).expand(shape) if len(shape) else torch.zeros(()) for k, shape in shapes.items()}


def tiny_state_dict() -> dict[str, torch.Tensor]:
    return build_model("tiny", None, seed=3).state_dict()


def place(tmp_path, name: str, state: dict, wrap: bool = True):
    """Write ``state`` where the table entry ``name`` is looked up, under ``$CAPEVAL_CHECKPOINTS``."""
    path = ck.local_path(ck.CHECKPOINTS[name], tmp_path / "ckpt")
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"state_dict": state} if wrap else state, path)  # PAC-S files wrap the weights
    return path


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("CAPEVAL_CHECKPOINTS", str(tmp_path / "ckpt"))
    vocab = write_vocab(tmp_path / "vocab", train_bpe(["a photo of a dog on the grass"] * 2, 10, min_count=1))
    monkeypatch.setenv("CAPEVAL_CLIP_VOCAB", str(vocab))
    return tmp_path


def test_vit_l14_file_under_a_vit_b32_name_is_refused(env):
    path = place(env, "pac-s/ViT-B-32", shaped_state_dict("ViT-L-14"))
    assert path.stat().st_size < 2_000_000  # expanded tensors: the shapes are real, the file is small
    with pytest.raises(ResourceError) as err:
        load_backbone("pac-s/ViT-B-32")
    msg = str(err.value)
    assert "ViT-L-14" in msg and "ViT-B-32" in msg and "pac-s/ViT-B-32" in msg and str(path) in msg
    assert "\n" not in msg


def test_tiny_file_under_a_vit_l14_name_is_refused(env):
    place(env, "pac-s++/ViT-L-14", tiny_state_dict())
    with pytest.raises(ResourceError, match=r"unlisted ViT \(image 32, patch 8.*pac-s\+\+/ViT-L-14.*ViT-L-14"):
        load_backbone("pac-s++/ViT-L-14")


def test_a_table_file_name_given_as_a_path_is_checked_too(env):
    path = env / "elsewhere" / "openClip_ViT-L-14.pth"  # pac-s/ViT-L-14's file name
    path.parent.mkdir()
    torch.save({"state_dict": shaped_state_dict("ViT-B-32")}, path)
    with pytest.raises(ResourceError, match=r"holds a ViT-B-32 model, but pac-s/ViT-L-14"):
        load_backbone(path)


def test_through_the_cli_exit_2_one_line(env, capsys):
    from capeval.cli.main import main

    place(env, "pac-s/ViT-B-32", tiny_state_dict())
    cands = env / "cands.json"
    cands.write_text(json.dumps({"image1": "a cat"}))
    (env / "images").mkdir()
    assert main(["score", "-m", "pac-s", "-c", str(cands), "--images", str(env / "images"), "-q"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("capeval: error:") and "pac-s/ViT-B-32" in err and "ViT-B-32 checkpoint" in err
    assert len(err.splitlines()) == 1


def test_file_of_the_expected_architecture_is_accepted_and_hashed(env):
    path = place(env, "pac-s/ViT-B-32", shaped_state_dict("ViT-B-32"))
    bb = load_backbone("pac-s/ViT-B-32")
    assert bb.signature["arch"] == "ViT-B-32"
    assert bb.signature["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert bb.model.config == get_config("ViT-B-32")
