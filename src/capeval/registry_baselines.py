"""Registry entries of the comparison baselines (MID, Polos, BERTScore, BERT-S++): plain data, no imports.

Kept beside :mod:`capeval.registry` (which turns each dict into a ``MetricSpec``) so that the
main table stays one screenful per family; the same rules apply (``docs/adding-a-metric.md``).
"""

from __future__ import annotations

from typing import Any

_INF = float("inf")
_IMAGE_IN = frozenset({"images", "references", "skip_bad_items"})

#: defaults read by both the descriptions and the scorers
BASELINE_DEFAULTS: dict[str, dict[str, Any]] = {
    # naver-ai/mid.metric: main.py's default EVAL_MODEL, metrics/mid.py's feature=512
    "mid": {"backbone": "openai/ViT-B-32"},
    # keio-smilab24/Polos: clip.load("ViT-B/32") in polos_estimator.py; released model reprod.ckpt;
    # batch_size: predict(data, cuda=True, batch_size=32) in validate/metrics.py (Polaris),
    # compute_correlations.py, compute_pascal50s.py and compute_foil.py, which made the paper's
    # numbers (predict's own default, -1, means the training batch size, 64)
    "polos": {"backbone": "openai/ViT-B-32", "checkpoint": "polos/reprod",
              "text_model": "polos/sup-simcse-roberta-base", "batch_size": 32},
}

BASELINE_SPECS: list[dict[str, Any]] = [
    dict(
        name="mid", factory="capeval.metrics.mid:Mid", group="mid", needs=frozenset({"images", "references"}),
        accepts=_IMAGE_IN, range=(-_INF, _INF), extra="clip", in_all=False,
        reference="Kim et al. 2022, Mutual Information Divergence: A Unified Metric for Multimodal Generative "
                  "Models (NeurIPS 2022)",
        description=f"MID: Gaussian PMI of CLIP (candidate, image) features, Gaussian fitted to the scored set's "
                    f"(first reference, image) pairs, float64; {BASELINE_DEFAULTS['mid']['backbone']}; needs more "
                    "items than the joint feature size; higher is better",
    ),
    dict(
        name="polos", factory="capeval.metrics.polos.scorer:Polos", group="polos",
        needs=frozenset({"images", "references"}), accepts=_IMAGE_IN, range=(0.0, 1.0), extra="hf", in_all=False,
        reference="Wada et al. 2024, Polos: Multimodal Metric Learning from Human Feedback for Image Captioning "
                  "(CVPR 2024)",
        description="Polos: the released regression model on SimCSE-RoBERTa and CLIP ViT-B/32 features of "
                    f"(candidate, reference, image), max over references, batches of "
                    f"{BASELINE_DEFAULTS['polos']['batch_size']} (the paper's evaluation scripts; scores depend on "
                    "the batch); [0, 1]; higher is better "
                    "(`capeval download polos/reprod polos/sup-simcse-roberta-base`)",
    ),
    dict(
        name="bertscore", factory="capeval.metrics.bertscore.scorer:BertScore", group="bertscore",
        needs=frozenset({"references"}), range=(-1.0, 1.0), extra="bertscore", in_all=False,  # a 1.4 GB model
        reference="Zhang et al. 2020, BERTScore: Evaluating Text Generation with BERT (ICLR 2020)",
        aliases=("bert-score", "bert_score"),
        description="BERTScore F1 (max over references; P, R in the extras), bert-score 0.3.13's English defaults: "
                    "roberta-large layer 17, no idf, no baseline rescaling; higher is better",
    ),
    dict(
        name="bertscore++", factory="capeval.metrics.bertscore.plusplus_scorer:BertScorePlusPlus",
        group="bertscore++", needs=frozenset({"references"}), range=(0.0, 1.0), extra="bertscore", in_all=False,
        reference="Yi, Deng & Hu 2020, Improving Image Captioning Evaluation by Considering Inter References "
                  "Variance (ACL 2020)",
        aliases=("bert-s++", "bert-score++"),
        description="BERT-S++: BERTScore recall over each reference combined with the other references' unmatched "
                    "tokens, idf x content-word recall, as the official code: bert-base-uncased layer 8, cosine "
                    "threshold 0.4, its stop-word list; [0, 1]; higher is better (`capeval download bertscore++`)",
    ),
]
