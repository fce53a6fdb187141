"""Pure-Python re-implementation of pycocoevalcap's ``PTBTokenizer``.

pycocoevalcap 1.2 tokenizes captions by running the Stanford CoreNLP 3.4.1
``PTBTokenizer`` (a JFlex scanner) in a JVM with ``-preserveLines -lowerCase``
on all captions joined by newlines, and then drops the tokens listed in
:data:`PUNCTUATIONS`.  This module reproduces that output without Java.

The JFlex scanner picks, at every position, the rule with the *longest*
match (trailing context included), ties going to the rule listed first.
:func:`_lex` does the same with the ordered rule table of :mod:`.ptb_rules`
(compiled regular expressions built from the grammar's macros in
:mod:`.ptb_macros`, written from the published grammar of the scanner and
calibrated black-box against the 3.4.1 jar, which differs from today's
CoreNLP in many details).  Only the rules whose first character can match
are tried at each position (``_rules_for``).  Two fast paths keep it
quick: whole captions made of plain ASCII words (``_simple``), and plain
words / lone ``, ; : .`` inside the scanner loop.  Results are memoised
per (caption, following context).

Behaviour worth knowing (all identical to the Java pipeline unless noted)
-------------------------------------------------------------------------
* Output is lower-cased; ``. , ? ! : ; - -- ... ' '' ` ``\\`\\``
  -LRB- -RRB- -LCB- -RCB-`` tokens are dropped.  Because the drop list is
  compared *after* lower-casing, brackets survive as ``-lrb-``, ``-rrb-``,
  ``-lsb-``, ``-rsb-``, ``-lcb-``, ``-rcb-`` (a quirk of pycocoevalcap).
* ``""`` and punctuation-only captions give ``""``.
* Contractions split PTB-style: ``don't`` -> ``do n't``, ``I'm`` -> ``i 'm``,
  ``cannot`` -> ``can not``, ``gonna`` -> ``gon na``; possessive ``'s``
  becomes its own token.
* Abbreviations keep their period (``mr.``, ``u.s.``, ``a.m.``, ``etc.``)
  and acronyms before a capitalised function word repeat it:
  ``U.S. The`` -> ``u.s.`` (plus a ``.`` that is then dropped).
* Hyphenated words, slashes between words (``and/or``), numbers with
  commas/decimals (``1,000`` ``3.14``) stay one token; ``1 1/2`` becomes one
  token with a no-break space (U+00A0) inside, as in Java.
* ``&amp;`` -> ``&``, ``&lt;``/``&gt;`` -> ``<``/``>``, ``&quot;`` is a
  quote, ``&nbsp;`` is a space; HTML-like tags such as ``<b>`` are tokens.
* Curly quotes, en/em dashes and the ellipsis character are normalised to
  their PTB forms (and hence dropped); ``¢ £ €`` become ``cents # $``;
  ``½`` becomes ``1/2``.  Characters the scanner does not know (control
  characters, U+FFFD, emoji and everything outside the BMP) are deleted.
  Letters and digits follow Java 7's Unicode tables (generated into
  :mod:`._tables`), not Python's.
* Newlines: pycocoevalcap replaces ``\\n`` in a caption by a space before
  calling Java, and so do we; we also replace ``\\r``, ``\\v``, ``\\f``,
  U+2028 and U+2029 by a space (U+0085 is an ellipsis for Java, and here).
  (In pycocoevalcap any of ``\\r \\v \\f U+2028 U+2029`` would be read by Java
  as a line break and silently shift every later caption onto the wrong
  image; we deliberately do not reproduce that bug.)
* Context across captions: the Java scanner sees all captions as one text,
  so the end of a caption can depend on the start of the next one: a final
  ``t.`` gives ``t`` before ``A ...``/``The ...`` but ``t.`` otherwise, a
  final ``:)`` gives ``-rrb-`` at the very end of the input but ``:-rrb-``
  when another caption follows, ``fig.`` stays ``fig.`` only before a number.  :func:`ptb_tokenize` treats the caption as
  the last (or only) one; :func:`ptb_tokenize_batch` reproduces a single
  pycocoevalcap call over the list in the given order.
* Very long captions are fine (linear time, no recursion).
"""


from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from functools import lru_cache

from .ptb_macros import ABBREV1, ABBREV2, ABBREV3, ACRO_TRAIL, ACRONYM, SENTEND, SPACE
from .ptb_rules import (
    A_ACRONYM,
    A_AMP,
    A_CONST,
    A_CURRENCY,
    A_DUP,
    A_ELLIPSIS,
    A_FRAC2,
    A_HYPHENS,
    A_NBSP,
    A_PAREN,
    A_PB2,
    A_PB3,
    A_PHONE,
    A_QL,
    A_QR,
    A_SKIP,
    A_SOFT,
    A_TOK,
    Rule,
    compile_all,
    rules_starting_with,
)

__all__ = ["CONTEXT_CAPTIONS", "PUNCTUATIONS", "ptb_tokenize", "ptb_tokenize_batch", "ptb_tokens", "warm_up"]

#: Tokens removed by pycocoevalcap after tokenization (compared after lower-casing).
PUNCTUATIONS = frozenset(["''", "'", "``", "`", "-LRB-", "-RRB-", "-LCB-", "-RCB-",
                          ".", "?", "!", ",", ":", "-", "--", "...", ";"])


# ---------------------------------------------------------------------------
# Token post-processing
# ---------------------------------------------------------------------------
_LEFT_SINGLE = re.compile("[\u0091\u2018\u201B\u2039]")
_RIGHT_SINGLE = re.compile("[\u0092\u2019\u203A]")
_LEFT_DOUBLE = re.compile("[\u0093\u201C\u00AB]")
_RIGHT_DOUBLE = re.compile("[\u0094\u201D\u00BB]")
_SQ = re.compile("&apos;|'")
_DQ = re.compile('"|&quot;')
_AMP = re.compile("&amp;", re.IGNORECASE)
_CURRENCY = {"\u00A2": "cents", "\u00A3": "#", "\u0080": "$", "\u00A4": "$", "\u20A0": "$",
             "\u20AC": "$"}
_FRACS = {"\u00BC": "1/4", "\u00BD": "1/2", "\u00BE": "3/4", "\u2153": "1/3", "\u2154": "2/3"}


def _latex_quotes(tok: str, left: bool) -> str:
    if left:
        tok = _SQ.sub("`", tok)
        tok = _DQ.sub("``", tok)
    else:
        tok = _SQ.sub("'", tok)
        tok = _DQ.sub("''", tok)
    tok = _LEFT_SINGLE.sub("`", tok)
    tok = _RIGHT_SINGLE.sub("'", tok)
    tok = _LEFT_DOUBLE.sub("``", tok)
    tok = _RIGHT_DOUBLE.sub("''", tok)
    return tok


def _soft(tok: str) -> str:
    if "\u00AD" in tok:
        tok = tok.replace("\u00AD", "")
        return tok or "-"
    return tok


# Rules that can start at a character, memoised per character (bounded: the text may
# hold any number of distinct characters).
_DISPATCH: dict[str, tuple[Rule, ...]] = {}


def _rules_for(ch: str) -> tuple[Rule, ...]:
    rules = _DISPATCH.get(ch)
    if rules is None:
        rules = rules_starting_with(ch)
        if len(_DISPATCH) < 100000:
            _DISPATCH[ch] = rules
    return rules


# Fast path: a plain ASCII word followed by a blank or the end, or a lone , ; : .
_FAST_WORD = re.compile(r"[A-Za-z]+(?=[ \t\n]|\Z)")
_FAST_PUNCT = re.compile(r"[,;:](?=[ \t]|\Z)|\.(?=\Z|[ \t][^.])")
# a blank run starting with a space or tab: Java's SPACES rule eats it whole (no-break
# and other Unicode spaces included), nothing else can start with a space or tab
_FAST_BLANKS = re.compile("[ \t]" + SPACE + "*")
_SLOW_WORDS = frozenset(["cannot", "gonna", "gotta", "lemme", "gimme", "wanna"])


def _apply(rule: Rule, text: str) -> tuple[str | None, int]:
    """Return (token or None, characters consumed) for a rule matched on ``text``."""
    a = rule.action
    n = len(text)
    if a == A_TOK:
        return text, n
    if a == A_SOFT:
        return _soft(text), n
    if a == A_QR:
        return _latex_quotes(text, False), n
    if a == A_QL:
        return _latex_quotes(text, True), n
    if a == A_SKIP:
        return None, n
    if a == A_AMP:
        return _AMP.sub("&", text), n
    if a == A_NBSP:
        return text.replace(" ", "\u00A0"), n
    if a == A_PHONE:
        return text.replace(" ", "\u00A0").replace("(", "-LRB-").replace(")", "-RRB-"), n
    if a == A_HYPHENS:
        return ("--" if 3 <= n <= 4 else text), n
    if a == A_ELLIPSIS:
        return "...", n
    if a == A_FRAC2:
        return _FRACS.get(text, text), n
    if a == A_CURRENCY:
        return _CURRENCY.get(text, text), n
    if a == A_DUP:          # token keeps its period, the period is re-read
        return text, n - 1
    if a == A_ACRONYM:      # "I." -> "I" + "."; "U.S." -> "U.S." + "."
        if n == 2:
            return text[:1], 1
        return text, n - 1
    if a == A_PAREN:
        return text.replace("(", "-LRB-").replace(")", "-RRB-"), n
    if a == A_PB2:
        return text[:-2], n - 2
    if a == A_PB3:
        return text[:-3], n - 3
    if a == A_CONST:
        return rule.const, n
    raise AssertionError(a)


def _lex(text: str, end: int) -> list[str]:
    """Tokenize ``text[:end]``; ``text[end:]`` is the following context (if any)."""
    tokens: list[str] = []
    pos = 0
    fast_word = _FAST_WORD.match
    fast_punct = _FAST_PUNCT.match
    fast_blanks = _FAST_BLANKS.match
    ascii_only = text.isascii()  # the rules' ASCII forms match the same there, compile faster
    while pos < end:
        m = fast_blanks(text, pos)
        if m is not None:
            pos = m.end()
            continue
        m = fast_word(text, pos)
        if m is not None and m.end() <= end:
            w = m.group()
            if w.lower() not in _SLOW_WORDS:
                tokens.append(w)
                pos = m.end()
                continue
        m = fast_punct(text, pos)
        if m is not None and m.end() <= end:
            tokens.append(m.group())
            pos = m.end()
            continue
        best_len = 0
        best_rule = None
        best_main = ""
        for rule in _DISPATCH.get(text[pos]) or _rules_for(text[pos]):
            for rx in rule.ascii_regexes if ascii_only else rule.regexes:
                m = rx.match(text, pos)
                if m is None:
                    continue
                main_end = m.end()
                if main_end > end:
                    continue
                total = main_end - pos
                if rule.has_trail:
                    total += len(m.group(1))
                if total > best_len:
                    best_len = total
                    best_rule = rule
                    best_main = text[pos:main_end]
        if best_rule is None or not best_main:
            pos += 1            # untokenizable character: deleted (firstDelete)
            continue
        tok, consumed = _apply(best_rule, best_main)
        if tok is not None:
            tokens.append(tok)
        pos += consumed
    return tokens


_LINEBREAKS = re.compile("[\r\n\u000B\u000C\u2028\u2029]")


def _clean(text: str) -> str:
    return _LINEBREAKS.sub(" ", text)


def _finish(tokens: list[str]) -> str:
    line = " ".join(tokens).lower().rstrip()
    return " ".join(w for w in line.split(" ") if w not in PUNCTUATIONS)


# Context that the next caption provides to the end of the current one.
_CTX_SENTEND = re.compile(SENTEND)
_CTX_ACRO = re.compile(ACRO_TRAIL)
_BLANK = re.compile(SPACE + "*")


#: captions after a caption that can change its tokens (a run of blank ones, then one more)
CONTEXT_CAPTIONS = 10


def _context(texts: list[str], i: int) -> str:
    """A short suffix equivalent, for the lexer, to what follows caption ``i`` in the
    newline-joined text (``""`` at the end of the text)."""
    if i + 1 >= len(texts):
        return ""
    parts = []
    j = i + 1
    while j < len(texts):
        parts.append("\n" + texts[j])
        if _BLANK.fullmatch(texts[j]) is None or len(parts) > 8:
            break
        j += 1
    follow = "".join(parts)
    m = _CTX_ACRO.match(follow)
    if m is not None:
        return m.group()
    m = _CTX_SENTEND.match(follow)
    if m is not None:
        return m.group()
    return follow[:3]


# Whole-caption fast path: plain ASCII words separated by blanks, optionally with a
# comma after a word and a final period.  For such captions the scanner's output is
# just the words, whatever follows, unless a word is one of the split words
# (``cannot``, ``gonna``...) or the final ``word.`` is an abbreviation.
_SIMPLE = re.compile(r"[ \t]*(?:[A-Za-z]+,?[ \t]+)*[A-Za-z]+(?:[ \t]?\.)?[ \t]*\Z")
_SIMPLE_SPLIT = re.compile(r"[ \t,.]+")
_ABBREV_LAST = re.compile("(?:%s)" % "|".join([ABBREV1, ABBREV2, ABBREV3, ACRONYM]))


def _simple(text: str) -> str | None:
    if _SIMPLE.match(text) is None:
        return None
    words = _SIMPLE_SPLIT.split(text.strip(" \t").lower())
    if words[-1] == "":
        words.pop()
    if not _SLOW_WORDS.isdisjoint(words):
        return None
    last = text.rstrip(" \t")
    if last.endswith(".") and _ABBREV_LAST.fullmatch(last.rsplit(None, 1)[-1]):
        return None
    return " ".join(words)


# bounded: repeated captions are mostly near each other (one image's references)
@lru_cache(maxsize=1 << 15)
def _simple_cached(text: str) -> str | None:
    return _simple(text)


@lru_cache(maxsize=1 << 15)
def _tokenize_cached(text: str, ctx: str) -> str:
    out = _simple_cached(text)
    if out is not None:
        return out
    return _finish(_lex(text + ctx, len(text)))


def warm_up() -> None:
    """Build and compile the scanner's whole rule table, in the ASCII forms that ASCII
    captions use, now (~0.03 s; otherwise each rule is compiled on first need): before
    forking worker processes, so that they share it instead of each compiling the rules it
    meets. A caption with other characters compiles the full forms of the rules it needs."""
    compile_all()


def ptb_tokens(text: str) -> list[str]:
    """Raw Java tokens (before lower-casing and punctuation removal) of one caption."""
    text = _clean(text)
    return _lex(text, len(text))


def ptb_tokenize(text: str) -> str:
    """Tokenize one caption exactly as pycocoevalcap's PTBTokenizer would (the caption
    being the last, or only, one of the call).  Returns the space-joined tokens."""
    return _tokenize_cached(_clean(text), "")


def ptb_tokenize_batch(
    texts: Iterable[str],
    on_progress: Callable[[int], None] | None = None,
    following: Iterable[str] = (),
) -> list[str]:
    """Tokenize captions exactly as one pycocoevalcap ``PTBTokenizer.tokenize`` call over
    them in this order (a caption's last token can depend on the next caption).

    pycocoevalcap's order is its input dict's: image ids in iteration order, each
    image's captions in list order.  Results are memoised (repeated captions are
    nearly free).  ``on_progress(k)`` is called after every ``k`` captions (for a progress bar).
    ``following``: the captions that come after ``texts`` in the same call, when the call
    is tokenised in pieces; only the first :data:`CONTEXT_CAPTIONS` of them are read."""
    texts = [_clean(t) for t in texts]
    n = len(texts)
    if following:
        texts += [_clean(t) for _, t in zip(range(CONTEXT_CAPTIONS), following)]
    out = []
    for i in range(n):
        t = texts[i]
        tok = _simple_cached(t)  # the common case, whatever follows: no context needed
        if tok is None:
            tok = _tokenize_cached(t, _context(texts, i) if i + 1 < len(texts) else "")
        out.append(tok)
        if on_progress is not None and (i + 1) % 2048 == 0:
            on_progress(2048)
    if on_progress is not None and n % 2048:
        on_progress(n % 2048)
    return out
