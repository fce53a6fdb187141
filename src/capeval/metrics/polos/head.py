"""Polos's trainable head: the scalar mix of the SimCSE layers and the regression MLP.

Module and parameter names are those of keio-smilab24/Polos (``polos/modules/scalar_mix.py``
``ScalarMixWithDropout``, ``polos/modules/feedforward.py`` ``FeedForward``, assembled in
``polos/models/estimators/polos_estimator.py`` as ``self.scalar_mix`` and ``self.ff``), so the
released checkpoint's ``scalar_mix.*`` and ``ff.*`` entries load as they are.

Per (candidate c, reference r, image v), with SimCSE sentence vectors ``c, r`` (CLS of the
layer mix) and raw (not normalised) CLIP ViT-B/32 vectors ``v, tc, tr``::

    x = [r, c, |c - r|, c * r, v, tc, |v - tc|, v * tc, |tr - tc|, tr * tc]
    score = max over references of sigmoid(MLP(x))            range [0, 1], higher is better

MLP: Linear(4H + 6*512 -> 2304), Tanh, Linear(-> 1152), Tanh, Linear(-> 1) (the trainer
config ``configs/polos-trainer.yaml``: ``hidden_sizes: "2304,1152"``, ``activations: Tanh``,
``final_activation: False``), then the estimator's Sigmoid. Inference: dropout off.
"""

from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

#: official hyper-parameters of the released model (configs/polos-trainer.yaml)
HIDDEN_SIZES = (2304, 1152)
CLIP_DIM = 512


class ScalarMix(nn.Module):
    """``gamma * sum_k softmax(w)_k * LN(h_k)``; LN over every unmasked value of the whole batch.

    The normalisation statistics are those of the batch (all tokens of all sentences, all
    dimensions: ``ScalarMixWithDropout._do_layer_norm``), so a sentence's vector depends on the
    sentences batched with it, as in the official inference.
    """

    def __init__(self, mixture_size: int):
        super().__init__()
        self.scalar_parameters = nn.ParameterList([nn.Parameter(torch.zeros(1)) for _ in range(mixture_size)])
        self.gamma = nn.Parameter(torch.ones(1))

    def forward(self, layers: Sequence[torch.Tensor], mask: torch.Tensor) -> torch.Tensor:
        weights = torch.softmax(torch.cat(list(self.scalar_parameters)), dim=0)
        m = mask.to(layers[0].dtype).unsqueeze(-1)
        count = m.sum() * layers[0].shape[-1]
        out = 0
        for w, h in zip(weights, layers):
            mean = (h * m).sum() / count
            var = (((h * m - mean) * m) ** 2).sum() / count
            out = out + w * (h - mean) / torch.sqrt(var + 1e-12)
        return self.gamma * out


class _FeedForward(nn.Module):
    """The official ``FeedForward`` layout: ``ff.linear_1``, ``ff.activation_1``, ``ff.dropout_1``, ..."""

    def __init__(self, in_dim: int, hidden: Sequence[int]):
        super().__init__()
        self.ff = nn.Sequential()
        sizes = [in_dim, *hidden]
        for k in range(len(hidden)):
            self.ff.add_module(f"linear_{k + 1}", nn.Linear(sizes[k], sizes[k + 1]))
            self.ff.add_module(f"activation_{k + 1}", nn.Tanh())
            self.ff.add_module(f"dropout_{k + 1}", nn.Dropout(0.0))
        self.ff.add_module(f"linear_{len(hidden) + 1}", nn.Linear(sizes[-1], 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ff(x)


class PolosHead(nn.Module):
    """Layer mix + regression MLP of Polos (``scalar_mix.*``, ``ff.0.ff.*`` as in the checkpoint)."""

    def __init__(self, in_dim: int = 4 * 768 + 6 * CLIP_DIM, n_layers: int = 13,
                 hidden: Sequence[int] = HIDDEN_SIZES):
        super().__init__()  # in_dim: 4 x SimCSE width + 6 x CLIP width (4*768 + 6*512 for the release)
        self.scalar_mix = ScalarMix(n_layers)
        self.ff = nn.Sequential(_FeedForward(in_dim, hidden), nn.Sigmoid())

    def sentence(self, layers: Sequence[torch.Tensor], mask: torch.Tensor) -> torch.Tensor:
        """CLS vector of the layer mix (``pool: cls``) of one batch of sentences."""
        return self.scalar_mix(layers, mask)[:, 0, :]

    def forward(self, cand: torch.Tensor, refs: Sequence[torch.Tensor], image: torch.Tensor,
                cand_clip: torch.Tensor, refs_clip: Sequence[torch.Tensor]) -> torch.Tensor:
        """Scores ``(B,)``: max over the references ``refs[j]`` (each ``(B, H)``, CLIP ``(B, 512)``)."""
        scores = []
        for r, tr in zip(refs, refs_clip):
            x = torch.cat((r, cand, torch.abs(cand - r), cand * r, image, cand_clip, torch.abs(image - cand_clip),
                           image * cand_clip, torch.abs(tr - cand_clip), tr * cand_clip), dim=1)
            scores.append(self.ff(x)[:, 0])
        return torch.stack(scores).max(dim=0).values


def split_checkpoint(state: dict[str, torch.Tensor]) -> tuple[dict, dict, dict]:
    """The released state dict -> ``(head, SimCSE encoder, CLIP)`` state dicts (prefixes stripped).

    Head: ``scalar_mix.*`` (without the training-only dropout buffers) and ``ff.*``;
    encoder: ``encoder.model.*`` (a transformers RoBERTa); CLIP: ``clip.*`` (OpenAI layout).
    """
    head = {k: v for k, v in state.items()
            if k.startswith("ff.") or (k.startswith("scalar_mix.") and "dropout_" not in k)}
    enc = {k[len("encoder.model."):]: v for k, v in state.items() if k.startswith("encoder.model.")}
    clip = {k[len("clip."):]: v for k, v in state.items() if k.startswith("clip.")}
    return head, enc, clip


def head_from_state(head_state: dict[str, torch.Tensor]) -> PolosHead:
    """A :class:`PolosHead` sized from the state dict (layers, widths), weights loaded strictly."""
    n_layers = sum(1 for k in head_state if k.startswith("scalar_mix.scalar_parameters."))
    linears = sorted((k for k in head_state if k.startswith("ff.0.ff.linear_") and k.endswith(".weight")),
                     key=lambda k: int(k.split("linear_")[1].split(".")[0]))
    if not n_layers or len(linears) < 2:
        raise KeyError("scalar_mix.scalar_parameters.* / ff.0.ff.linear_*.weight")
    hidden = [head_state[k].shape[0] for k in linears[:-1]]
    head = PolosHead(head_state[linears[0]].shape[1], n_layers, hidden)
    head.load_state_dict(head_state, strict=True)
    return head.eval()
