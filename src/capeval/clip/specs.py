"""Registry entries of the CLIP-based image metrics (data only: importing this loads no torch)."""

from __future__ import annotations

from capeval.registry import MetricSpec, register, register_preset

_HESSEL = "Hessel et al. 2021, CLIPScore: A Reference-free Evaluation Metric for Image Captioning"
_PACS = "Sarto et al. 2023, Positive-Augmented Contrastive Learning for Image and Video Captioning Evaluation"
_PACPP = "Sarto et al. 2024, PAC-S++: Positive-Augmented Contrastive Learning for Vision-and-Language Evaluation and Training"

_FAMILIES = (
    ("clip-s", "clip", "capeval.clip.scorers:ClipScore", _HESSEL, "CLIP-S", "openai/ViT-B-32", "w=2.5"),
    ("pac-s", "pac-s", "capeval.clip.scorers:PacScore", _PACS, "PAC-S", "pac-s/ViT-B-32", "w=2.0"),
    ("pac-s++", "pac-s++", "capeval.clip.scorers:PacScorePlusPlus", _PACPP, "PAC-S++", "pac-s++/ViT-B-32",
     "w=2.0 as aimagelab/pacscore's released evaluation code (option w=paper: the paper's 2.5 for ViT-B/32, "
     "3.0 for ViT-L/14)"),
)

for _name, _group, _factory, _paper, _label, _backbone, _w in _FAMILIES:
    register(MetricSpec(
        name=_name, factory=_factory, group=_group,
        description=f"{_label}: w*max(cos(text, image), 0), prompt 'A photo depicts ', {_backbone}, {_w}; "
                    "higher is better",
        needs=frozenset({"images"}), extra="clip", reference=_paper,
        aliases=(_name.replace("-", ""), _name.replace("-", "_")),
    ))
    register(MetricSpec(
        name=f"ref-{_name}", factory=_factory, group=_group,
        description=f"Ref{_label}: harmonic mean of {_label} and max(0, max cos(candidate, reference)); "
                    f"{_backbone}, {_w}; higher is better",
        needs=frozenset({"images", "references"}), extra="clip", reference=_paper,
        aliases=(f"ref{_name}".replace("-", ""), f"ref_{_name}".replace("-", "_")),
    ))

register_preset("clip", ("clip-s", "ref-clip-s"))
register_preset("pac", ("pac-s", "ref-pac-s", "pac-s++", "ref-pac-s++"))
register_preset("learned", ("clip-s", "ref-clip-s", "pac-s", "ref-pac-s", "pac-s++", "ref-pac-s++"))
