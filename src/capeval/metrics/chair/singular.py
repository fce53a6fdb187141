"""Noun singularisation as CHAIR computes it: ``pattern.en.singularize`` (Pattern 3.6, the
version LisaAnne/Hallucination's requirements.txt pins), not a lemmatiser.

The word lists and suffix rules below are Pattern's data (clips/pattern,
``pattern/text/en/inflect.py``, BSD licence, (c) 2011-2013 University of Antwerp); the lookup
order is Pattern's, quirks included, because CHAIR's published numbers come from them:

- a word that is a *suffix* of an uninflected or uncountable word is returned unchanged
  (Pattern tests ``x.endswith(w)``): ``ears`` (of ``shears``), ``apes`` (of ``jackanapes``),
  ``s``, ``a``, ``under`` stay as they are;
- ``-ie`` exceptions are tested as ``w.endswith(x + "s")``, so the two entries written as
  regular expressions (``^pie``, ``^tie``) never match;
- a token ending in an apostrophe becomes ``singularize(token[:-1]) + "'s"`` (the lone token
  ``'`` becomes ``'s``);
- the first suffix rule that matches wins (e.g. ``glasses`` -> ``glass``, ``glass`` -> ``glas``,
  which is why CHAIR maps the double word ``wine glas`` back to ``wine glass``).
"""

from __future__ import annotations

import re
from functools import lru_cache

_PLURAL_PREPOSITIONS = frozenset((
    "about", "before", "during", "of", "till", "above", "behind", "except", "off", "to", "across", "below",
    "for", "on", "under", "after", "beneath", "from", "onto", "until", "among", "beside", "in", "out", "unto",
    "around", "besides", "into", "over", "upon", "at", "between", "near", "since", "with", "athwart",
    "betwixt", "beyond", "but", "by",
))

_UNINFLECTED = (
    "bison", "debris", "headquarters", "pincers", "trout", "bream", "diabetes", "herpes", "pliers", "tuna",
    "breeches", "djinn", "high-jinks", "proceedings", "whiting", "britches", "eland", "homework", "rabies",
    "wildebeest", "carp", "elk", "innings", "salmon", "chassis", "flounder", "jackanapes", "scissors",
    "christmas", "gallows", "mackerel", "series", "clippers", "georgia", "measles", "shears", "cod", "graffiti",
    "mews", "species", "contretemps", "mumps", "swine", "corps", "news", "swiss",
)
_UNCOUNTABLE = (
    "advice", "equipment", "happiness", "luggage", "news", "software", "bread", "fruit", "information",
    "mathematics", "progress", "understanding", "butter", "furniture", "ketchup", "mayonnaise", "research",
    "water", "cheese", "garbage", "knowledge", "meat", "rice", "electricity", "gravel", "love", "mustard", "sand",
)
_IE_EXCEPTIONS = (
    "alergie", "cutie", "hoagie", "newbie", "softie", "veggie", "auntie", "doggie", "hottie", "nightie", "sortie",
    "weenie", "beanie", "eyrie", "indie", "oldie", "stoolie", "yuppie", "birdie", "freebie", "junkie", "^pie",
    "sweetie", "zombie", "bogie", "goonie", "laddie", "pixie", "techie", "bombie", "groupie", "laramie",
    "quickie", "^tie", "collie", "hankie", "lingerie", "reverie", "toughie", "cookie", "hippie", "meanie",
    "rookie", "valkyrie",
)
# no key is a suffix of another, so Pattern's (Python 2, unordered) dict walk is deterministic
_IRREGULAR = {
    "atlantes": "atlas", "atlases": "atlas", "axes": "axe", "beeves": "beef", "brethren": "brother",
    "children": "child", "corpora": "corpus", "corpuses": "corpus", "ephemerides": "ephemeris", "feet": "foot",
    "ganglia": "ganglion", "geese": "goose", "genera": "genus", "genii": "genie", "graffiti": "graffito",
    "helves": "helve", "kine": "cow", "leaves": "leaf", "loaves": "loaf", "men": "man", "mongooses": "mongoose",
    "monies": "money", "moves": "move", "mythoi": "mythos", "numena": "numen", "occipita": "occiput",
    "octopodes": "octopus", "opera": "opus", "opuses": "opus", "our": "my", "oxen": "ox", "penes": "penis",
    "penises": "penis", "people": "person", "sexes": "sex", "soliloquies": "soliloquy", "teeth": "tooth",
    "testes": "testis", "trilbys": "trilby", "turves": "turf", "zoa": "zoon",
}
_IRREGULAR_RE = {k: re.compile("(?i)" + k + "$") for k in _IRREGULAR}

# (suffix pattern, replacement) in Pattern's order; the first that matches is applied
_RULES = tuple((re.compile(p), r) for p, r in (
    (r"(?i)(.)ae$", r"\1a"), (r"(?i)(.)itis$", r"\1itis"), (r"(?i)(.)eaux$", r"\1eau"),
    (r"(?i)(quiz)zes$", r"\1"), (r"(?i)(matr)ices$", r"\1ix"), (r"(?i)(ap|vert|ind)ices$", r"\1ex"),
    (r"(?i)^(ox)en", r"\1"), (r"(?i)(alias|status)es$", r"\1"), (r"(?i)([octop|vir])i$", r"\1us"),
    (r"(?i)(cris|ax|test)es$", r"\1is"), (r"(?i)(shoe)s$", r"\1"), (r"(?i)(o)es$", r"\1"),
    (r"(?i)(bus)es$", r"\1"), (r"(?i)([m|l])ice$", r"\1ouse"), (r"(?i)(x|ch|ss|sh)es$", r"\1"),
    (r"(?i)(m)ovies$", r"\1ovie"), (r"(?i)(.)ombies$", r"\1ombie"), (r"(?i)(s)eries$", r"\1eries"),
    (r"(?i)([^aeiouy]|qu)ies$", r"\1y"),
    (r"([aeo]l)ves$", r"\1f"), (r"([^d]ea)ves$", r"\1f"), (r"arves$", "arf"), (r"erves$", "erve"),
    (r"([nlw]i)ves$", r"\1fe"), (r"(?i)([lr])ves$", r"\1f"), (r"([aeo])ves$", r"\1ve"),
    (r"(?i)(sive)s$", r"\1"), (r"(?i)(tive)s$", r"\1"), (r"(?i)(hive)s$", r"\1"), (r"(?i)([^f])ves$", r"\1fe"),
    (r"(?i)(^analy)ses$", r"\1sis"),
    (r"(?i)((a)naly|(b)a|(d)iagno|(p)arenthe|(p)rogno|(s)ynop|(t)he)ses$", r"\1\2sis"),
    (r"(?i)(.)opses$", r"\1opsis"), (r"(?i)(.)yses$", r"\1ysis"), (r"(?i)(h|d|r|o|n|b|cl|p)oses$", r"\1ose"),
    (r"(?i)(fruct|gluc|galact|lact|ket|malt|rib|sacchar|cellul)ose$", r"\1ose"), (r"(?i)(.)oses$", r"\1osis"),
    (r"(?i)([ti])a$", r"\1um"), (r"(?i)(n)ews$", r"\1ews"), (r"(?i)s$", ""),
))


@lru_cache(maxsize=1 << 16)
def singularize(word: str) -> str:
    """``pattern.en.singularize(word)`` (noun, no custom table); see the module docs for its quirks."""
    if "-" in word:
        parts = word.split("-")
        if len(parts) > 1 and parts[1] in _PLURAL_PREPOSITIONS:
            return singularize(parts[0]) + "-" + "-".join(parts[1:])
    if word.endswith("'"):
        return singularize(word[:-1]) + "'s"
    low = word.lower()
    if any(x.endswith(low) for x in _UNINFLECTED) or any(x.endswith(low) for x in _UNCOUNTABLE):
        return word
    if any(low.endswith(x + "s") for x in _IE_EXCEPTIONS):
        return low
    for plural, single in _IRREGULAR.items():
        if low.endswith(plural):
            return _IRREGULAR_RE[plural].sub(single, word)
    for suffix, replacement in _RULES:
        if suffix.search(word):
            # Pattern strips the references to groups that took no part in the match; Python 3's
            # re.sub substitutes nothing for them, the same result
            return suffix.sub(replacement, word)
    return word
