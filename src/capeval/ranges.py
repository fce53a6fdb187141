"""Valid ranges of every numeric option, declared once as data.

:func:`capeval.options.check_options` reads :data:`METRIC_RANGES` (and :data:`COMMON` for
options many scorers share) before any scorer is built; the bench CLI and runner read
:data:`BENCH_RANGES` and each benchmark's ``loader_options``. A test walks the registry and
fails when an int/float constructor option has no range here. Where a bound comes from a
paper or an official implementation, its ``source`` says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Range:
    """``low <= value <= high`` (``low_open``/``high_open``: strict), an integer when ``integer``."""

    low: float | None = None
    high: float | None = None
    integer: bool = False
    low_open: bool = False
    high_open: bool = False
    source: str = ""

    def accepts(self, value: Any) -> bool:
        """Whether the number ``value`` is inside (NaN never is; bools are not numbers here)."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if self.integer and not isinstance(value, int):
            return False
        if isinstance(value, float) and math.isnan(value):
            return False
        if self.low is not None and not (value > self.low if self.low_open else value >= self.low):
            return False
        if self.high is not None and not (value < self.high if self.high_open else value <= self.high):
            return False
        return True

    def describe(self, name: str) -> str:
        """``"n must be an integer >= 1"``, ``"confidence must be a number in (0, 1)"``."""
        kind = "an integer" if self.integer else "a number"
        if self.low is not None and self.high is not None:
            lo, hi = "(" if self.low_open else "[", ")" if self.high_open else "]"
            return f"{name} must be {kind} in {lo}{_num(self.low)}, {_num(self.high)}{hi}"
        if self.low is not None:
            return f"{name} must be {kind} {'>' if self.low_open else '>='} {_num(self.low)}"
        if self.high is not None:
            return f"{name} must be {kind} {'<' if self.high_open else '<='} {_num(self.high)}"
        return f"{name} must be {kind}"


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


POSITIVE_INT = Range(1, integer=True)
NON_NEGATIVE_INT = Range(0, integer=True)
POSITIVE = Range(0, low_open=True)
NON_NEGATIVE = Range(0)

#: options that mean the same for every scorer that takes them
COMMON: dict[str, Range] = {
    "workers": POSITIVE_INT,
    "chunk_size": POSITIVE_INT,
    "batch_size": POSITIVE_INT,
    "text_batch_size": POSITIVE_INT,
    "frame_batch_size": POSITIVE_INT,
}

_W = Range(0, low_open=True, source="w rescales cos(text, image) (Hessel et al. 2021, Eq. 1: w > 0); 0 would "
                                     "make every score 0")

#: the LLM/VLM judges' backend options (capeval.judges.options)
_JUDGE: dict[str, Range] = {
    "concurrency": POSITIVE_INT,
    "timeout": POSITIVE,
    "max_retries": NON_NEGATIVE_INT,
    "retry_backoff": NON_NEGATIVE,
    "temperature": Range(0, 2, source="OpenAI chat API's range; the paper samples at 0.2"),
    "seed": NON_NEGATIVE_INT,
    "max_new_tokens": POSITIVE_INT,
    "top_logprobs": Range(0, 20, integer=True, source="OpenAI chat API's range"),
    "max_response_mb": Range(0, 1024, low_open=True, source="capeval's cap on a server's answer (memory bound); "
                                                            "16 MB holds 20 top log-probs for 1,024 tokens 8 times"),
}

#: metric group -> option -> range (numbers only; strings such as w="paper" are the scorer's to check)
METRIC_RANGES: dict[str, dict[str, Range]] = {
    "rouge-l": {"beta": Range(0, low_open=True, source="F-measure weight; pycocoevalcap rouge.py uses 1.2")},
    "cider-d": {
        "n": Range(1, integer=True, source="longest n-gram; Vedantam et al. 2015 Sec. 4 use n = 1..4"),
        "sigma": Range(0, low_open=True, source="std of the length penalty exp(-d^2 / (2 sigma^2)); "
                                                "pycocoevalcap cider_scorer.py uses 6.0"),
    },
    "clip": {"w": _W},
    "pac-s": {"w": _W},
    "pac-s++": {"w": _W},
    "hice": {
        "w": _W,
        "max_regions": POSITIVE_INT,
        "incorrect_below": NON_NEGATIVE,
        "unmentioned_below": NON_NEGATIVE,
    },
    "capture": {  # capture-metric 0.1.13: alpha + beta == 1 (asserted); gamma weighs relations; eps > 0
        "alpha": Range(0, 1, source="capture-metric 0.1.13 CAPTURE(alpha=0.5); alpha + beta must be 1"),
        "beta": Range(0, 1, source="capture-metric 0.1.13 CAPTURE(beta=0.5); alpha + beta must be 1"),
        "gamma": NON_NEGATIVE,
        "eps": Range(0, 1, low_open=True, source="capture-metric 0.1.13 CAPTURE(eps=1e-6)"),
    },
    "emscore": {"n_frames": POSITIVE_INT, "fps": POSITIVE},
    "pac-s-video": {"n_frames": POSITIVE_INT, "fps": POSITIVE},
    "visce2": _JUDGE,
    # the judges of capeval.judges share visce2's backend options
    "clair": {**{k: r for k, r in _JUDGE.items() if k != "top_logprobs"},
              "tries": Range(1, 100, integer=True, source="DavidMChan/clair clair.py asks up to 3 times")},
    "capability": {**{k: r for k, r in _JUDGE.items() if k != "top_logprobs"},
                   "max_retry_times": Range(0, 100, integer=True, source="ali-vilab/CAPability eval.py "
                                                                          "--max_retry_times 5 (rounds after the first)"),
                   "max_allow_missing": Range(0, 10**6, integer=True, source="ali-vilab/CAPability eval.py "
                                                                             "--max_allow_missing 5 (items per dimension)")},
    "fleur": _JUDGE,
    "vdcscore": {**{k: r for k, r in _JUDGE.items() if k != "top_logprobs"},
                 "top_p": Range(0, 1, low_open=True, source="SGLang's SglSamplingParams default top_p=1.0 "
                                                           "(rese1f/aurora process_vdc_result.py sets none)")},
    "expert": _JUDGE,
    "autodq": {**{k: r for k, r in _JUDGE.items() if k != "top_logprobs"},
               "tries": Range(1, 100, integer=True, source="bytedance/tarsier evaluate_dream_gpt.py: max_retry=10 "
                                                           "per step")},
    "aloha": {**{k: r for k, r in _JUDGE.items() if k != "top_logprobs"},
              "min_object_length": Range(0, 10**6, integer=True, source="DavidMChan/aloha metrics/aloha.py "
                                                                        "min_object_length=3 (characters of a line)"),
              "threshold": Range(-1, 1, source="a cosine (ALOHa_o) below which an object is listed as hallucinated"),
              "max_combinations": Range(1, 10**9, integer=True, source="capeval's bound on the object combinations "
                                                                         "of an item (the official code has none)"),
              "max_objects": Range(1, 10**7, integer=True, source="capeval's bound on the objects one answer may "
                                                                  "list (the official code has none)"),
              "detector_threshold": Range(0, 1, source="DETR score above which a detection is kept; "
                                                       "utils/object_detections.py uses 0.9")},
    "bridge": {"w": _W},
    "spice": {"max_words": Range(1, 10**7, integer=True, source="capeval's bound on a caption's length (SPICE's "
                                                                 "parser has none); items over it are reported")},
    "mid": {
        "eps": Range(0, 1, source="naver-ai/mid.metric: added to the covariances' diagonal before inversion"),
        "limit": Range(2, 10**9, integer=True, source="naver-ai/mid.metric: samples used to estimate the Gaussians"),
        "batch_size": Range(1, 4096, integer=True),
        "text_batch_size": Range(1, 65536, integer=True),
    },
    "polos": {"batch_size": Range(1, 4096, integer=True)},
    "amber": {"similarity_score": Range(-1, 1, source="a cosine threshold; junyangwang0410/AMBER inference.py "
                                                      "--similarity_score 0.8")},
    "bertscore": {
        "num_layers": Range(0, 1024, integer=True, source="bert_score: layers kept (0: the embedding layer); "
                                                          "checked again against the model's depth"),
        "batch_size": Range(1, 4096, integer=True),
    },
    "bertscore++": {
        "num_layers": Range(0, 1024, integer=True, source="BERT-S++ run_metric.py keeps layer[:8]; checked again "
                                                          "against the model's depth"),
        "threshold": Range(0, 1, source="a cosine threshold (run_metric.py THRESHOLD = 0.4; the official maxima "
                                        "start at 0, so a negative one would act as 0)"),
        "batch_size": Range(1, 4096, integer=True),
    },
}

_FRACTION = Range(0, 1, high_open=True)
_TRAIN_COMMON: dict[str, Range] = {
    "lr": POSITIVE,
    "weight_decay": NON_NEGATIVE,
    "temperature": POSITIVE,
    "grad_clip": POSITIVE,
    "max_steps": POSITIVE_INT,
    "max_epochs": POSITIVE_INT,
    "max_train_images": POSITIVE_INT,
    "max_val_images": POSITIVE_INT,
    "max_eval_images": POSITIVE_INT,
    "log_every": POSITIVE_INT,
    "workers": NON_NEGATIVE_INT,
    "seed": Range(0, integer=True, source="numpy's seed sequences take non-negative integers"),
}

#: ``capeval train`` settings, by trainer (YAML keys of the config dataclasses in capeval.train);
#: a test fails when an int/float setting has no range here
TRAIN_RANGES: dict[str, dict[str, Range]] = {
    "pacs": {
        **_TRAIN_COMMON,
        "lora_rank": POSITIVE_INT,
        "lora_alpha": POSITIVE,
        "lambda_v": NON_NEGATIVE,
        "lambda_t": NON_NEGATIVE,
        "batch_size": POSITIVE_INT,
        "grad_accum": POSITIVE_INT,
        "val_every": POSITIVE_INT,
        "patience_steps": NON_NEGATIVE_INT,
    },
    "bridge": {
        **_TRAIN_COMMON,
        "captioner_batch_size": POSITIVE_INT,
        "us": POSITIVE_INT,
        "layers": POSITIVE_INT,
        "heads": POSITIVE_INT,
        "dropout": _FRACTION,
        "lambda1": NON_NEGATIVE,
        "lambda2": NON_NEGATIVE,
        "lambda3": NON_NEGATIVE,
        "train_chunks": POSITIVE_INT,
        "batch_size": Range(2, integer=True, source="an image's negatives are the batch's other images"),
        "patience": NON_NEGATIVE_INT,
        "min_delta": NON_NEGATIVE,
    },
    "captioner": {
        **_TRAIN_COMMON,
        "min_word_count": POSITIVE_INT,
        "max_len": POSITIVE_INT,
        "d_model": POSITIVE_INT,
        "heads": POSITIVE_INT,
        "enc_layers": POSITIVE_INT,
        "dec_layers": POSITIVE_INT,
        "ff_dim": POSITIVE_INT,
        "dropout": _FRACTION,
        "xe_batch_size": POSITIVE_INT,
        "xe_steps": NON_NEGATIVE_INT,
        "xe_lr": POSITIVE,
        "xe_warmup": NON_NEGATIVE_INT,
        "xe_decay_start": NON_NEGATIVE_INT,
        "xe_decay_end": NON_NEGATIVE_INT,
        "xe_lr_min": NON_NEGATIVE,
        "scst_batch_size": POSITIVE_INT,
        "scst_lr": POSITIVE,
        "scst_epochs": NON_NEGATIVE_INT,
        "beam_size": POSITIVE_INT,
        "eval_beam": POSITIVE_INT,
        "checkpoint_every": POSITIVE_INT,
        "adam_eps": Range(0, 1, low_open=True, source="PyTorch's Adam eps; the journal names Adam only"),
    },
}

#: ``capeval bench`` / :func:`capeval.bench.run` settings
BENCH_RANGES: dict[str, Range] = {
    "confidence": Range(0, 1, low_open=True, high_open=True),
    "bootstrap": NON_NEGATIVE_INT,
    "explain_worst": POSITIVE_INT,
    "seed": NON_NEGATIVE_INT,
}

#: ``capeval compare`` / :func:`capeval.compare` settings
COMPARE_RANGES: dict[str, Range] = {
    "samples": Range(1, 10**6, integer=True),
    "seed": Range(0, 2**63 - 1, integer=True, source="numpy's default_rng takes non-negative integers"),
    "confidence": BENCH_RANGES["confidence"],
}


_TOKEN_ID = Range(-(2**63), 2**63 - 1, integer=True, source="a token id held in a torch.LongTensor")
#: :mod:`capeval.reward`'s token-id rewards (CiderDTokens, BleuTokens, group_baseline)
REWARD_TOKEN_RANGES: dict[str, Range] = {
    "n": Range(1, 7, integer=True, source="n = 4 in CIDEr-D and BLEU (pycocoevalcap); up to 7 orders numpy's mean "
                                          "over orders is a left-to-right sum, which the device code repeats"),
    "sigma": Range(0, low_open=True, source="CIDEr-D's Gaussian length penalty exp(-d^2 / (2 sigma^2)); 6 in "
                                            "pycocoevalcap cider_scorer.py"),
    "pad_id": _TOKEN_ID,
    "eos_id": _TOKEN_ID,
    "max_elements": Range(1024, integer=True, source="working-set bound (rows x length x references) per chunk"),
    "group_size": POSITIVE_INT,
}

def check_option(group: str, option: str, value: Any, metric: str | None = None) -> None:
    """One-line :class:`~capeval.errors.InputError` when ``value`` (not None) is outside the
    declared range: the check of a scorer built directly, as :mod:`capeval.options` does first."""
    from capeval.errors import InputError, shown

    bounds = metric_range(group, option)
    if value is not None and bounds is not None and not bounds.accepts(value):
        raise InputError(f"option {metric or group}.{option}={shown(value)} out of range: {bounds.describe(option)}")


def metric_range(group: str, option: str) -> Range | None:
    """The declared range of ``option`` of the scorer of ``group`` (None: not numeric / not declared)."""
    return METRIC_RANGES.get(group, {}).get(option) or COMMON.get(option)
