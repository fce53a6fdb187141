"""Tokenizers used by capeval's text metrics.

:func:`ptb_tokenize` / :func:`ptb_tokenize_batch` reproduce pycocoevalcap 1.2's
``PTBTokenizer`` (Stanford CoreNLP 3.4.1 run in Java, lower-cased, punctuation
removed) in pure Python; see :mod:`capeval.tokenize.ptb` for the details.
"""

from .ptb import CONTEXT_CAPTIONS, PUNCTUATIONS, ptb_tokenize, ptb_tokenize_batch, ptb_tokens, warm_up

__all__ = ["CONTEXT_CAPTIONS", "PUNCTUATIONS", "ptb_tokenize", "ptb_tokenize_batch", "ptb_tokens", "warm_up"]
