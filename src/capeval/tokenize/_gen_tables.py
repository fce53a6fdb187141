"""Developer tool (not imported by capeval): regenerate ``_tables.py``.

Runs the Stanford CoreNLP 3.4.1 jar shipped in the pycocoevalcap 1.2 wheel (needs Java
and ``pip install pycocoevalcap==1.2``) on every BMP character alone, between two
letters and between two digits, and writes the character classes the scanner uses::

    python -m capeval.tokenize._gen_tables
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import unicodedata
from pathlib import Path

_NOT_IN_CAPTION = {0x0A, 0x0D, 0x0B, 0x0C, 0x85, 0x2028, 0x2029}
# characters that join two letters through other rules than WORD: hyphens, apostrophes
_OTHER_JOINERS = {0x58A, 0x2010, 0x2011, 0x2018, 0x2019, 0x201B, 0x91, 0x92}


def _java_lines(lines: list[str]) -> list[str]:
    import pycocoevalcap.tokenizer.ptbtokenizer as ptbmod

    jar = Path(ptbmod.__file__).with_name(ptbmod.STANFORD_CORENLP_3_4_1_JAR)
    with tempfile.NamedTemporaryFile("wb", suffix=".txt", delete=False) as f:
        f.write("\n".join(lines).encode("utf-8"))
        name = f.name
    try:
        out = subprocess.run(["java", "-cp", str(jar), "edu.stanford.nlp.process.PTBTokenizer",
                              "-preserveLines", "-lowerCase", name],
                             capture_output=True, check=True).stdout.decode("utf-8")
    finally:
        os.remove(name)
    return out.split("\n")


def _ranges(codes: set[int]) -> str:
    s = sorted(codes)
    parts = []
    i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and s[j + 1] == s[j] + 1:
            j += 1
        parts.append("\\u%04x" % s[i] if i == j else "\\u%04x-\\u%04x" % (s[i], s[j]))
        i = j + 1
    lines, cur = [], ""
    for p in parts:
        if len(cur) + len(p) > 72:
            lines.append(cur)
            cur = ""
        cur += p
    lines.append(cur)
    return "(\n" + "\n".join('    "%s"' % line for line in lines) + "\n)\n"


def main() -> None:
    cps = [c for c in range(1, 0x10000) if c not in _NOT_IN_CAPTION and not 0xD800 <= c <= 0xDFFF]
    lines = []
    for c in cps:
        lines.extend([chr(c), "a" + chr(c) + "a", "1" + chr(c) + "1"])
    out = _java_lines(lines)
    alone = {c: out[3 * i] for i, c in enumerate(cps)}
    in_word = {c for i, c in enumerate(cps) if out[3 * i + 1] == "a" + chr(c).lower() + "a"}
    in_num = {c for i, c in enumerate(cps) if out[3 * i + 2] == "1" + chr(c).lower() + "1"}
    kept = {c for c in cps if alone[c] == chr(c).lower()}
    py_letters = {c for c in cps if unicodedata.category(chr(c)).startswith("L")}
    py_digits = {c for c in cps if unicodedata.category(chr(c)) == "Nd"}
    # Java 7 letters: Python letters that join words, plus two Mongolian letters that
    # newer Unicode versions reclassified as marks
    letters = (in_word & py_letters) | ({0x1885, 0x1886} & in_word)
    digits = py_digits & in_num & kept
    symbols = kept - letters - digits - set(range(0x80))
    word_extra = ({c for c in in_word - letters - digits if c >= 0x80} - _OTHER_JOINERS) | {0xAD}
    header = '''"""Character classes of the Stanford CoreNLP 3.4.1 PTB lexer (BMP only).

Generated data (do not edit by hand): measured black-box by running the
stanford-corenlp-3.4.1.jar PTBTokenizer on every BMP code point in isolation
and between letters / digits.  Ranges are in regex character-class syntax.

LETTER: characters Java 7 (JFlex [:letter:]) treats as letters.
WORD_EXTRA: other characters allowed inside words (combining marks, ...).
DIGIT: decimal digits ([:digit:]).
SYMBOL: non-ASCII, non-letter, non-digit characters that come out as a
one-character token of their own (the lexer's symbol classes).
"""

'''
    text = (header + "LETTER = " + _ranges(letters) + "\nWORD_EXTRA = " + _ranges(word_extra)
            + "\nDIGIT = " + _ranges(digits) + "\nSYMBOL = " + _ranges(symbols))
    Path(__file__).with_name("_tables.py").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
