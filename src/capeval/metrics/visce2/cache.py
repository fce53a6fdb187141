"""Old import path of :mod:`capeval.judges.cache` (VisCE2's generations are stored under ``visce2``)."""

from capeval.judges.cache import FORMAT, AnswerCache, cache_key, open_cache, text_sha

__all__ = ["FORMAT", "AnswerCache", "cache_key", "open_cache", "text_sha"]
