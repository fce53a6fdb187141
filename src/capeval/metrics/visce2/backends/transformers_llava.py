"""Old import path of :mod:`capeval.judges.transformers_llava`."""

from capeval.judges.transformers_llava import DEFAULT_MODEL, MODELS, Loaded, TransformersLlava

__all__ = ["DEFAULT_MODEL", "MODELS", "Loaded", "TransformersLlava"]
