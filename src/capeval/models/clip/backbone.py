"""Loading a CLIP backbone by checkpoint name or path: :func:`load_backbone`, :func:`random_backbone`.

The loaded object, :class:`ClipBackbone`, is defined in :mod:`capeval.models.clip.backbone_base`
(shared with the Alpha-CLIP loader, :mod:`capeval.models.clip.alpha`) and importable from here.
Alpha-CLIP names go to that loader.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from capeval.errors import InputError, ResourceError
from capeval.models.clip import checkpoints as ck
from capeval.models.clip.alpha import load_alpha_backbone
from capeval.models.clip.backbone_base import (  # noqa: F401  (importable from here, as before)
    ClipBackbone,
    as_numpy,
    describe_config,
    same_shape,
    toy_tokenizer,
)
from capeval.models.clip.lora import apply_lora, describe, has_lora
from capeval.models.clip.model import ClipConfig, build_model, clean_state_dict, get_config, infer_config
from capeval.models.clip.preprocess import Preprocess
from capeval.models.clip.siglip import SiglipBackbone, is_siglip
from capeval.models.clip.siglip_pacs import load_siglip_checkpoint
from capeval.models.clip.siglip_pacs import read_meta as read_siglip_meta
from capeval.models.clip.tokenizer import ClipTokenizer, load_tokenizer


# -- loading ------------------------------------------------------------------------------


# entries whose file is not a whole CLIP state dict (Alpha-CLIP files: capeval.models.clip.alpha)
_NOT_CLIP = ("vocab", "text", "alpha-clip", "hf-model")


def _by_filename(path: Path) -> ck.Checkpoint | None:
    for entry in ck.CHECKPOINTS.values():
        if entry.filename == path.name and entry.kind not in _NOT_CLIP:
            return entry
    return None


def as_backbone(backbone: Any, default: str | os.PathLike[str], device: str = "cpu", **options: Any) -> Any:
    """``backbone`` when it is already loaded, else :func:`load_backbone` of the name or path
    given (None: ``default``) with ``options``: how every image scorer takes its backbone option."""
    if backbone is None or isinstance(backbone, (str, os.PathLike)):
        return load_backbone(backbone or default, device=device, **options)
    return backbone


def load_backbone(name_or_path: str | os.PathLike[str], device: str = "cpu", lora: str = "effective",
                  tokenizer: str | os.PathLike[str] | None = None, checkpoint_dir: str | None = None,
                  activation: str | None = None, preprocess: Preprocess | None = None) -> ClipBackbone:
    """Load a checkpoint by table name (``openai/ViT-B-32``, ``pac-s++/ViT-L-14``, ...) or path.

    A file whose name is in the table (e.g. ``.../PAC++_clip_ViT-B-32.pth``) gets that entry's
    preprocessing and activation and its hash is checked; other files default to OpenAI's
    mean/std and QuickGELU (override with ``activation=``/``preprocess=``). A folder is
    searched for one file named in the table. A file of a table entry (by name or file name)
    must hold that entry's architecture (:func:`check_architecture`). ``lora`` (PAC-S++
    only): ``effective`` (what the official code computes, default), ``all`` or ``none``;
    see :mod:`capeval.models.clip.lora`. Alpha-CLIP names (``alpha-clip/...``) go to
    :func:`capeval.models.clip.alpha.load_alpha_backbone` (with its defaults). SigLIP hub names and
    folders give a :class:`~capeval.models.clip.siglip.SiglipBackbone`; a SigLIP PAC-S file of
    ``capeval train pacs`` is merged onto the backbone its header records
    (:mod:`capeval.models.clip.siglip_pacs`).
    """
    key = os.fspath(name_or_path)
    entry: ck.Checkpoint | None
    if key not in ck.CHECKPOINTS and is_siglip(key):  # PAC-S++ journal Table 8's SigLIP backbones
        return SiglipBackbone(key, device=device)  # type: ignore[return-value]
    if key not in ck.CHECKPOINTS and read_siglip_meta(key) is not None:  # SigLIP PAC-S, on its recorded backbone
        return load_siglip_checkpoint(key, device=device)
    if key in ck.CHECKPOINTS and ck.CHECKPOINTS[key].kind == "alpha-clip":
        return load_alpha_backbone(key, device=device, tokenizer=tokenizer, checkpoint_dir=checkpoint_dir)
    if key in ck.CHECKPOINTS and ck.CHECKPOINTS[key].kind in _NOT_CLIP:
        raise InputError(f"{key} is not a CLIP checkpoint (it is a {ck.CHECKPOINTS[key].kind} entry of the table)")
    if key in ck.CHECKPOINTS:
        entry = ck.get_checkpoint(key)
        path, digest = ck.resolve(entry, checkpoint_dir)
        trusted = entry.sha256 is not None
    else:
        path = Path(key).expanduser()
        if path.is_dir():
            hits = [e for e in ck.CHECKPOINTS.values() if e.kind not in _NOT_CLIP and (path / e.filename).is_file()]
            if len(hits) != 1:
                raise ResourceError(f"{path}: expected exactly one known checkpoint file in this folder, found "
                                    f"{[h.filename for h in hits] or 'none'}; name the file instead")
            path = path / hits[0].filename
        if not path.is_file():
            raise ResourceError(f"unknown backbone {key!r}: not a checkpoint name ({', '.join(ck.CHECKPOINTS)}) "
                                "and not an existing file")
        entry = _by_filename(path)
        digest = ck.sha256_file(path)
        if entry is not None and entry.sha256 and digest != entry.sha256:
            raise ResourceError(f"{path}: sha256 {digest} differs from the official {entry.sha256} of {entry.name}")
        trusted = True  # the user named this file
    state = ck.read_state_dict(path, trusted=trusted)
    lora_info = None
    if has_lora(state):
        state, lora_info = apply_lora(state, lora, source=str(path))
    state = clean_state_dict(state)
    act = activation or (entry.activation if entry else "quick_gelu")
    cfg = infer_config(state, act)
    if entry is not None:
        check_architecture(cfg, entry, path)
    model = build_model(cfg, state, source=str(path))
    prep = preprocess or (entry.preprocess if entry else Preprocess(cfg.image_size))
    if prep.size != cfg.image_size:
        raise ResourceError(f"{path}: preprocessing size {prep.size} != model input size {cfg.image_size}")
    tok = load_tokenizer(tokenizer, cfg.context_length)
    info = {"arch": entry.arch if entry else "inferred", "sha256": digest,
            "lora": describe(lora_info) if lora_info else "n/a", "run": _training_run(path)}
    return ClipBackbone(model, tok, prep, entry.name if entry and key in ck.CHECKPOINTS else str(path), device, info)


def _training_run(path: Path) -> str | None:
    """``config:<hash>,train:<hash>`` from the header of a safetensors file `capeval train` wrote."""
    if path.suffix != ".safetensors":
        return None
    try:
        from safetensors import safe_open

        with safe_open(str(path), "pt") as f:
            meta = f.metadata() or {}
        config = json.loads(meta["config_hash"]) if "config_hash" in meta else None
        data = json.loads(meta.get("data", "{}"))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not config:
        return None
    train = data.get("train") if isinstance(data, dict) else None
    return f"config:{config}" + (f",train:{train}" if train else "")


def check_architecture(cfg: ClipConfig, entry: ck.Checkpoint, path: Path) -> None:
    """:class:`ResourceError` naming both when the tensors of ``path`` are not ``entry.arch``.

    This is what makes an entry without a published sha256 safe: its file is accepted only
    if it is a state dict of the expected architecture.
    """
    expected = get_config(entry.arch)
    if not same_shape(cfg, expected):
        raise ResourceError(
            f"{path}: the file holds a {describe_config(cfg)} model, but {entry.name} ({entry.filename}) "
            f"is a {entry.arch} checkpoint; replace it, or rename it to load it as an unlisted checkpoint"
        )


def random_backbone(config: dict | str = "tiny", seed: int = 0, tokenizer_dir: str | os.PathLike[str] | None = None,
                    device: str = "cpu", preprocess: Preprocess | None = None) -> ClipBackbone:
    """Random weights of a named architecture (``"ViT-B-32"``, ``"tiny"``, ...) or a config dict.

    Tokenizer: from ``tokenizer_dir`` when given, else a small toy BPE (deterministic). For
    ``"tiny"``-sized vocabularies the embedding table is sized to the tokenizer.
    """
    tok = ClipTokenizer.from_path(tokenizer_dir) if tokenizer_dir is not None else toy_tokenizer()
    cfg = get_config(config)
    n_ids = max(tok.encoder.values()) + 1
    if cfg.vocab_size < 49408:  # small test configs: size the embedding table to the tokenizer
        cfg = get_config(cfg, vocab_size=n_ids)
    elif n_ids > cfg.vocab_size:
        raise ResourceError(f"tokenizer has {n_ids} ids but {config} has a vocabulary of {cfg.vocab_size}")
    model = build_model(cfg, None, seed=seed)
    prep = preprocess or Preprocess(cfg.image_size)
    name = config if isinstance(config, str) else "custom"
    info = {"arch": name, "sha256": f"random(seed={seed})"}
    return ClipBackbone(model, tok, prep, f"random/{name}", device, info)


