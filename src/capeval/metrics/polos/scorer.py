"""Polos scorer: SimCSE-RoBERTa + CLIP ViT-B/32 features into the released regression head.

Inference as keio-smilab24/Polos ``PolosEstimator.predict`` / ``forward``
(``polos/models/estimators/polos_estimator.py``, ``estimator_base.py``):

- items are cut into batches of ``batch_size`` in input order (default 32: the batch of the
  official ``validate/metrics.py`` (Polaris), ``compute_correlations.py``, ``compute_pascal50s.py``
  and ``compute_foil.py``, which made the paper's numbers; ``predict``'s own default is the training batch size, 64); the
  layer mix normalises over each batch (see :class:`~capeval.metrics.polos.head.ScalarMix`), so
  an item's score depends on its batch size and on the items batched with it;
- in a batch, the j-th references of all items form one text batch (``collate_tensors``
  transposes the reference lists with ``zip``): a batch uses the first ``min`` reference
  count of its items, extra references are ignored, as the official code does;
- SimCSE: RoBERTa tokenizer (``<s> ... </s>``, right padding), all hidden states incl. the
  embeddings, layer mix, CLS vector; CLIP: ``"A photo depicts " + text``, 77 tokens with EOT
  kept, raw (un-normalised) features, fp32;
- score: max over references of the head's sigmoid output; system score = mean of items.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np

from capeval import truncation
from capeval.errors import InputError, ResourceError
from capeval.registry import DEFAULTS
from capeval.result import MetricResult, Report, Signature
from capeval.scorer import ScorerBase

PROMPT = "A photo depicts "
MAX_TOKENS = 512  # RoBERTa's 514 positions minus the two special ones


class SimcseEncoder:
    """A transformers RoBERTa and its tokenizer: texts -> (all hidden states, token mask)."""

    def __init__(self, tokenizer: Any, model: Any, device: str = "cpu"):
        self.tokenizer, self.model, self.device = tokenizer, model.to(device).eval(), device
        self.cut: set[str] = set()  # texts longer than MAX_TOKENS, cut as the official code does

    def layers(self, texts: Sequence[str]) -> tuple[list[Any], Any]:
        import torch

        ids = self.tokenizer(list(texts), truncation=True, max_length=MAX_TOKENS)["input_ids"]
        full = self.tokenizer(list(texts))["input_ids"]  # untruncated lengths, to count what was cut
        self.cut.update(t for t, x in zip(texts, full) if len(x) > MAX_TOKENS)
        width = max(len(i) for i in ids)
        pad = self.tokenizer.pad_token_id
        tokens = torch.tensor([i + [pad] * (width - len(i)) for i in ids], device=self.device)
        mask = torch.tensor([[1] * len(i) + [0] * (width - len(i)) for i in ids], device=self.device)
        out = self.model(input_ids=tokens, attention_mask=mask, output_hidden_states=True)
        return list(out.hidden_states), mask


def load_checkpoint(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The released Lightning checkpoint's ``state_dict`` (``reprod.ckpt``, or inside ``reprod.zip``)."""
    import argparse

    import torch

    path = Path(path)
    if not path.exists():
        raise ResourceError(f"polos checkpoint {path} not found; run `capeval download polos/reprod`")
    if path.suffix == ".zip":
        with zipfile.ZipFile(path) as zf:
            member = next((n for n in zf.namelist() if n.endswith(".ckpt")), None)
            if member is None:
                raise ResourceError(f"polos checkpoint {path}: the archive holds no .ckpt file")
            target = path.parent / Path(member).name
            if not target.is_file():
                zf.extract(member, path.parent / ".extract")
                os.replace(path.parent / ".extract" / member, target)
        path = target
    try:
        with torch.serialization.safe_globals([argparse.Namespace]):
            ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise ResourceError(f"polos checkpoint {path} cannot be read ({type(exc).__name__}: "
                            f"{str(exc).splitlines()[0] if str(exc) else ''})") from None
    state = ckpt.get("state_dict", ckpt) if isinstance(ckpt, dict) else None
    if not isinstance(state, dict):
        raise ResourceError(f"polos checkpoint {path} holds no state_dict")
    return state


class Polos(ScorerBase):
    """Polos (Wada et al., CVPR 2024): supervised caption score in [0, 1], higher is better.

    ``checkpoint``: the released ``reprod.ckpt``/``reprod.zip`` (default: the checkpoint table's
    ``polos/reprod``) or an already-loaded state dict; ``text_model``: the SimCSE tokenizer
    and config (a hub folder, default ``polos/sup-simcse-roberta-base``) or a ready
    :class:`SimcseEncoder`; ``backbone``: the CLIP model (default OpenAI ViT-B/32: the CLIP of
    the released model is frozen, its parameters are in no optimiser group).
    """

    produces: ClassVar[tuple[str, ...]] = ("polos",)
    default_backbone: ClassVar[str] = DEFAULTS["polos"]["backbone"]

    def __init__(self, metrics: Sequence[str] | None = None, checkpoint: Any = None, text_model: Any = None,
                 backbone: Any = None, device: str = "cpu", batch_size: int = DEFAULTS["polos"]["batch_size"], cache: Any = None,
                 lora: str = "effective", workers: int | None = None):
        import torch

        from capeval.ranges import check_option
        from capeval.metrics.polos.head import head_from_state, split_checkpoint

        self.metrics = self._select(metrics)
        check_option("polos", "batch_size", batch_size)
        self.batch_size, self.cache, self.workers, self.device = batch_size, cache, workers, device
        if isinstance(checkpoint, Mapping):
            state, self.checkpoint_sha = dict(checkpoint), "state-dict"
        else:
            path = Path(checkpoint) if checkpoint is not None else _table_path("polos/reprod")
            state = load_checkpoint(path)
            from capeval.hashing import file_digest

            self.checkpoint_sha = file_digest(path)
        head_state, enc_state, _ = split_checkpoint(state)
        try:
            self.head = head_from_state(head_state).to(device)
        except (KeyError, RuntimeError) as exc:
            raise ResourceError(f"polos checkpoint: not a Polos state dict ({str(exc).splitlines()[0]})") from None
        self.text = text_model if isinstance(text_model, SimcseEncoder) else _simcse(text_model, enc_state, device)
        from capeval.models.clip.backbone import as_backbone

        self.backbone = as_backbone(backbone, self.default_backbone, device=device, lora=lora)
        self._torch = torch

    def score(self, candidates: Mapping[Any, Any] | Sequence[str], references: Mapping[Any, Any] | None = None,
              *, images: Any = None, skip_bad_items: bool = False, progress: bool | None = False) -> Report:
        """Score ``{id: caption}`` against ``images`` and ``references`` (both required)."""
        from capeval.io.images import image_metric_inputs
        from capeval.models.clip.embed import embed_texts, embed_usable_images

        if references is None:
            raise InputError("polos needs references")
        cands, refs, ids, sources, bad = image_metric_inputs(candidates, references, images, self.metrics,
                                                             needs_references=True)
        good, img = embed_usable_images(self.backbone, ids, sources, bad, 64, self.cache, progress, skip_bad_items,
                                        self.workers)
        items: dict[str, float] = {}
        used_refs = []
        self._clip_cut: set[str] = set()
        for start in range(0, len(good), self.batch_size):
            batch = good[start:start + self.batch_size]
            n_ref = min(len(refs[i]) for i in batch)
            used_refs += [n_ref] * len(batch)
            scores = self._batch([cands[i] for i in batch], [[refs[i][j] for i in batch] for j in range(n_ref)],
                                 img[start:start + len(batch)], embed_texts)
            items.update(zip(batch, map(float, scores)))
        read = [refs[i][:n] for i, n in zip(good, used_refs)]  # the references the model read
        cut = {**truncation.tally((PROMPT + cands[i] for i in good), ([PROMPT + r for r in rs] for rs in read),
                                  self._clip_cut),
               **truncation.tally((cands[i] for i in good), read, self.text.cut, part="simcse")}
        result = MetricResult(metric="polos", system=float(np.mean(list(items.values()))), items=items,
                              signature=self.signature(), skipped=tuple(i for i in ids if i in bad),
                              extras={"references_used": dict(zip(good, used_refs)), **cut})
        return Report([result])

    def _batch(self, cands: list[str], refs_by_index: list[list[str]], img: np.ndarray, embed_texts: Any) -> Any:
        torch = self._torch
        dev = self.device

        def clip_text(texts: list[str]) -> Any:
            feats = embed_texts(self.backbone, [PROMPT + t for t in texts], 256, self.cache, False, stats=(st := {}))
            self._clip_cut |= st.get("truncated_texts", set())
            return torch.as_tensor(feats, dtype=torch.float32, device=dev)

        with torch.no_grad():
            cand = self.head.sentence(*self.text.layers(cands))
            refs = [self.head.sentence(*self.text.layers(r)) for r in refs_by_index]
            out = self.head(cand, refs, torch.as_tensor(img, dtype=torch.float32, device=dev), clip_text(cands),
                            [clip_text(r) for r in refs_by_index])
        return out.cpu().numpy()

    def signature(self) -> Signature:
        import torch

        sig = dict(self.backbone.signature)
        params: dict[str, Any] = {"backbone": sig.pop("backbone"), "checkpoint_sha256": self.checkpoint_sha,
                                  "batch_size": self.batch_size, "prompt": f'"{PROMPT}"', "precision": "fp32",
                                  "trunc_simcse": truncation.policy(MAX_TOKENS, "keep-first+special")}
        params.update(sig)
        params["versions"] = {"torch": torch.__version__, "numpy": np.__version__}
        return Signature.build("polos", **params)


def _table_path(name: str) -> Path:
    from capeval.models.clip import checkpoints as ck

    entry = ck.get_checkpoint(name)
    path = ck.local_path(entry)
    if not (path.is_dir() if entry.kind == "hf-model" else path.is_file()):
        raise ResourceError(f"polos: {name} not found at {path}; run `capeval download {name}`")
    return path


def _simcse(text_model: Any, enc_state: dict[str, Any], device: str) -> SimcseEncoder:
    """RoBERTa from the folder's config with the checkpoint's ``encoder.model.*`` weights."""
    try:
        from transformers import AutoConfig, AutoModel, AutoTokenizer
    except ImportError:
        raise ResourceError("polos needs transformers: pip install 'capeval[hf]'") from None
    folder = Path(text_model) if text_model is not None else _table_path("polos/sup-simcse-roberta-base")
    config = AutoConfig.from_pretrained(folder)
    model = AutoModel.from_config(config, add_pooling_layer="pooler.dense.weight" in enc_state)
    missing, unexpected = model.load_state_dict(enc_state, strict=False)
    missing = [k for k in missing if not k.endswith("position_ids")]
    if missing or [k for k in unexpected if not k.endswith("position_ids")]:
        raise ResourceError(f"polos checkpoint: SimCSE weights do not fit {folder} (missing {missing[:3]}, "
                            f"unexpected {list(unexpected)[:3]})")
    return SimcseEncoder(AutoTokenizer.from_pretrained(folder), model, device)
