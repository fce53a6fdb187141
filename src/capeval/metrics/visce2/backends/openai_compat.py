"""Old import path of :mod:`capeval.judges.openai_compat`."""

from capeval.judges.openai_compat import DEFAULT_BASE_URL, OpenAICompat

__all__ = ["DEFAULT_BASE_URL", "OpenAICompat"]
