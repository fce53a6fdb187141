"""METEOR 1.5 ``-norm`` text normalisation (``edu.cmu.meteor.util.Normalizer``), in Python.

With ``-norm`` METEOR 1.5 normalises each line for English, keeping punctuation:

1. separate every character that is not alphanumeric, whitespace, ``. ' ` , -`` or a
   curly single quote;
2. protect runs of dots (``...``), split commas that are not inside numbers;
3. map curly/back quotes to ``'``, curly double quotes and ``''`` to ``"``, en-dash and
   ``--`` to ``-``, split hyphens between alphanumerics;
4. split English contractions (``it's`` -> ``it 's``, ``can't`` -> ``can 't``);
5. split a sentence-final period from a token unless the token is a non-breaking prefix
   (``Mr.``, ``e.g.`` ...) or is followed by a lower-case word;
6. collapse whitespace; then the caller lower-cases.

Java's regex classes are ASCII-only here (``\\s``, ``\\p{Digit}``, ``\\p{Lower}``), so
the patterns spell them out instead of using Python's Unicode-aware shorthands.

This module also holds the few Java string semantics the scorer must copy:
``String.trim``, ``StringTokenizer`` and ``String.hashCode``.
"""

from __future__ import annotations

import re
from functools import lru_cache

# Letters the Java normaliser treats as alphabetic (Latin, Latin-1/Extended-A, Cyrillic, ...).
_ALPHA = (
    "A-Za-z\u0160\u017d\u0161\u017e\u0178\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u017e"
    "\u0400-\u04ff\u0500-\u0527\ua640-\ua66e\ua67e-\ua697\u1d00-\u1d7f"
)
_ALNUM = "0-9" + _ALPHA
_JAVA_SPACE = " \t\n\x0b\f\r"  # java.util.regex \s without UNICODE_CHARACTER_CLASS

_SEP_OTHER = re.compile("([^" + _ALNUM + _JAVA_SPACE + "\\.'`,\\-\u2018\u2019])")
_MULTI_DOT = re.compile(r"\.(\.+)")
_MULTI_DOT2 = re.compile(r"DOTMULTI\.([^.])")
_COMMA = re.compile(r"([^0-9]),([^0-9])")
_COMMA2 = re.compile(r"([0-9]),([^0-9])")
_COMMA3 = re.compile(r"([^0-9]),([0-9])")
_QUOTE = re.compile("([`\u2018\u2019])")
_QUOTE2 = re.compile("([\u201c\u201d]|'')")
_RM_DASH = re.compile("([" + _ALNUM + "\\.])-([" + _ALNUM + "])")
_CONT1 = re.compile("([^" + _ALPHA + "])'([^" + _ALPHA + "])")
_CONT2 = re.compile("([^" + _ALPHA + "0-9])'([" + _ALPHA + "])")
_CONT3 = re.compile("([" + _ALPHA + "])'([^" + _ALPHA + "])")
_CONT4 = re.compile("([" + _ALPHA + "])'([" + _ALPHA + "])")
_CONT5 = re.compile("([0-9])'(s)")
_NBP_ALPHA = re.compile("[" + _ALPHA + "]")
_STARTS_LOWER = re.compile("^[a-z]")
_STARTS_DIGIT = re.compile("^[0-9]+")
# Java's r_white lists these explicitly; note that tab and newline are NOT in it.
_WHITE = re.compile("[ \u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u3000\u00a0]+")

_TOKEN_DELIMS = re.compile("[ \t\n\r\f]+")  # java.util.StringTokenizer defaults


_JAVA_TRIM = "".join(map(chr, range(0x21)))


def java_trim(s: str) -> str:
    """``String.trim()``: strip every char <= U+0020 from both ends."""
    return s.strip(_JAVA_TRIM)


def java_tokens(s: str) -> list[str]:
    """``new StringTokenizer(s)`` tokens (delimiters: space, tab, LF, CR, FF only)."""
    return [t for t in _TOKEN_DELIMS.split(s) if t]


@lru_cache(maxsize=1 << 17)
def java_hash(s: str) -> int:
    """``String.hashCode()`` (signed 32-bit, over UTF-16 code units).

    METEOR compares words by hash code, so two different words with equal hashes
    count as an exact match in Java; matching on the hash keeps that behaviour.
    """
    h = 0
    if s.isascii():
        for c in s.encode("ascii"):
            h = (31 * h + c) & 0xFFFFFFFF
    else:
        data = s.encode("utf-16-be", "surrogatepass")
        for i in range(0, len(data), 2):
            h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


def parse_nonbreaking_prefixes(text: str) -> dict[str, int]:
    """Parse ``nonbreaking/english.prefixes``: prefix -> 1 (always) or 2 (before numbers only)."""
    table: dict[str, int] = {}
    for line in text.splitlines():
        toks = java_tokens(line)
        if not toks or toks[0].startswith("#"):
            continue
        table[toks[0]] = 2 if len(toks) > 1 and toks[1] == "#NUMERIC_ONLY#" else 1
    return table


_PLAIN = re.compile("[a-z0-9 ]*")


def normalize_line(line: str, nonbreaking: dict[str, int]) -> str:
    """``Normalizer.normalizeLine(line, english, keepPunctuation=true)`` (not lower-cased)."""
    if _PLAIN.fullmatch(line):
        # Only lower-case ASCII letters, digits and spaces: no rule below applies (none
        # matches without punctuation or upper case), so the result is the tokens
        # joined by single spaces.
        return " ".join(line.split())
    s = _SEP_OTHER.sub(r" \1 ", " " + line + " ")
    s = _MULTI_DOT.sub(r" DOTMULTI\1", s)
    while "DOTMULTI." in s:
        s = _MULTI_DOT2.sub(r"DOTDOTMULTI \1", s).replace("DOTMULTI.", "DOTDOTMULTI")
    s = _COMMA.sub(r"\1 , \2", s)
    s = _COMMA2.sub(r"\1 , \2", s)
    s = _COMMA3.sub(r"\1 , \2", s)
    s = _QUOTE.sub("'", s)
    s = _QUOTE2.sub(' " ', s)
    s = s.replace("\u2013", "-").replace("--", "-")
    s = _RM_DASH.sub(r"\1 \2", s)
    # English contractions
    s = _CONT1.sub(r"\1 ' \2", s)
    s = _CONT2.sub(r"\1 ' \2", s)
    s = _CONT3.sub(r"\1 ' \2", s)
    s = _CONT4.sub(r"\1 '\2", s)
    s = _CONT5.sub(r"\1 '\2", s)

    toks = java_tokens(s)
    out: list[str] = []
    last = len(toks) - 1
    for j, tok in enumerate(toks):
        if len(tok) > 1 and tok.endswith("."):
            pre = tok[:-1]
            kind = nonbreaking.get(pre)
            if "." in pre and _NBP_ALPHA.search(pre):
                out.append(tok.replace(".", ""))  # acronyms like U.S. lose their dots
            elif kind == 1 or (j < last and _STARTS_LOWER.match(toks[j + 1])):
                out.append(tok)
            elif kind == 2 and j < last and _STARTS_DIGIT.match(toks[j + 1]):
                out.append(tok)
            else:
                out.append(pre + " .")
        else:
            out.append(tok)
        out.append(" ")
    s = "".join(out)
    while "DOTDOTMULTI" in s:
        s = s.replace("DOTDOTMULTI", "DOTMULTI.")
    s = s.replace("DOTMULTI", ".")
    return java_trim(_WHITE.sub(" ", s))


def java_lower(s: str) -> str:
    """``String.toLowerCase()`` in a non-Turkish locale (same as ``str.lower`` for our inputs)."""
    return s.lower()
