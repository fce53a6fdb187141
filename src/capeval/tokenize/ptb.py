"""Pure-Python re-implementation of pycocoevalcap's ``PTBTokenizer``.

pycocoevalcap 1.2 tokenizes captions by running the Stanford CoreNLP 3.4.1
``PTBTokenizer`` (a JFlex scanner) in a JVM with ``-preserveLines -lowerCase``
on all captions joined by newlines, and then drops the tokens listed in
:data:`PUNCTUATIONS`.  This module reproduces that output without Java.

How it works
------------
The JFlex scanner picks, at every position, the rule with the *longest*
match (trailing context included), ties going to the rule listed first.
:func:`_lex` does the same with an ordered list of compiled regular
expressions (``_rules()``), written from the published grammar of the
scanner and calibrated black-box against the 3.4.1 jar (which differs from
today's CoreNLP in many details).  Only the rules whose first character can
match are tried at each position (``_rules_for``).  Two fast paths keep it
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
from functools import lru_cache
from typing import Callable, Iterable, List, Optional, Tuple

from ._tables import DIGIT as _DIGIT_RANGES
from ._tables import LETTER as _LETTER_RANGES
from ._tables import SYMBOL as _SYMBOL_RANGES
from ._tables import WORD_EXTRA as _WORD_EXTRA_RANGES

__all__ = ["PUNCTUATIONS", "ptb_tokenize", "ptb_tokenize_batch", "ptb_tokens"]

#: Tokens removed by pycocoevalcap after tokenization (compared after lower-casing).
PUNCTUATIONS = frozenset(["''", "'", "``", "`", "-LRB-", "-RRB-", "-LCB-", "-RCB-",
                          ".", "?", "!", ",", ":", "-", "--", "...", ";"])


def _ci(word: str) -> str:
    """Regex for a literal matched case-insensitively (JFlex %caseless applies to
    literals but not to character classes, so we cannot use re.IGNORECASE)."""
    out = []
    for ch in word:
        if ch.isalpha() and ch.lower() != ch.upper():
            out.append("[%s%s]" % (ch.lower(), ch.upper()))
        else:
            out.append(re.escape(ch))
    return "".join(out)


def _alt_ci(words: str) -> str:
    return "(?:" + "|".join(_ci(w) for w in words.split("|")) + ")"


# ---------------------------------------------------------------------------
# Macros
# ---------------------------------------------------------------------------
LET = "[" + _LETTER_RANGES + "]"                       # [:letter:]
DIG = "[" + _DIGIT_RANGES + "]"                        # [:digit:]
LETDIG = "[" + _LETTER_RANGES + _DIGIT_RANGES + "]"
# other characters allowed inside words (combining marks, soft hyphen, ...)
_WORD_EXTRA = _WORD_EXTRA_RANGES
SPLET = "&[aeiouAEIOU]" + _alt_ci("acute|grave|uml") + ";"
WLET = "(?:[" + _LETTER_RANGES + _WORD_EXTRA + "]|" + SPLET + ")"
WLETDIG = "(?:[" + _LETTER_RANGES + _WORD_EXTRA + _DIGIT_RANGES + "]|" + SPLET + ")"
WORD = WLET + WLETDIG + "*(?:[.!?]" + WLET + WLETDIG + "*)*"

SPACE = "[ \t\u00A0\u2000-\u200A\u3000]"
SPACES = SPACE + "+"
NEWLINE = "(?:\r\n|[\r\n\u2028\u2029\u000B\u000C\u0085])"
SPACENL = "(?:" + SPACE + "|" + NEWLINE + ")"
_SGML_NAME = r"[A-Za-z][A-Za-z0-9_:.\-]*"
SGML = (r"<(?:[!?][A-Za-z\-][^>\r\n]*|" + _SGML_NAME + r"(?:[ ]+(?:" + _SGML_NAME
        + r"""[ ]*=[ ]*(?:'[^'\r\n]*'|"[^"\r\n]*")|""" + _SGML_NAME + r"))*[ ]*/?|/"
        + _SGML_NAME + r")[ ]*>")
SENTEND = SPACENL + "(?:" + SPACENL + "|[A-Z]|" + SGML + ")"

APOS = "(?:['\u0092\u2019]|" + _ci("&apos;") + ")"
APOSETC = "(?:" + APOS + "|[`\u0091\u2018\u201B])"
REDAUX = APOS + "(?:[msdMSD]|" + _alt_ci("re|ve|ll") + ")"
SWORD = "[A-Za-z\u00AD]*[A-MO-Za-mo-z]\u00AD*"
SREDAUX = _ci("n") + APOSETC + _ci("t")

NUM = DIG + "*(?:[.:,\u00AD\u066B\u066C]" + DIG + "+)+|" + DIG + "+"
NUMBER = "[-+]?(?:" + NUM + ")"
DATE = DIG + "{1,2}[-/]" + DIG + "{1,2}[-/]" + DIG + "{2,4}"
SUBSUPNUM = "[\u207A\u207B\u208A\u208B]?(?:[\u2070\u00B9\u00B2\u00B3\u2074-\u2079]+|[\u2080-\u2089]+)"
FRAC = "(?:" + DIG + "{1,4}[- \u00A0])?" + DIG + r"{1,4}(?:\\?/|\u2044)" + DIG + "{1,4}"
FRAC2 = "[\u00BC\u00BD\u00BE\u2153-\u215E]"
DOLSIGN = r"(?:[A-Z]*\$|#)"
DOLSIGN2 = ("[\u00A2\u00A3\u00A4\u00A5\u0080\u20A0\u20AC\u060B\u0E3F\u20A4"
            "\uFFE0\uFFE1\uFFE5\uFFE6]")
HYPHEN = "[-_\u058A\u2010\u2011]"
THING_PART = "(?:[dDoOlL]" + APOSETC + LETDIG + ")?" + LETDIG + "+"
THING = THING_PART + "(?:" + HYPHEN + THING_PART + ")*"
SPAMP = _ci("&amp;")
THINGA = "[A-Z]+(?:(?:[+&]|" + SPAMP + ")[A-Z]+)+"
THING3 = r"[A-Za-z0-9]+(?:-[A-Za-z]+){0,2}(?:\\?/[A-Za-z0-9]+(?:-[A-Za-z]+){0,2}){1,2}"
# (alternatives ordered so that Python's first-match picks the longest one)
_ACRO_SPECIAL = (_ci("U.S.-") + "(?:" + _ci("U.S.S.R") + "|" + _ci("U.K") + ")|"
                 + _alt_ci("Canada|Sino|Korean|EU|Japan|non") + "-" + _ci("U.S"))
ACRO = "(?:" + _ACRO_SPECIAL + "|[A-Za-z](?:\\.[A-Za-z])+)"
# ACRONYM (before a capitalised function word) also accepts a single letter
ACRO1 = "(?:" + _ACRO_SPECIAL + "|[A-Za-z](?:\\.[A-Za-z])*)"
HTHING = ("[A-Za-z0-9][A-Za-z0-9.,\u00AD]*(?:-(?:" + ACRO + "\\.|[A-Za-z0-9\u00AD]+))+")

APOWORD_ALTS = [
    APOS + _ci("n") + APOS + "?",
    "[lLdDjJ]" + APOS,
    _ci("Dunkin") + APOS,
    _ci("somethin") + APOS,
    _ci("ol") + APOS,
    APOS + _ci("em"),
    "[A-HJ-XZn]" + APOSETC + LET + "{2}" + LET + "*",
    APOS + "[2-9]0" + _ci("s"),
    APOS + _ci("til") + _ci("l") + "?",
    LET + LET + "*[aeiouyAEIOUY]" + APOSETC + "[aeiouA-Z]" + LET + "*",
    APOS + _ci("cause"),
    _ci("cont'd") + "\\.?",
    _ci("nor'easter"), _ci("c'mon"), _ci("e'er"), _ci("s'mores"), _ci("ev'ry"),
    _ci("li'l"), _ci("nat'l"), _ci("o") + APOSETC + _ci("o"),
]
APOWORD2 = _ci("y") + APOS

FULLURL = _ci("http") + _ci("s") + r"?://[^ \t\n\f\r\"<>|(){}]+[^ \t\n\f\r\"<>|.!?(){},-]"
LIKELYURL = (r"(?:(?:" + _ci("www.") + r"(?:[^ \t\n\f\r\"<>|.!?(){},]+\.)+[a-zA-Z]{2,4})|"
             r"(?:(?:[^ \t\n\f\r\"`'<>|.!?(){},-_$]+\.)+" + _alt_ci("com|net|org|edu") + r"))"
             r"(?:/[^ \t\n\f\r\"<>|()]+[^ \t\n\f\r\"<>|.!?(){},-])?")
EMAIL = ("(?:<|" + _ci("&lt;") + r")?[a-zA-Z0-9][^ \t\n\f\r\"<>|(){}\u00A0]*@"
         r"(?:[^ \t\n\f\r\"<>|(){}.\u00A0]+\.)*[^ \t\n\f\r\"<>|(){}.\u00A0]+(?:>|"
         + _ci("&gt;") + ")?")
TWITTER = "@[a-zA-Z_][a-zA-Z_0-9]*|#" + WLET + "+"

# Abbreviation lists (JFlex syntax: caseless except inside [..]); measured on the jar.
ABMONTH = "Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec"
ABDAYS = "Mon|Tue|Tues|Wed|Thu|Thurs|Fri"
ABSTATE = ("Ala|Ariz|[A]z|[A]rk|Calif|Colo|Conn|Ct|Dak|[D]el|Fla|Ga|[I]ll|Ind|Kans?|Ky|[L]a|[M]ass|"
           "Md|Mich|Minn|[M]iss|Mo|Mont|Neb|Nev|Okla|[O]re|[P]a|Penn|Tenn|[T]ex|Va|Vt|[W]ash|"
           "Wisc?|Wyo")
ABCOMP = "Inc|Cos?|Corp|Pp?t[ye]s?|Ltd|Plc|Rt|Bancorp|Bhd|Assn|Univ|Intl|Sys"
ABNUM = "tel|est|ext|sq"
ABPTIT = "Jr|Sr|Bros|(Ed|Ph)\\.D|Blvd|Rd|Esq|Bldg|etc|al|seq"
ABTITLE = ("Mr|Mrs|Ms|[M]iss|Drs?|Profs?|Sens?|Reps?|Attys?|Lt|Col|Gen|Messrs|Govs?|Adm|Rev|"
           "Maj|Sgt|Cpl|Pvt|Capt|Ste?|Ave|Pres|Lieut|Hon|Brig|Co?mdr|Pfc|Spc|Supts?|Det|Mt|Ft|"
           "Adj|Adv|Asst|Assoc|Ens|Insp|Mlle|Mme|Msgr|Sfc")
ABCOMP2 = "Invt|Elec|Natl|M[ft]g|Dept|Blvd|Rd|Ave"
ABOTHER4 = "vs|Alex|Wm|Jos|Cie|cf|TREAS|Ph"
ABBREV3_WORDS = "ca|figs?|prop|nos?|art|bldg|pp|op"


def _ci_macro(*macros: str) -> str:
    """Caseless alternation (``[X]`` stays case-sensitive, as in JFlex), longest
    alternatives first so that Python's first-match equals JFlex's longest match."""
    alts = []
    for m in macros:
        alts.extend(m.split("|") if "(" not in m else [m])
    parts = []
    for alt in alts:
        out = []
        i = 0
        while i < len(alt):
            ch = alt[i]
            if ch == "[":
                j = alt.index("]", i)
                out.append(alt[i:j + 1])
                i = j + 1
            elif ch in "?)|":
                out.append(ch)
                i += 1
            elif ch == "(":
                out.append("(?:")
                i += 1
            elif ch == "\\":
                out.append(alt[i:i + 2])
                i += 2
            elif ch.isalpha():
                out.append("[%s%s]" % (ch.lower(), ch.upper()))
                i += 1
            else:
                out.append(re.escape(ch))
                i += 1
        parts.append(("".join(out), len(alt)))
    parts.sort(key=lambda p: -p[1])
    return "(?:" + "|".join(p for p, _ in parts) + ")"


ABBREV1 = _ci_macro(ABMONTH, ABDAYS, ABSTATE, ABCOMP, ABNUM, "Jr|Sr|Bros|Blvd|Rd|Esq|Bldg|etc|al|seq",
                    "(Ed|Ph)\\.D") + "\\."
ABBREV3 = _ci_macro(ABBREV3_WORDS) + "\\."
ABBREV4 = ("(?:" + ACRO + "|" + _ci("a.k.a") + "|" + _ci_macro(ABTITLE, ABCOMP2, ABOTHER4)
           + "|[A-Za-z])")
ABBREV2 = ABBREV4 + "\\."
ACRONYM = ACRO1 + "\\."
_ACRO_FOLLOW = ("About|According|Additionally|After|An|A|As|At|But|Earlier|He|Her|Here|However|"
                "If|In|It|Last|Many|More|Mr\\.|Ms\\.|Now|Once|One|Other|Our|She|Since|So|Some|"
                "Such|That|The|Then|There|These|They|This|We|When|While|What|Yet|You")

_ACRO_TRAIL = (SPACENL + "+(?:" + "|".join(
    ("[%s]%s" % (w[0], _ci(w[1:].replace("\\.", "."))) if len(w) > 1 else "[%s]" % w)
    for w in _ACRO_FOLLOW.split("|")) + "|" + SGML + ")" + SPACENL)

PHONE = (r"(?:(?:\([0-9]{2,3}\)[ \u00A0]?|(?:\+\+?)?(?:[0-9]{2,4}[- \u00A0])?[0-9]{2,4}[- \u00A0])"
         r"[0-9]{3,4}[- \u00A0]?[0-9]{3,5}|(?:(?:\+\+?)?[0-9]{2,4}\.)?[0-9]{2,4}\.[0-9]{3,4}\.[0-9]{3,5})")
LDOTS = "\\.{3,5}|(?:\\.[ \u00A0]){2,4}\\.|[\u0085\u2026]"
INSENTP = "[,;:\u3001]"
QUOTES = ("(?:''|[`\u2018\u2019\u201A\u201B\u201C\u201D\u0091\u0092\u0093\u0094"
          "\u201E\u201F\u2039\u203A\u00AB\u00BB]{1,2}|" + APOS + ")")
DBLQUOT = '(?:"|' + _ci("&quot;") + ")"
TBSPEC = ("-" + _alt_ci("RRB|LRB|RCB|LCB|RSB|LSB") + "-|" + _ci("C.D.s") + "|" + _ci("pro-") + "|" + _ci("anti-")
          + "|" + _ci("S") + "(?:&|" + SPAMP + ")" + _ci("P-500") + "|" + _ci("S") + "(?:&|"
          + SPAMP + ")" + _ci("Ls") + "|" + _ci("Cap") + APOS + _ci("n") + "|" + _ci("c")
          + APOS + _ci("est"))
_ALNUM = "[" + _LETTER_RANGES + _WORD_EXTRA + _DIGIT_RANGES + "]"
FILENAME_EXT = ("bat|bmp|c|class|cgi|cpp|dll|doc|docx|exe|gif|gz|h|htm|html|jar|java|jpeg|jpg|mov|"
                "mp3|pdf|php|pl|png|ppt|ps|py|sql|tar|txt|wav|x|xml|zip")
FILENAME = _ALNUM + "+(?:\\." + _ALNUM + "+)*\\." + _ci_macro(FILENAME_EXT)
TBSPEC2 = APOS + "[0-9][0-9]"
SMILEY = "[<>]?[:;=][-o*']?[()DPdpO\\\\{@|\\[\\]]"
ASIANSMILEY = (r"[\^x=~<>]\.\[\^x=~<>\]|[\-\^x=~<>']_[\-\^x=~<>']|\([\-\^x=~<>'][_.]?[\-\^x=~<>']\)|"
               r"\([\^x=~<>']-[\^x=~<>'`]\)")
MISCSYMBOL = "[+%&~^|\\\\" + _SYMBOL_RANGES + "]"

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


# Actions: each returns (token or None, number of characters consumed from the match)
A_TOK, A_SOFT, A_QR, A_QL, A_SKIP, A_AMP, A_NBSP, A_PHONE, A_HYPHENS, A_ELLIPSIS, \
    A_FRAC2, A_CURRENCY, A_DUP, A_PB2, A_PB3, A_ACRONYM, A_CONST, A_PAREN = range(18)


class _Rule:
    __slots__ = ("name", "regexes", "action", "const", "has_trail")

    def __init__(self, name, main, trail=None, action=A_TOK, const=None):
        self.name = name
        alts = main if isinstance(main, list) else [main]
        if trail is None:
            self.regexes = [re.compile("(?:" + a + ")") for a in alts]
            self.has_trail = False
        else:
            self.regexes = [re.compile("(?:" + a + ")(?=(" + trail + "))") for a in alts]
            self.has_trail = True
        self.action = action
        self.const = const


def _rules() -> List[_Rule]:
    R = _Rule
    acro_trail = _ACRO_TRAIL
    return [
        R("PROG_LANGS", _ci("c++") + "|" + _alt_ci("c|f") + "#"),
        R("ASSIM3", _alt_ci("cannot") + "|'" + _ci("twas"), action=A_PB3),
        R("ASSIM2", "'" + _ci("tis") + "|" + _alt_ci("gonna|gotta|lemme|gimme|wanna"), action=A_PB2),
        R("SGML", SGML, action=A_NBSP),
        R("SPMDASH", _ci("&") + _alt_ci("MD|mdash|ndash") + ";|[\u0096\u0097\u2013\u2014\u2015]",
          action=A_CONST, const="--"),
        R("SPAMP", SPAMP, action=A_AMP),
        R("SPPUNC", "&(?:" + _alt_ci("HT|TL|UR|LR|QC|QL|QR|odq|cdq") + "|#[0-9]+);"),
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
        R("LT", "<|" + _ci("&lt;"), action=A_CONST, const="<"),
        R("GT", ">|" + _ci("&gt;"), action=A_CONST, const=">"),
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
        R("SPACE", "\0|" + SPACES + "|[\u200B\u200E\u200F\uFEFF]|" + _ci("&nbsp;"), action=A_SKIP),
        R("NEWLINE", NEWLINE, action=A_SKIP),
    ]


_RULES = _rules()


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


def _first(seq, pieces: List[str]) -> bool:
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


def _first_char_regex(rule: _Rule):
    pieces: List[str] = []
    for rx in rule.regexes:
        if _first(_sre_p.parse(rx.pattern), pieces):
            return re.compile("(?s:.)")
    return re.compile("|".join(pieces))


_FIRST = [(_first_char_regex(r), r) for r in _RULES]
_DISPATCH: dict = {}


def _rules_for(ch: str) -> Tuple[_Rule, ...]:
    rules = _DISPATCH.get(ch)
    if rules is None:
        rules = tuple(r for fx, r in _FIRST if fx.match(ch))
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


def _apply(rule: _Rule, text: str) -> Tuple[Optional[str], int]:
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


def _lex(text: str, end: int) -> List[str]:
    """Tokenize ``text[:end]``; ``text[end:]`` is the following context (if any)."""
    tokens: List[str] = []
    pos = 0
    fast_word = _FAST_WORD.match
    fast_punct = _FAST_PUNCT.match
    fast_blanks = _FAST_BLANKS.match
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
            for rx in rule.regexes:
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


def _finish(tokens: List[str]) -> str:
    line = " ".join(tokens).lower().rstrip()
    return " ".join(w for w in line.split(" ") if w not in PUNCTUATIONS)


# Context that the next caption provides to the end of the current one.
_CTX_SENTEND = re.compile(SENTEND)
_CTX_ACRO = re.compile(_ACRO_TRAIL)
_BLANK = re.compile(SPACE + "*")


def _context(texts: List[str], i: int) -> str:
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


def _simple(text: str) -> Optional[str]:
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


@lru_cache(maxsize=1 << 17)
def _tokenize_cached(text: str, ctx: str) -> str:
    out = _simple(text)
    if out is not None:
        return out
    return _finish(_lex(text + ctx, len(text)))


def ptb_tokens(text: str) -> List[str]:
    """Raw Java tokens (before lower-casing and punctuation removal) of one caption."""
    text = _clean(text)
    return _lex(text, len(text))


def ptb_tokenize(text: str) -> str:
    """Tokenize one caption exactly as pycocoevalcap's PTBTokenizer would (the caption
    being the last, or only, one of the call).  Returns the space-joined tokens."""
    return _tokenize_cached(_clean(text), "")


def ptb_tokenize_batch(texts: Iterable[str], on_progress: Optional[Callable[[int], None]] = None) -> List[str]:
    """Tokenize captions exactly as one pycocoevalcap ``PTBTokenizer.tokenize`` call over
    them in this order (a caption's last token can depend on the next caption).

    pycocoevalcap's order is its input dict's: image ids in iteration order, each
    image's captions in list order.  Results are memoised (repeated captions are
    nearly free).  ``on_progress(k)`` is called after every ``k`` captions (for a progress bar)."""
    texts = [_clean(t) for t in texts]
    out = []
    n = len(texts)
    for i, t in enumerate(texts):
        ctx = _context(texts, i) if i + 1 < n else ""
        out.append(_tokenize_cached(t, ctx))
        if on_progress is not None and (i + 1) % 2048 == 0:
            on_progress(2048)
    if on_progress is not None and n % 2048:
        on_progress(n % 2048)
    return out
