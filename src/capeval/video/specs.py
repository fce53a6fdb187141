"""Registry entries of the video metrics (data only: importing this loads neither torch nor PyAV)."""

from __future__ import annotations

from capeval.registry import MetricSpec, register, register_preset

_EMSCORE = "Shi et al. 2022, EMScore: Evaluating Video Captioning via Coarse-Grained and Fine-Grained Embedding Matching"
_PACS = "Sarto et al. 2023, Positive-Augmented Contrastive Learning for Image and Video Captioning Evaluation"

_FAMILIES = (
    ("emscore", "capeval.video.scorers:EMScore", _EMSCORE, "EMScore", "openai/ViT-B-32"),
    ("pac-s-video", "capeval.video.scorers:PacSVideo", _PACS, "PAC-S (video, EMScore formulation)",
     "pac-s/ViT-B-32"),
)

for _name, _factory, _paper, _label, _backbone in _FAMILIES:
    register(MetricSpec(
        name=_name, factory=_factory, group=_name,
        description=f"{_label}: (F + coarse)/2 of caption tokens vs 10 uniformly sampled frames, IDF-weighted; "
                    f"{_backbone}; higher is better",
        needs=frozenset({"videos"}), extra="video", reference=_paper,
        aliases=(_name.replace("-", ""), _name.replace("-", "_")),
    ))
    register(MetricSpec(
        name=f"ref-{_name}", factory=_factory, group=_name,
        description=f"{_label} with references: mean of the video part and the BERTScore-style reference part "
                    f"(max over references); {_backbone}; higher is better",
        needs=frozenset({"videos", "references"}), extra="video", reference=_paper,
        aliases=(f"ref{_name}".replace("-", ""), f"ref_{_name}".replace("-", "_")),
    ))

register_preset("video", ("emscore", "ref-emscore", "pac-s-video", "ref-pac-s-video"))
