"""The rule table of the CoreNLP 3.4.1 ``PTBLexer`` (JFlex), for the scanner in :mod:`.ptb`.

:data:`RULES` lists the scanner's rules in the grammar's order (the order breaks ties between
matches of equal length). A rule is a main pattern, optionally a trailing context (JFlex's
``main/trail``: the context counts towards the match length but is not consumed), and an
action saying what token the matched text gives (``A_*``, applied by the scanner).

:func:`rules_starting_with` narrows the table to the rules whose match can start with a
given character, from a first-character set derived from each parsed pattern.

Each rule also has an ASCII form (:attr:`Rule.ascii_regexes`), used on text made only of
ASCII characters (nearly every caption): the Unicode letter, digit and symbol classes cut
to their ASCII members. On such text the two forms match the same strings, and the ASCII
form compiles several times faster (``re`` expands a class code point by code point; the
letter class alone holds 48,462 of them).
"""

from __future__ import annotations

import re
from functools import lru_cache

from ._tables import DIGIT, LETTER, SYMBOL, WORD_EXTRA
from .ptb_macros import (
    ABBREV1,
    ABBREV2,
    ABBREV3,
    ABBREV4,
    ACRO,
    ACRO_TRAIL,
    ACRONYM,
    APOWORD2,
    APOWORD_ALTS,
    ASIANSMILEY,
    DATE,
    DBLQUOT,
    DIG,
    DOLSIGN,
    DOLSIGN2,
    EMAIL,
    FILENAME,
    FRAC,
    FRAC2,
    FULLURL,
    HTHING,
    INSENTP,
    LDOTS,
    LET,
    LIKELYURL,
    MISCSYMBOL,
    NEWLINE,
    NUMBER,
    PHONE,
    QUOTES,
    REDAUX,
    SENTEND,
    SGML,
    SMILEY,
    SPACE,
    SPACENL,
    SPACES,
    SPAMP,
    SREDAUX,
    SUBSUPNUM,
    SWORD,
    TBSPEC,
    TBSPEC2,
    THING,
    THING3,
    THINGA,
    TWITTER,
    WORD,
    caseless,
    caseless_alt,
)

# Actions: what the scanner does with a rule's match (see ``ptb._apply``): keep it, strip
# soft hyphens, LaTeX-style quotes, skip it, ...; some give back characters to be re-read.
A_TOK, A_SOFT, A_QR, A_QL, A_SKIP, A_AMP, A_NBSP, A_PHONE, A_HYPHENS, A_ELLIPSIS, \
    A_FRAC2, A_CURRENCY, A_DUP, A_PB2, A_PB3, A_ACRONYM, A_CONST, A_PAREN = range(18)


def _ascii_members(ranges: str) -> str:
    """A class body (single characters and ``a-b`` ranges, as in :mod:`._tables`) cut to its
    ASCII members, plus its first non-ASCII member so that the class is never empty: the
    same class for ASCII text."""
    members: list[str] = []
    other = ""
    i, n = 0, len(ranges)
    while i < n:
        lo = hi = ranges[i]
        if i + 2 < n and ranges[i + 1] == "-":
            hi = ranges[i + 2]
            i += 3
        else:
            i += 1
        members += [re.escape(chr(c)) for c in range(ord(lo), min(ord(hi), 127) + 1)]
        if not other and ord(hi) > 127:
            other = chr(max(ord(lo), 128))
    return "".join(members) + other


# (class body as the macros spell it, its ASCII form); the generated bodies hold no escapes
_ASCII_FORMS = tuple((body, _ascii_members(body)) for body in (LETTER, WORD_EXTRA, DIGIT, SYMBOL))


def ascii_pattern(pattern: str) -> str:
    """``pattern`` with the Unicode classes of :mod:`._tables` cut to their ASCII members
    (matches what ``pattern`` matches, on text made only of ASCII characters)."""
    for body, short in _ASCII_FORMS:
        pattern = pattern.replace(body, short)
    return pattern


class Rule:
    """One scanner rule: alternatives of ``main`` (each followed, when ``trail`` is given, by
    a look-ahead capturing the trailing context as group 1), an action and, for ``A_CONST``,
    the constant token. ``regexes`` (any text) and ``ascii_regexes`` (ASCII text only) are
    compiled on first use (most captions need few rules)."""

    __slots__ = ("name", "patterns", "_regexes", "_ascii_regexes", "action", "const", "has_trail")

    def __init__(self, name, main, trail=None, action=A_TOK, const=None):
        self.name = name
        alts = main if isinstance(main, list) else [main]
        if trail is None:
            self.patterns = ["(?:" + a + ")" for a in alts]
            self.has_trail = False
        else:
            self.patterns = ["(?:" + a + ")(?=(" + trail + "))" for a in alts]
            self.has_trail = True
        self._regexes: list[re.Pattern[str]] | None = None
        self._ascii_regexes: list[re.Pattern[str]] | None = None
        self.action = action
        self.const = const

    @property
    def regexes(self) -> list[re.Pattern[str]]:
        if self._regexes is None:
            self._regexes = [re.compile(p) for p in self.patterns]
        return self._regexes

    @property
    def ascii_regexes(self) -> list[re.Pattern[str]]:
        if self._ascii_regexes is None:
            self._ascii_regexes = [re.compile(ascii_pattern(p)) for p in self.patterns]
        return self._ascii_regexes


def build_rules() -> list[Rule]:
    """The rules of the 3.4.1 grammar, in its order."""
    R = Rule
    acro_trail = ACRO_TRAIL
    return [
        R("PROG_LANGS", caseless("c++") + "|" + caseless_alt("c|f") + "#"),
        R("ASSIM3", caseless_alt("cannot") + "|'" + caseless("twas"), action=A_PB3),
        R("ASSIM2", "'" + caseless("tis") + "|" + caseless_alt("gonna|gotta|lemme|gimme|wanna"), action=A_PB2),
        R("SGML", SGML, action=A_NBSP),
        R("SPMDASH", caseless("&") + caseless_alt("MD|mdash|ndash") + ";|[\u0096\u0097\u2013\u2014\u2015]",
          action=A_CONST, const="--"),
        R("SPAMP", SPAMP, action=A_AMP),
        R("SPPUNC", "&(?:" + caseless_alt("HT|TL|UR|LR|QC|QL|QR|odq|cdq") + "|#[0-9]+);"),
        R("WORD/REDAUX", WORD, REDAUX, action=A_SOFT),
        R("SWORD/SREDAUX", SWORD, SREDAUX, action=A_SOFT),
        R("WORD", WORD, action=A_SOFT),
        R("APOWORD", APOWORD_ALTS),
        R("APOWORD2", APOWORD2, LET),
        R("FULLURL", FULLURL),
        R("LIKELYURL", LIKELYURL),
        R("EMAIL", EMAIL),
        R("TWITTER", TWITTER),
        R("REDAUX/", REDAUX, "[^A-Za-z]", action=A_QR),
        R("SREDAUX", SREDAUX, action=A_QR),
        R("DATE", DATE),
        R("NUMBER", NUMBER, action=A_SOFT),
        R("SUBSUPNUM", SUBSUPNUM),
        R("FRAC", FRAC, action=A_NBSP),
        R("FRAC2", FRAC2, action=A_FRAC2),
        R("TBSPEC", TBSPEC, action=A_AMP),
        R("THING3", THING3),
        R("DOLSIGN", DOLSIGN),
        R("DOLSIGN2", DOLSIGN2, action=A_CURRENCY),
        R("ACRONYM/", ACRONYM, acro_trail, action=A_ACRONYM),
        R("ABBREV3/", ABBREV3, SPACENL + "?" + DIG),
        R("ABBREV1/", ABBREV1, SENTEND, action=A_DUP),
        R("ABBREV1//", ABBREV1, "[\\s\\S]{2}"),
        R("ABBREV1", ABBREV1, action=A_DUP),
        R("ABBREV2", ABBREV2),
        R("ABBREV4/", ABBREV4, SPACE),
        R("ACRO/", ACRO, SPACENL),
        R("TBSPEC2/", TBSPEC2, SPACENL),
        R("FILENAME/", FILENAME, "[.?!,]|" + SPACENL),
        R("WORD./", WORD + "\\.", INSENTP, action=A_SOFT),
        R("PHONE", PHONE, action=A_PHONE),
        R("DBLQUOT/", DBLQUOT, "[A-Za-z0-9$]", action=A_QL),
        R("DBLQUOT", DBLQUOT, action=A_QR),
        R("LT", "<|" + caseless("&lt;"), action=A_CONST, const="<"),
        R("GT", ">|" + caseless("&gt;"), action=A_CONST, const=">"),
        R("SMILEY/", SMILEY, "[^A-Za-z0-9]", action=A_PAREN),
        R("ASIANSMILEY", ASIANSMILEY, action=A_PAREN),
        R("LCB", "\\{", action=A_CONST, const="-LCB-"),
        R("RCB", "\\}", action=A_CONST, const="-RCB-"),
        R("LSB", "\\[", action=A_CONST, const="-LSB-"),
        R("RSB", "\\]", action=A_CONST, const="-RSB-"),
        R("LRB", "\\(", action=A_CONST, const="-LRB-"),
        R("RRB", "\\)", action=A_CONST, const="-RRB-"),
        R("HYPHENS", "-+", action=A_HYPHENS),
        R("LDOTS", LDOTS, action=A_ELLIPSIS),
        R("FNMARKS", "@+|#+|_+"),
        R("ASTS", r"\*+|(?:\\\*){1,3}"),
        R("INSENTP", INSENTP),
        R("QE", "[?!]+"),
        R("PERIOD", "[.\u00A1\u00BF\u037E\u0589\u061F\u06D4\u0700-\u0702\u07FA\u3002]"),
        R("EQ", "="),
        R("SLASH", "/"),
        R("HTHING./", HTHING + "\\.", INSENTP, action=A_SOFT),
        R("HTHING", HTHING, action=A_SOFT),
        R("THING./", THING + "\\.", INSENTP),
        R("THING", THING),
        R("THINGA./", THINGA + "\\.", INSENTP, action=A_AMP),
        R("THINGA", THINGA, action=A_AMP),
        R("QUOTE/", "'", "[A-Za-z][^ \t\n\r\u00A0]", action=A_QL),
        R("REDAUX", REDAUX, action=A_QR),
        R("QUOTES", QUOTES, action=A_QR),
        R("DUCKFEET", "<<|>>"),
        R("MISCSYMBOL", MISCSYMBOL),
        R("SPACE", "\0|" + SPACES + "|[\u200B\u200E\u200F\uFEFF]|" + caseless("&nbsp;"), action=A_SKIP),
        R("NEWLINE", NEWLINE, action=A_SKIP),
    ]


# ---------------------------------------------------------------------------
# First-character dispatch: for each rule, a regex matching the characters its
# match can start with (derived from the parsed pattern, a superset is fine), so
# that at each position only the rules that can apply are tried.
# ---------------------------------------------------------------------------
try:  # Python >= 3.11
    from re import _constants as _sre_c
    from re import _parser as _sre_p
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as _sre_c  # type: ignore[no-redef]
    import sre_parse as _sre_p  # type: ignore[no-redef]

_CATS = {_sre_c.CATEGORY_DIGIT: r"\d", _sre_c.CATEGORY_NOT_DIGIT: r"\D",
         _sre_c.CATEGORY_SPACE: r"\s", _sre_c.CATEGORY_NOT_SPACE: r"\S",
         _sre_c.CATEGORY_WORD: r"\w", _sre_c.CATEGORY_NOT_WORD: r"\W"}


def _first(seq, pieces: list[str]) -> bool:
    """Add to ``pieces`` regexes for the possible first characters of ``seq``;
    return whether ``seq`` can match the empty string."""
    for op, av in seq:
        if op is _sre_c.LITERAL:
            pieces.append(re.escape(chr(av)))
            return False
        if op is _sre_c.NOT_LITERAL:
            pieces.append("[^%s]" % re.escape(chr(av)))
            return False
        if op is _sre_c.ANY:
            pieces.append("(?s:.)")
            return False
        if op is _sre_c.IN:
            cls = []
            for iop, iav in av:
                if iop is _sre_c.NEGATE:
                    cls.insert(0, "^")
                elif iop is _sre_c.LITERAL:
                    cls.append(re.escape(chr(iav)))
                elif iop is _sre_c.RANGE:
                    cls.append("%s-%s" % (re.escape(chr(iav[0])), re.escape(chr(iav[1]))))
                elif iop is _sre_c.CATEGORY:
                    cls.append(_CATS[iav])
                else:  # pragma: no cover - unknown class item: be conservative
                    cls = ["\\s\\S"]
                    break
            pieces.append("[%s]" % "".join(cls))
            return False
        if op is _sre_c.SUBPATTERN:
            if not _first(av[-1], pieces):
                return False
        elif op is _sre_c.BRANCH:
            nullable = False
            for branch in av[1]:
                nullable |= _first(branch, pieces)
            if not nullable:
                return False
        elif op in (_sre_c.MAX_REPEAT, _sre_c.MIN_REPEAT):
            if not _first(av[2], pieces) and av[0] > 0:
                return False
        elif op in (_sre_c.AT, _sre_c.ASSERT, _sre_c.ASSERT_NOT):
            continue            # skipping a look-around only widens the set
        else:  # pragma: no cover - anything else: any character may start it
            pieces.append("(?s:.)")
            return False
    return True


def first_char_pattern(rule: Rule, ascii_only: bool = False) -> str:
    """A regex matching (a superset of) the characters a match of ``rule`` can start with
    (with ``ascii_only``: derived from its ASCII form, exact for ASCII characters only)."""
    pieces: list[str] = []
    for pattern in rule.patterns:
        if _first(_sre_p.parse(ascii_pattern(pattern) if ascii_only else pattern), pieces):
            return "(?s:.)"
    return "|".join(pieces)


@lru_cache(maxsize=1)
def _rules() -> list[Rule]:
    return build_rules()


@lru_cache(maxsize=2)
def first_char_table(ascii_only: bool = False) -> list[tuple[re.Pattern[str], Rule]]:
    """(regex matching the possible first characters of a rule's match, rule), in table order
    (with ``ascii_only``: from the rules' ASCII forms, for ASCII characters).

    Built on first use (parsing the patterns takes ~0.03 s, their ASCII forms much less);
    each rule's own regexes are compiled when a caption first needs the rule (compiling
    them all takes ~0.1 s, their ASCII forms ~0.02 s, and captions made of plain words
    need none).
    """
    return [(re.compile(first_char_pattern(r, ascii_only)), r) for r in _rules()]


def compile_all() -> None:
    """Compile every rule's ASCII form now (see :func:`capeval.tokenize.warm_up`); the full
    forms are compiled when a caption with other characters first needs them."""
    for _, rule in first_char_table(True):
        rule.ascii_regexes  # noqa: B018 - compiled on access


def rules_starting_with(ch: str) -> tuple[Rule, ...]:
    """The rules (in table order) whose match can start with the character ``ch``.

    An ASCII character is looked up in the table of the ASCII forms: the same rules, as
    both forms have the same ASCII characters in every class."""
    return tuple(r for fx, r in first_char_table(ch.isascii()) if fx.match(ch))


def __getattr__(name: str):
    # RULES / FIRST_CHAR stay importable as module attributes, built lazily
    if name == "FIRST_CHAR":
        return first_char_table()
    if name == "RULES":
        return list(_rules())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

