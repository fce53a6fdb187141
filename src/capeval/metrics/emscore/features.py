"""Embeddings EMScore matches: normalised CLIP token features of each text and frame features of
each video window, each unique text / source frame computed once."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import torch

from capeval.errors import InputError
from capeval.io import video as vf
from capeval.metrics.emscore import formulas as em
from capeval.progress import make_progress


def token_features(backbone: Any, texts: list[str], tok_ids: dict[str, list[int]],
                   batch_size: int) -> dict[str, torch.Tensor]:
    """Normalised token features ``(L, D)`` over [SOT]..[EOT] per unique text (CPU, fp32)."""
    order = sorted(texts, key=lambda t: len(tok_ids[t]))
    out: dict[str, torch.Tensor] = {}
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        states, mask = backbone.encode_text_tokens([tok_ids[t] for t in chunk])
        states = em.l2_normalize(states.to("cpu", torch.float32))
        lengths = mask.sum(dim=1).tolist()
        for k, t in enumerate(chunk):
            out[t] = states[k, : int(lengths[k])].clone()
    return out


def frame_features(backbone: Any, sources: dict[Any, Any], windows: dict[Any, dict[Any, Any]],
                   owners: dict[Any, str], *, n_frames: int | None, fps: Any, frame_batch_size: int,
                   workers: int, skip: bool, progress: bool | None, desc: str,
                   ) -> tuple[dict[Any, torch.Tensor], dict[Any, vf.SampledFrames], set[Any]]:
    """Normalised frame embeddings ``(frames, D)`` per unit (source, window), the sampled
    frames per unit, and the failed units. A source is read once for all its windows and
    each of its frames embedded once, however many windows share it."""
    from capeval.models.clip.embed import embed_images

    feats: dict[Any, torch.Tensor] = {}
    sampled: dict[Any, vf.SampledFrames] = {}
    failed: set[Any] = set()
    keys = list(sources)
    per_chunk = max(1, frame_batch_size // max(1, n_frames or 32)) * 2

    def load(key: Any) -> dict[Any, Any]:
        try:
            return vf.load_windows(sources[key], windows[key], n_frames, owners, fps)
        except InputError as exc:
            return {u: exc for u in windows[key]}

    with ThreadPoolExecutor(max_workers=workers) as pool, \
            make_progress(len(keys), desc, progress) as bar:
        for start in range(0, len(keys), per_chunk):
            chunk = keys[start : start + per_chunk]
            loaded = list(pool.map(load, chunk))
            flat: list[Any] = []
            names: list[str] = []
            rows: dict[Any, list[int]] = {}
            for key, per_unit in zip(chunk, loaded):
                position: dict[int, int] = {}  # frame index in the source -> row of flat
                for unit in windows[key]:
                    s = per_unit[unit]
                    if isinstance(s, InputError):
                        if not skip:
                            raise s
                        failed.add(unit)
                        continue
                    sampled[unit] = s
                    for i, frame in zip(s.indices, s.frames):
                        if i not in position:
                            position[i] = len(flat)
                            flat.append(frame)
                            names.append(f"{s.source}#frame{i}")
                    rows[unit] = [position[i] for i in s.indices]
            errors: dict[int, str] = {}
            emb = embed_images(backbone, flat, batch_size=frame_batch_size,
                               errors=errors, names=names) if flat else np.zeros((0, 1))
            for unit, r in rows.items():
                bad = [errors[i] for i in r if i in errors]
                if bad:
                    if not skip:
                        raise InputError(f"item {owners[unit]!r}: {bad[0]}", owners[unit])
                    failed.add(unit)
                    continue
                feats[unit] = em.l2_normalize(torch.from_numpy(np.ascontiguousarray(emb[r])))
            bar.update(len(chunk))
    return feats, sampled, failed
