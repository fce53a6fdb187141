"""Regular-expression macros of the CoreNLP 3.4.1 ``PTBLexer`` grammar, in Python ``re`` syntax.

Each upper-case name is one macro of the JFlex grammar (``WORD``, ``APOS``, ``ABBREV1``...),
written from the published grammar and calibrated black-box against the 3.4.1 jar (which
differs from today's CoreNLP in many details). Letters, digits and symbols follow Java 7's
Unicode tables (generated into :mod:`._tables`), not Python's. The rules that use these
macros are in :mod:`.ptb_rules`; the scanner is in :mod:`.ptb`.

JFlex's ``%caseless`` applies to literals but not to character classes, so literals are
made caseless one letter at a time (:func:`caseless`, :func:`caseless_alt`,
:func:`caseless_macro`) instead of with ``re.IGNORECASE``. JFlex takes the longest match
while Python's alternation takes the first, hence alternatives are ordered longest first.
"""

from __future__ import annotations

import re

from ._tables import DIGIT as _DIGIT_RANGES
from ._tables import LETTER as _LETTER_RANGES
from ._tables import SYMBOL as _SYMBOL_RANGES
from ._tables import WORD_EXTRA as _WORD_EXTRA_RANGES


def caseless(word: str) -> str:
    """Regex for a literal matched case-insensitively (JFlex %caseless applies to
    literals but not to character classes, so we cannot use re.IGNORECASE)."""
    out = []
    for ch in word:
        if ch.isalpha() and ch.lower() != ch.upper():
            out.append("[%s%s]" % (ch.lower(), ch.upper()))
        else:
            out.append(re.escape(ch))
    return "".join(out)


def caseless_alt(words: str) -> str:
    """Caseless alternation of ``|``-separated literals, as a non-capturing group."""
    return "(?:" + "|".join(caseless(w) for w in words.split("|")) + ")"


# ---------------------------------------------------------------------------
# Macros
# ---------------------------------------------------------------------------
LET = "[" + _LETTER_RANGES + "]"                       # [:letter:]
DIG = "[" + _DIGIT_RANGES + "]"                        # [:digit:]
LETDIG = "[" + _LETTER_RANGES + _DIGIT_RANGES + "]"
# other characters allowed inside words (combining marks, soft hyphen, ...)
_WORD_EXTRA = _WORD_EXTRA_RANGES
SPLET = "&[aeiouAEIOU]" + caseless_alt("acute|grave|uml") + ";"
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

APOS = "(?:['\u0092\u2019]|" + caseless("&apos;") + ")"
APOSETC = "(?:" + APOS + "|[`\u0091\u2018\u201B])"
REDAUX = APOS + "(?:[msdMSD]|" + caseless_alt("re|ve|ll") + ")"
SWORD = "[A-Za-z\u00AD]*[A-MO-Za-mo-z]\u00AD*"
SREDAUX = caseless("n") + APOSETC + caseless("t")

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
SPAMP = caseless("&amp;")
THINGA = "[A-Z]+(?:(?:[+&]|" + SPAMP + ")[A-Z]+)+"
THING3 = r"[A-Za-z0-9]+(?:-[A-Za-z]+){0,2}(?:\\?/[A-Za-z0-9]+(?:-[A-Za-z]+){0,2}){1,2}"
# (alternatives ordered so that Python's first-match picks the longest one)
_ACRO_SPECIAL = (caseless("U.S.-") + "(?:" + caseless("U.S.S.R") + "|" + caseless("U.K") + ")|"
                 + caseless_alt("Canada|Sino|Korean|EU|Japan|non") + "-" + caseless("U.S"))
ACRO = "(?:" + _ACRO_SPECIAL + "|[A-Za-z](?:\\.[A-Za-z])+)"
# ACRONYM (before a capitalised function word) also accepts a single letter
ACRO1 = "(?:" + _ACRO_SPECIAL + "|[A-Za-z](?:\\.[A-Za-z])*)"
HTHING = ("[A-Za-z0-9][A-Za-z0-9.,\u00AD]*(?:-(?:" + ACRO + "\\.|[A-Za-z0-9\u00AD]+))+")

APOWORD_ALTS = [
    APOS + caseless("n") + APOS + "?",
    "[lLdDjJ]" + APOS,
    caseless("Dunkin") + APOS,
    caseless("somethin") + APOS,
    caseless("ol") + APOS,
    APOS + caseless("em"),
    "[A-HJ-XZn]" + APOSETC + LET + "{2}" + LET + "*",
    APOS + "[2-9]0" + caseless("s"),
    APOS + caseless("til") + caseless("l") + "?",
    LET + LET + "*[aeiouyAEIOUY]" + APOSETC + "[aeiouA-Z]" + LET + "*",
    APOS + caseless("cause"),
    caseless("cont'd") + "\\.?",
    caseless("nor'easter"), caseless("c'mon"), caseless("e'er"), caseless("s'mores"), caseless("ev'ry"),
    caseless("li'l"), caseless("nat'l"), caseless("o") + APOSETC + caseless("o"),
]
APOWORD2 = caseless("y") + APOS

FULLURL = caseless("http") + caseless("s") + r"?://[^ \t\n\f\r\"<>|(){}]+[^ \t\n\f\r\"<>|.!?(){},-]"
LIKELYURL = (r"(?:(?:" + caseless("www.") + r"(?:[^ \t\n\f\r\"<>|.!?(){},]+\.)+[a-zA-Z]{2,4})|"
             r"(?:(?:[^ \t\n\f\r\"`'<>|.!?(){},-_$]+\.)+" + caseless_alt("com|net|org|edu") + r"))"
             r"(?:/[^ \t\n\f\r\"<>|()]+[^ \t\n\f\r\"<>|.!?(){},-])?")
EMAIL = ("(?:<|" + caseless("&lt;") + r")?[a-zA-Z0-9][^ \t\n\f\r\"<>|(){}\u00A0]*@"
         r"(?:[^ \t\n\f\r\"<>|(){}.\u00A0]+\.)*[^ \t\n\f\r\"<>|(){}.\u00A0]+(?:>|"
         + caseless("&gt;") + ")?")
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


def caseless_macro(*macros: str) -> str:
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


ABBREV1 = caseless_macro(ABMONTH, ABDAYS, ABSTATE, ABCOMP, ABNUM, "Jr|Sr|Bros|Blvd|Rd|Esq|Bldg|etc|al|seq",
                         "(Ed|Ph)\\.D") + "\\."
ABBREV3 = caseless_macro(ABBREV3_WORDS) + "\\."
ABBREV4 = ("(?:" + ACRO + "|" + caseless("a.k.a") + "|"
           + caseless_macro(ABTITLE, ABCOMP2, ABOTHER4) + "|[A-Za-z])")
ABBREV2 = ABBREV4 + "\\."
ACRONYM = ACRO1 + "\\."
_ACRO_FOLLOW = ("About|According|Additionally|After|An|A|As|At|But|Earlier|He|Her|Here|However|"
                "If|In|It|Last|Many|More|Mr\\.|Ms\\.|Now|Once|One|Other|Our|She|Since|So|Some|"
                "Such|That|The|Then|There|These|They|This|We|When|While|What|Yet|You")

# trailing context of ACRONYM: blanks, then a capitalised function word (or a tag), then a blank
ACRO_TRAIL = (SPACENL + "+(?:" + "|".join(
    ("[%s]%s" % (w[0], caseless(w[1:].replace("\\.", "."))) if len(w) > 1 else "[%s]" % w)
    for w in _ACRO_FOLLOW.split("|")) + "|" + SGML + ")" + SPACENL)

PHONE = (r"(?:(?:\([0-9]{2,3}\)[ \u00A0]?|(?:\+\+?)?(?:[0-9]{2,4}[- \u00A0])?[0-9]{2,4}[- \u00A0])"
         r"[0-9]{3,4}[- \u00A0]?[0-9]{3,5}|(?:(?:\+\+?)?[0-9]{2,4}\.)?[0-9]{2,4}\.[0-9]{3,4}\.[0-9]{3,5})")
LDOTS = "\\.{3,5}|(?:\\.[ \u00A0]){2,4}\\.|[\u0085\u2026]"
INSENTP = "[,;:\u3001]"
QUOTES = ("(?:''|[`\u2018\u2019\u201A\u201B\u201C\u201D\u0091\u0092\u0093\u0094"
          "\u201E\u201F\u2039\u203A\u00AB\u00BB]{1,2}|" + APOS + ")")
DBLQUOT = '(?:"|' + caseless("&quot;") + ")"
TBSPEC = ("-" + caseless_alt("RRB|LRB|RCB|LCB|RSB|LSB") + "-|" + caseless("C.D.s") + "|" + caseless("pro-")
          + "|" + caseless("anti-")
          + "|" + caseless("S") + "(?:&|" + SPAMP + ")" + caseless("P-500")
          + "|" + caseless("S") + "(?:&|" + SPAMP + ")" + caseless("Ls")
          + "|" + caseless("Cap") + APOS + caseless("n")
          + "|" + caseless("c") + APOS + caseless("est"))
_ALNUM = "[" + _LETTER_RANGES + _WORD_EXTRA + _DIGIT_RANGES + "]"
FILENAME_EXT = ("bat|bmp|c|class|cgi|cpp|dll|doc|docx|exe|gif|gz|h|htm|html|jar|java|jpeg|jpg|mov|"
                "mp3|pdf|php|pl|png|ppt|ps|py|sql|tar|txt|wav|x|xml|zip")
FILENAME = _ALNUM + "+(?:\\." + _ALNUM + "+)*\\." + caseless_macro(FILENAME_EXT)
TBSPEC2 = APOS + "[0-9][0-9]"
SMILEY = "[<>]?[:;=][-o*']?[()DPdpO\\\\{@|\\[\\]]"
ASIANSMILEY = (r"[\^x=~<>]\.\[\^x=~<>\]|[\-\^x=~<>']_[\-\^x=~<>']|\([\-\^x=~<>'][_.]?[\-\^x=~<>']\)|"
               r"\([\^x=~<>']-[\^x=~<>'`]\)")
MISCSYMBOL = "[+%&~^|\\\\" + _SYMBOL_RANGES + "]"
