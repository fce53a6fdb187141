"""Snowball English ("Porter2") stemmer, as the 2015 Java class METEOR 1.5 ships.

METEOR 1.5's stem module calls ``org.tartarus.snowball.ext.englishStemmer`` (the
Snowball release bundled in ``meteor-1.5.jar``). This is an independent Python
implementation of the same algorithm (M. Porter, "The English (Porter2) stemming
algorithm", snowballstem.org) with the behaviour of that release:

* only the prefixes ``gener``, ``commun`` and ``arsen`` get a special R1 (newer Snowball
  releases added ``past``, ``univers``, ``later``, ``emerg``, ``organ``);
* Step 1b has no exceptions for ``-ing`` after ``aeo`` / ``inn`` etc. (newer releases
  keep e.g. ``skating`` / ``inning`` forms differently);
* Step 2 ``-ogi`` needs a preceding ``l``; ``-li`` needs a valid li-ending;
* words shorter than 3 characters are returned unchanged.

Like the Java code it works on UTF-16 code units (so a character outside the Basic
Multilingual Plane counts as two non-vowels); only ``a``-``y`` can be vowels, ``Y``
marks a consonant ``y``.
"""

from __future__ import annotations

from functools import lru_cache

_VOWELS = frozenset("aeiouy")
# v plus w, x and the consonant marker Y: the last letter of a short syllable may not be one
_V_WXY = frozenset("aeiouywxY")
_VALID_LI = frozenset("cdeghkmnrt")
_DOUBLES = ("bb", "dd", "ff", "gg", "mm", "nn", "pp", "rr", "tt")

_EXCEPTION1 = {
    "skis": "ski",
    "skies": "sky",
    "dying": "die",
    "lying": "lie",
    "tying": "tie",
    "idly": "idl",
    "gently": "gentl",
    "ugly": "ugli",
    "early": "earli",
    "only": "onli",
    "singly": "singl",
    # invariant forms
    "sky": "sky",
    "news": "news",
    "howe": "howe",
    "atlas": "atlas",
    "cosmos": "cosmos",
    "bias": "bias",
    "andes": "andes",
}
_EXCEPTION2 = frozenset(("inning", "outing", "canning", "herring", "earring", "proceed", "exceed", "succeed"))
_R1_PREFIXES = ("gener", "commun", "arsen")

# Longest-suffix tables: (suffix, action). Snowball's "among" picks the longest
# matching suffix and, if its condition then fails, does NOT fall back to a shorter one.
_STEP2 = {
    "tional": "tion",
    "enci": "ence",
    "anci": "ance",
    "abli": "able",
    "entli": "ent",
    "izer": "ize",
    "ization": "ize",
    "ational": "ate",
    "ation": "ate",
    "ator": "ate",
    "alism": "al",
    "aliti": "al",
    "alli": "al",
    "fulness": "ful",
    "ousli": "ous",
    "ousness": "ous",
    "iveness": "ive",
    "iviti": "ive",
    "biliti": "ble",
    "bli": "ble",
    "ogi": None,  # -> "og" when preceded by l
    "fulli": "ful",
    "lessli": "less",
    "li": None,  # deleted when preceded by a valid li-ending
}
_STEP3 = {
    "tional": "tion",
    "ational": "ate",
    "alize": "al",
    "icate": "ic",
    "iciti": "ic",
    "ical": "ic",
    "ful": "",
    "ness": "",
    "ative": None,  # deleted only in R2
}
_STEP4 = (
    "al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement", "ment", "ent",
    "ism", "ate", "iti", "ous", "ive", "ize", "ion",
)  # fmt: skip


def _suffix_lists(table) -> list[str]:
    return sorted(table, key=len, reverse=True)


_STEP2_ORDER = _suffix_lists(_STEP2)
_STEP3_ORDER = _suffix_lists(_STEP3)
_STEP4_ORDER = _suffix_lists(_STEP4)
_STEP1B_ORDER = ("eedly", "ingly", "edly", "eed", "ing", "ed")


def _longest(word: str, suffixes) -> str | None:
    for suf in suffixes:
        if word.endswith(suf):
            return suf
    return None


def _regions(w: str) -> tuple[int, int]:
    """R1 and R2 start offsets (Porter2 definition, with the 2015 prefix exceptions)."""
    n = len(w)
    p1 = n
    for pre in _R1_PREFIXES:
        if w.startswith(pre):
            p1 = len(pre)
            break
    else:
        i = 1
        while i < n and not (w[i] not in _VOWELS and w[i - 1] in _VOWELS):
            i += 1
        p1 = min(i + 1, n)
    i = p1 + 1
    while i < n and not (w[i] not in _VOWELS and w[i - 1] in _VOWELS):
        i += 1
    p2 = min(i + 1, n) if p1 < n else n
    return p1, p2


def _short_syllable_at_end(w: str) -> bool:
    """Porter2 "short syllable" ending the string ``w`` (Snowball ``shortv``)."""
    n = len(w)
    if n >= 3 and w[-1] not in _V_WXY and w[-2] in _VOWELS and w[-3] not in _VOWELS:
        return True
    return n == 2 and w[1] not in _VOWELS and w[0] in _VOWELS


def _stem_units(w: str) -> str:
    if len(w) < 3:
        return w
    if w in _EXCEPTION1:
        return _EXCEPTION1[w]

    # prelude: drop one leading apostrophe, mark consonant y as Y
    if w.startswith("'"):
        w = w[1:]
    y_found = False
    if w.startswith("y"):
        w = "Y" + w[1:]
        y_found = True
    if "y" in w:
        chars = list(w)
        for i in range(1, len(chars)):
            if chars[i] == "y" and chars[i - 1] in _VOWELS:
                chars[i] = "Y"
                y_found = True
        w = "".join(chars)

    p1, p2 = _regions(w)

    # Step 1a
    for suf in ("'s'", "'s", "'"):
        if w.endswith(suf):
            w = w[: -len(suf)]
            break
    if w.endswith("sses"):
        w = w[:-2]
    elif w.endswith("ied") or w.endswith("ies"):
        w = w[:-2] if len(w) > 4 else w[:-1]
    elif w.endswith("ss") or w.endswith("us"):
        pass
    elif w.endswith("s"):
        # delete if the part before contains a vowel not immediately before the s
        if any(c in _VOWELS for c in w[:-2]):
            w = w[:-1]

    if w in _EXCEPTION2:
        return _postlude(w, y_found)

    # Step 1b
    suf = _longest(w, _STEP1B_ORDER)
    if suf is not None:
        stem = w[: -len(suf)]
        if suf in ("eed", "eedly"):
            if len(stem) >= p1:
                w = stem + "ee"
        elif any(c in _VOWELS for c in stem):
            w = stem
            if w.endswith(("at", "bl", "iz")):
                w += "e"
            elif w.endswith(_DOUBLES):
                w = w[:-1]
            elif len(w) == p1 and _short_syllable_at_end(w):
                w += "e"

    # Step 1c: y/Y after a non-vowel that is not the first letter -> i
    if len(w) > 2 and w[-1] in "yY" and w[-2] not in _VOWELS:
        w = w[:-1] + "i"

    # Step 2
    suf = _longest(w, _STEP2_ORDER)
    if suf is not None and len(w) - len(suf) >= p1:
        rep = _STEP2[suf]
        base = w[: -len(suf)]
        if suf == "ogi":
            if base.endswith("l"):
                w = base + "og"
        elif suf == "li":
            if base and base[-1] in _VALID_LI:
                w = base
        else:
            w = base + rep

    # Step 3
    suf = _longest(w, _STEP3_ORDER)
    if suf is not None and len(w) - len(suf) >= p1:
        rep = _STEP3[suf]
        if rep is None:
            if len(w) - len(suf) >= p2:
                w = w[: -len(suf)]
        else:
            w = w[: -len(suf)] + rep

    # Step 4
    suf = _longest(w, _STEP4_ORDER)
    if suf is not None and len(w) - len(suf) >= p2:
        if suf == "ion":
            if len(w) > 3 and w[-4] in "st":
                w = w[:-3]
        else:
            w = w[: -len(suf)]

    # Step 5
    if w.endswith("e"):
        pos = len(w) - 1
        if pos >= p2 or (pos >= p1 and not _short_syllable_at_end(w[:-1])):
            w = w[:-1]
    elif w.endswith("l"):
        if len(w) - 1 >= p2 and w[-2:-1] == "l":
            w = w[:-1]

    return _postlude(w, y_found)


def _postlude(w: str, y_found: bool) -> str:
    return w.replace("Y", "y") if y_found else w


@lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """Stem one (lower-cased) word exactly like METEOR 1.5's Snowball English stemmer."""
    if word.isascii() or all(ord(c) < 0x10000 for c in word):
        return _stem_units(word)
    # Work on UTF-16 code units like Java: split astral characters into surrogates.
    units = word.encode("utf-16-le", "surrogatepass")
    as_units = "".join(chr(int.from_bytes(units[i : i + 2], "little")) for i in range(0, len(units), 2))
    out = _stem_units(as_units)
    return out.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
