"""Lemmas the way SPICE sees them (CoreNLP 3.6's ``Morphology``), from spaCy's tables.

CoreNLP's lemmatizer (a port of Minnen et al.'s *morpha*) only inflects by tag: plural
nouns (``NNS``/``NNPS``) and verbs (``VB*``) are reduced, everything else is the word
itself, lower-cased (``older`` stays ``older``; ``NN`` ``glasses`` stays ``glasses``),
proper nouns keep their case, ``an`` becomes ``a`` and object pronouns their subject form.

spaCy's rule lemmatizer disagrees on a few frequent caption words, and SPICE compares
lemmas, so they matter: it prefers the shorter in-dictionary stem (``riding -> rid``,
``rides -> rid``, ``staring -> star``), strips plural-only nouns (``jeans -> jean``,
``shorts -> short``) and reduces comparatives. :class:`Lemmatizer` re-derives the lemma
from the word and its PTB tag with spaCy's irregular-form and word tables as the
dictionary, choosing between candidate stems with English spelling rules (a final
single consonant after a single vowel would have been doubled, so ``rid+ing`` must come
from ``ride``).
"""

from __future__ import annotations

from typing import Any, Mapping

VOWELS = frozenset("aeiou")

# nouns used only in the plural: morpha leaves them as they are
PLURALIA_TANTUM = frozenset(
    "binoculars belongings blues clothes crossbones goggles goods handlebars jeans overalls pajamas "
    "pants pyjamas pliers scissors shades shorts suds surroundings suspenders teens tights trousers "
    "tweezers underpants papers".split()
)

BE_FORMS = frozenset("am are is was were be been being 's 're 'm r s m ai wast wert art".split())

# pronoun forms that morpha maps to another lemma (tags PRP / PRP$)
PRONOUNS = {"him": "he", "her": "she", "them": "they", "me": "i", "us": "we", "their": "they",
            "his": "he", "our": "we", "your": "you"}

# verb forms whose morpha lemma differs from spaCy's exception table
VERB_OVERRIDES = {"lay": "lay", "having": "have", "has": "have", "had": "have", "does": "do",
                  "did": "do", "done": "do", "striped": "strip"}


def _has_vowel(stem: str) -> bool:
    return any(c in VOWELS or c == "y" for c in stem[1:]) or (bool(stem) and stem[0] in VOWELS)


def _cvc(stem: str) -> bool:
    """Ends consonant-vowel-consonant with one vowel letter (``rid``, ``star``, ``hop``)."""
    if len(stem) < 2:
        return False
    last, mid = stem[-1], stem[-2]
    before = stem[-3] if len(stem) >= 3 else ""
    return last not in VOWELS and last not in "wxy" and mid in VOWELS and (before == "" or before not in VOWELS)


class Lemmatizer:
    """CoreNLP-style lemmas from (word, PTB tag), using spaCy lookups as the dictionary.

    ``exceptions``/``index``: spaCy's ``lemma_exc`` and ``lemma_index`` tables (mappings
    of part of speech -> word -> lemmas / known words). Results are cached per (word, tag).
    """

    def __init__(self, exceptions: Mapping[str, Any], index: Mapping[str, Any]) -> None:
        self.verb_exc = dict(exceptions.get("verb", {}))
        self.noun_exc = dict(exceptions.get("noun", {}))
        self.verbs = frozenset(index.get("verb", ()))
        self.nouns = frozenset(index.get("noun", ()))
        self._cache: dict[tuple[str, str], str] = {}

    @classmethod
    def from_spacy(cls, nlp: Any) -> "Lemmatizer":
        """Build from a loaded spaCy English pipeline (its ``lemmatizer`` lookups)."""
        tables: dict[str, Any] = {"lemma_exc": {}, "lemma_index": {}}
        try:
            lookups = nlp.get_pipe("lemmatizer").lookups
            for name in tables:
                if lookups.has_table(name):
                    table = lookups.get_table(name)
                    tables[name] = {pos: table.get(pos, {}) for pos in ("verb", "noun")}
        except KeyError:
            pass  # no lemmatizer: spelling rules alone
        return cls(tables["lemma_exc"], tables["lemma_index"])

    def lemma(self, word: str, tag: str) -> str:
        """The lemma CoreNLP 3.6 would give ``word`` tagged ``tag``."""
        key = (word, tag)
        found = self._cache.get(key)
        if found is None:
            found = self._cache[key] = self._lemma(word, tag)
        return found

    def _lemma(self, word: str, tag: str) -> str:
        low = word.lower()
        if tag.startswith("NNP"):
            return word  # proper nouns: untouched, case kept
        if "-" in low and (tag == "NNS" or tag.startswith("VB")):
            # morpha keeps everything up to the first hyphen and inflects the rest
            head, rest = low.split("-", 1)
            return f"{head}-{self._lemma(rest, tag)}" if rest else low
        if tag == "NNS":
            return self.noun(low)
        if tag.startswith("VB"):
            return self.verb(low)
        if tag == "DT" and low == "an":
            return "a"
        if tag in ("PRP", "PRP$"):
            return PRONOUNS.get(low, low)
        if low == "n't":
            return "not"
        return low

    # -- nouns -------------------------------------------------------------------------
    def noun(self, w: str) -> str:
        """Plural noun -> singular."""
        if w in PLURALIA_TANTUM or w.endswith("ics"):
            return w  # jeans, shorts, gymnastics
        if w in self.noun_exc:
            return self.noun_exc[w][0]  # children, feet, leaves
        if w.endswith("men") and len(w) >= 3:
            return w[:-3] + "man"  # firemen
        if not w.endswith("s") or w.endswith(("ss", "us", "sis")):
            return w
        if w.endswith("ies") and len(w) > 4 and w[-4] not in VOWELS:
            if w[:-1] in self.nouns and w[:-3] + "y" not in self.nouns:
                return w[:-1]  # collies, cookies
            return w[:-3] + "y"
        if w.endswith("es"):
            stem = w[:-2]
            if stem.endswith(("ss", "zz", "x", "ch", "sh")):
                return stem  # glasses, boxes, benches
            if stem.endswith(("s", "z")):
                return stem if stem in self.nouns else w[:-1]  # buses / houses, horses
            if stem.endswith("o") and stem in self.nouns and w[:-1] not in self.nouns:
                return stem  # tomatoes (but shoes, toes)
        return w[:-1]

    # -- verbs -------------------------------------------------------------------------
    def verb(self, w: str) -> str:
        """Inflected verb -> base form."""
        if w in BE_FORMS:
            return "be"
        if w in VERB_OVERRIDES:
            return VERB_OVERRIDES[w]
        if w in self.verb_exc:
            return self.verb_exc[w][0]
        if w.endswith("eed"):  # speed, need; but agreed, freed
            return w[:-1] if w[:-1] in self.verbs and w not in self.verbs else w
        if w.endswith("ing") and len(w) > 4:
            return self._suffixed(w[:-3], w, "ing")
        if w.endswith("ed") and len(w) > 3:
            return self._suffixed(w[:-2], w, "ed")
        if w.endswith("s") and len(w) > 2 and not w.endswith(("ss", "us")):
            return self._third_person(w)
        return w

    def _third_person(self, w: str) -> str:
        if w.endswith("ies") and len(w) > 4 and w[-4] not in VOWELS:
            return w[:-3] + "y"
        if w.endswith("es"):
            stem = w[:-2]
            if stem.endswith(("ss", "x", "z", "ch", "sh", "o")) and stem in self.verbs:
                return stem
            if stem.endswith(("ss", "zz", "x", "ch", "sh")):
                return stem
        return w[:-1]

    def _suffixed(self, stem: str, w: str, suffix: str) -> str:
        """``stem`` is ``w`` without ``-ing``/``-ed``: undo consonant doubling or restore ``e``."""
        if not _has_vowel(stem):
            return w  # "sing", "bring", "sled": the form is the base
        known = self.verbs
        if suffix == "ed" and stem.endswith("i") and len(stem) > 2 and stem[-2] not in VOWELS:
            return stem[:-1] + "y"  # carried -> carry
        if suffix == "ing" and stem.endswith("y"):
            return stem  # playing, flying
        if len(stem) >= 3 and stem[-1] == stem[-2] and stem[-1] not in VOWELS:
            single = stem[:-1]
            one_syllable = stem[-3] in VOWELS and not any(c in VOWELS for c in stem[:-3])
            if stem[-1] in "sz" or (stem[-1] == "l" and one_syllable):
                return stem  # kissing, buzzing, calling (but travelling -> travel)
            if single in known and stem not in known:
                return single
            if stem in known and single not in known:
                return stem
            # both known ("putting"): doubling after a stressed short vowel; neither: keep both letters
            return single if stem in known and _cvc(single) else stem
        with_e = stem + "e"
        if suffix == "ed" and stem.endswith("e"):
            return w[:-1]  # canoed -> canoe
        in_plain, in_e = stem in known, with_e in known
        if in_e and not in_plain:
            return with_e
        if in_plain and not in_e:
            return stem
        if in_plain and in_e:
            return with_e if _cvc(stem) else stem
        return self._unknown(stem, with_e)

    @staticmethod
    def _unknown(stem: str, with_e: str) -> str:
        """Neither candidate is a known verb: morpha's spelling defaults."""
        last2 = stem[-2:]
        if stem.endswith(("c", "g", "s", "v", "z", "u")) and not stem.endswith(("ng", "ss")):
            return with_e  # danc-ing, bulg-ing, argu-ing
        if len(last2) == 2 and last2[0] in VOWELS and last2[1] in VOWELS:
            return stem  # ski-ing, canoe...
        if len(stem) >= 3 and stem[-2] in VOWELS and stem[-3] in VOWELS:
            return stem  # parasail-ing, poop-ing
        if len(last2) == 2 and last2[0] not in VOWELS and last2[1] not in VOWELS:
            return with_e if last2 in ("th",) else stem  # text-ing, bath-ing
        if stem[-1] in "npwx":
            return stem
        return with_e
