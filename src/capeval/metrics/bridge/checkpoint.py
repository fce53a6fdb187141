"""BRIDGE checkpoints: one safetensors file holding the weights and, in its metadata, the config.

Tensors: ``mapping.*`` (psi or the MLP: all that scoring needs) and ``regularizer.*`` (the
Eq. 2 branch, kept for resuming training; optional). Metadata (safetensors' string table):

- ``format`` = ``capeval-bridge``, ``format_version`` = ``1``;
- ``config``: :class:`~capeval.metrics.bridge.mapping.BridgeConfig` as JSON;
- ``backbone``: the CLIP checkpoint name (capeval's table, e.g. ``openai/ViT-B-32``) the model
  was trained on, ``backbone_sha256`` of its file, ``tokenizer`` (fingerprint prefix) and
  ``clip`` (its architecture, JSON): a BRIDGE model is only meaningful on that frozen CLIP;
- ``capeval_version`` and ``train`` (JSON: epoch, step, losses, training config).

Published weights: :data:`PUBLISHED` maps names to files, URLs and sha256 like the CLIP table
(:mod:`capeval.models.clip.checkpoints`). It is empty: the paper announces
``github.com/aimagelab/bridge-score``, which holds a README only (no code, no weights).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from capeval._version import __version__
from capeval.errors import InputError, ResourceError
from capeval.hashing import file_digest
from capeval.metrics.bridge.mapping import BridgeConfig, BridgeModel
from capeval.models.clip.checkpoints import checkpoint_dir, sniff

FORMAT = "capeval-bridge"
FORMAT_VERSION = "1"


@dataclass(frozen=True)
class BridgeWeights:
    """A published BRIDGE checkpoint: where to get it and which CLIP it needs."""

    name: str
    filename: str
    urls: tuple[str, ...]
    sha256: str | None
    backbone: str
    note: str = ""


#: name -> published weights (none released so far; add entries here when they are)
PUBLISHED: dict[str, BridgeWeights] = {}


@dataclass(frozen=True)
class BridgeCheckpoint:
    """A checkpoint read from disk (weights on CPU, config and provenance from the metadata)."""

    path: Path
    sha256: str
    config: BridgeConfig
    backbone: str
    backbone_sha256: str | None
    tokenizer: str | None
    clip: dict[str, Any]
    meta: dict[str, Any]
    state: dict[str, Any]

    def build(self, device: str = "cpu") -> BridgeModel:
        """The :class:`BridgeModel` with these weights, in eval mode (a missing regularizer stays random)."""
        model = BridgeModel(self.config)
        expected = model.state_dict()
        need = [k for k in expected if k.startswith("mapping.")]
        missing = [k for k in need if k not in self.state]
        unexpected = [k for k in self.state if k not in expected]
        wrong = [f"{k} {tuple(self.state[k].shape)} != {tuple(expected[k].shape)}"
                 for k in expected if k in self.state and tuple(self.state[k].shape) != tuple(expected[k].shape)]
        if missing or unexpected or wrong:
            parts = [f"{what}: {', '.join(keys[:5])}{' ...' if len(keys) > 5 else ''}"
                     for what, keys in (("missing", missing), ("unexpected", unexpected), ("wrong shapes", wrong)) if keys]
            raise ResourceError(f"BRIDGE checkpoint {self.path} does not fit its own config: {'; '.join(parts)}")
        model.load_state_dict({**expected, **self.state}, strict=True)
        return model.to(device).eval()

    def signature(self) -> dict[str, Any]:
        return {"checkpoint": self.path.name, "checkpoint_sha256": self.sha256, "trained_on": self.backbone}


def backbone_info(backbone: Any) -> dict[str, Any]:
    """What a checkpoint records about its CLIP: name, file sha256, tokenizer fingerprint, architecture."""
    return {"backbone": str(backbone.name), "backbone_sha256": backbone.signature.get("sha256"),
            "tokenizer": backbone.signature.get("tokenizer"), "clip": backbone.model.config.to_dict()}


def save_checkpoint(path: str | os.PathLike[str], model: BridgeModel, backbone: Any,
                    train: Mapping[str, Any] | None = None, regularizer: bool = True) -> Path:
    """Write ``model`` (+ metadata) to ``path`` atomically; ``backbone``: a ClipBackbone or :func:`backbone_info`."""
    from safetensors.torch import save_file

    info = backbone if isinstance(backbone, Mapping) else backbone_info(backbone)
    state = {k: v.detach().to("cpu").contiguous() for k, v in model.state_dict().items()
             if regularizer or not k.startswith("regularizer.")}
    meta = {"format": FORMAT, "format_version": FORMAT_VERSION, "config": model.config.to_json(),
            "backbone": str(info["backbone"]), "backbone_sha256": str(info.get("backbone_sha256") or ""),
            "tokenizer": str(info.get("tokenizer") or ""), "clip": json.dumps(info.get("clip") or {}, sort_keys=True),
            "capeval_version": __version__, "train": json.dumps(dict(train or {}), sort_keys=True, default=str)}
    path = Path(path)
    from capeval.io.atomic import atomic_path

    with atomic_path(path) as tmp:
        save_file(state, tmp, metadata=meta)
    return path


def resolve(name_or_path: str | os.PathLike[str], directory: str | os.PathLike[str] | None = None) -> Path:
    """A :data:`PUBLISHED` name -> its local file (``<checkpoint dir>/bridge/<file>``), else the path itself."""
    key = os.fspath(name_or_path)
    if key in PUBLISHED:
        entry = PUBLISHED[key]
        path = Path(directory or checkpoint_dir()) / "bridge" / entry.filename
        if not path.is_file():
            raise ResourceError(f"BRIDGE checkpoint {key} is not available: download {entry.filename} "
                                f"({', '.join(entry.urls) or 'no URL'}) to {path}")
        if entry.sha256 and file_digest(path, "sha256", cached=False) != entry.sha256:
            raise ResourceError(f"{path}: sha256 differs from the published {entry.sha256} of {key}")
        return path
    return Path(key).expanduser()


def read_checkpoint(name_or_path: str | os.PathLike[str], directory: str | os.PathLike[str] | None = None) -> BridgeCheckpoint:
    """Read a BRIDGE checkpoint; anything wrong with the file is a one-line :class:`ResourceError`."""
    path = resolve(name_or_path, directory)
    if not path.exists():
        known = f" (published names: {', '.join(PUBLISHED)})" if PUBLISHED else " (no published BRIDGE weights exist yet)"
        raise ResourceError(f"BRIDGE checkpoint {path} not found{known}; train one with `capeval train bridge`")
    if path.is_dir():
        raise ResourceError(f"BRIDGE checkpoint {path} is a directory; name the .safetensors file")
    problem = sniff(path)
    if problem:
        raise ResourceError(f"BRIDGE checkpoint {path} {problem}")
    with open(path, "rb") as f:
        head = f.read(9)
    n = int.from_bytes(head[:8], "little") if len(head) >= 8 else 0
    if len(head) < 9 or head[8:9] != b"{" or n < 2 or n > path.stat().st_size - 8:
        raise ResourceError(f"BRIDGE checkpoint {path} is not a safetensors file (it starts with bytes {head[:8].hex(' ')})")
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), framework="pt") as f:
            meta = dict(f.metadata() or {})
            state = {k: f.get_tensor(k) for k in f.keys()}
    except (SafetensorError, OSError, ValueError, RuntimeError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]
        raise ResourceError(f"BRIDGE checkpoint {path} is truncated or corrupt (safetensors: {first})") from None
    if meta.get("format") != FORMAT:
        raise ResourceError(f"{path} is a safetensors file but not a capeval BRIDGE checkpoint "
                            f"(metadata format={meta.get('format')!r}, expected {FORMAT!r})")
    if meta.get("format_version") != FORMAT_VERSION:
        raise ResourceError(f"BRIDGE checkpoint {path} has format version {meta.get('format_version')!r}; "
                            f"this capeval reads version {FORMAT_VERSION}")
    try:
        config = BridgeConfig.from_dict(json.loads(meta["config"]), source=str(path))
        clip = json.loads(meta.get("clip") or "{}")
        train = json.loads(meta.get("train") or "{}")
    except (KeyError, json.JSONDecodeError, TypeError) as exc:
        raise ResourceError(f"BRIDGE checkpoint {path}: unreadable metadata ({type(exc).__name__}: {exc})") from None
    except InputError as exc:
        raise ResourceError(f"BRIDGE checkpoint {path}: bad config ({exc})") from None
    if not meta.get("backbone"):
        raise ResourceError(f"BRIDGE checkpoint {path}: the metadata names no CLIP backbone")
    meta = {**meta, "clip": clip, "train": train}
    return BridgeCheckpoint(path, file_digest(path, "sha256", cached=False), config, meta["backbone"],
                            meta.get("backbone_sha256") or None, meta.get("tokenizer") or None, clip, meta, state)


def check_backbone(ckpt: BridgeCheckpoint, backbone: Any) -> None:
    """:class:`ResourceError` when ``backbone`` is not the CLIP ``ckpt`` was trained on (sha256, tokenizer, sizes)."""
    sig = backbone.signature
    problems = []
    if ckpt.backbone_sha256 and sig.get("sha256") and sig.get("sha256") != ckpt.backbone_sha256:
        problems.append(f"weights sha256 {str(sig.get('sha256'))[:16]} != {ckpt.backbone_sha256[:16]}")
    if ckpt.tokenizer and sig.get("tokenizer") and sig.get("tokenizer") != ckpt.tokenizer:
        problems.append(f"tokenizer {sig.get('tokenizer')} != {ckpt.tokenizer}")
    if ckpt.clip and backbone.model.config.to_dict() != ckpt.clip:
        problems.append("architecture differs")
    if problems:
        raise ResourceError(f"BRIDGE checkpoint {ckpt.path} was trained on {ckpt.backbone}, but the backbone given "
                            f"({backbone.name}) differs: {'; '.join(problems)} (strict_backbone=False to use it anyway)")
