"""The scanner rules' ASCII forms (``Rule.ascii_regexes``, used on ASCII-only text) must
match exactly what the full forms match on ASCII text, rule by rule and position by position,
and the first-character dispatch must pick the same rules for every ASCII character.

The full forms are the ones checked against the Java tokenizer (tests/test_ptb_tokenizer.py);
here they are the reference for the ASCII forms, on random ASCII text made of the pieces the
rules look for (contractions, acronyms, abbreviations, URLs, e-mails, numbers, fractions,
smileys, entities, tags) and of random printable characters.
"""

from __future__ import annotations

import random
import string

from capeval.tokenize import ptb_rules
from capeval.tokenize.ptb import _lex

PIECES = [
    "a", "dog", "Dog", "DOG", "can't", "don't", "I'm", "we're", "they'll", "cannot", "gonna",
    "'s", "n't", "'twas", "U.S.", "U.S.A.", "Mr.", "etc.", "a.m.", "Fig.", "Jan.", "No.", "Inc.",
    "http://www.example.com/x?y=1", "www.ex.org", "me@ex.com", "@user", "#tag", "file.txt",
    "1", "12", "3.14", "1,000", "1/2", "1 1/2", "12/31/1999", "$5", "US$", "+44", "(555) 123-4567",
    "e-mail", "t-shirt", "--", "...", ". . .", ":)", ";-)", ":-(", "^_^", "<b>", "</i>", "&amp;",
    "&lt;", "&quot;", "&nbsp;", "&apos;", "AT&T", "C++", "c#", "-LRB-", "(", ")", "[", "]", "{", "}",
    "``", "''", '"', "'", "`", "!", "?", "?!", ",", ";", ":", ".", "*", "**", "\\*", "=", "/", "_",
    "__", "%", "~", "|", "<<", ">>", "o'clock", "rock'n'roll", "d'Artagnan", "L'Oreal", "hi-fi.",
]
PRINTABLE = string.ascii_letters + string.digits + string.punctuation + " \t"


def _texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(1, 8)):
            if rng.random() < 0.75:
                parts.append(rng.choice(PIECES))
            else:
                parts.append("".join(rng.choice(PRINTABLE) for _ in range(rng.randint(1, 5))))
        sep = rng.choice([" ", "", " ", "  ", "\t"])
        out.append(sep.join(parts) + rng.choice(["", ".", " ", "\n", "\nThe", "\n\nA"]))
    return out


def _spans(m):
    return None if m is None else (m.span(), m.groups())


def test_ascii_forms_are_ascii_and_short():
    for body, short in ptb_rules._ASCII_FORMS:
        assert short, body[:20]
        assert sum(1 for c in short if ord(c) > 127) == 1  # one non-ASCII member keeps it non-empty
    for rule in ptb_rules.build_rules():
        for p in rule.patterns:
            for body, _ in ptb_rules._ASCII_FORMS:
                assert body not in ptb_rules.ascii_pattern(p), rule.name


def test_ascii_forms_match_like_the_full_forms_on_ascii_text():
    rules = ptb_rules.build_rules()
    texts = _texts(400, 7) + ["".join(chr(c) for c in range(128))]
    for text in texts:
        assert text.isascii()
        for rule in rules:
            for full, short in zip(rule.regexes, rule.ascii_regexes):
                for pos in range(len(text)):
                    assert _spans(short.match(text, pos)) == _spans(full.match(text, pos)), (rule.name, text, pos)


def test_dispatch_is_the_same_for_ascii_characters():
    full = ptb_rules.first_char_table(False)
    short = ptb_rules.first_char_table(True)
    assert [r for _, r in full] == [r for _, r in short]
    for c in map(chr, range(128)):
        assert [r.name for fx, r in full if fx.match(c)] == [r.name for fx, r in short if fx.match(c)], repr(c)


def test_scanner_uses_the_full_forms_on_other_text():
    # a non-ASCII character anywhere: the full forms (letters of other scripts are letters)
    assert _lex("caf\u00e9 na\u00efve", 10) == ["caf\u00e9", "na\u00efve"]
    assert _lex("cafe naive", 10) == ["cafe", "naive"]
