"""WordNet synonyms as METEOR 1.5's ``SynonymDictionary`` looks them up.

A word's synsets are its own plus those of its base form: the bases listed for an
irregular form (``english.exceptions``), else what ``SynonymDictionary.morph`` (suffix
rules, tried in order) finds in the synonym table. Both alignment paths use this.
"""

from __future__ import annotations

from capeval.metrics.meteor.resources import Resources

# SynonymDictionary.morph: suffix -> replacement, tried in this order
_MORPH = (
    ("s", ""), ("ses", "s"), ("xes", "x"), ("zes", "z"), ("ches", "ch"), ("shes", "sh"),
    ("men", "man"), ("ies", "y"), ("s", ""), ("ies", "y"), ("es", "e"), ("es", ""),
    ("ed", "e"), ("ed", ""), ("ing", "e"), ("ing", ""), ("er", ""), ("est", ""),
    ("er", "e"), ("est", "e"),
)  # fmt: skip


def _utf16_len(s: str) -> int:
    return len(s) if s.isascii() else len(s.encode("utf-16-le", "surrogatepass")) // 2


class SynonymDictionary:
    """Synset lookups on the loaded index (:class:`~.resources.Resources`)."""

    def __init__(self, resources: Resources):
        self.resources = resources
        self._cache: dict[str, frozenset] = {}  # word -> synsets, for synsets_of

    def synsets_of(self, word: str) -> frozenset:
        """SynonymDictionary: synsets of the word plus those of its base form."""
        got = self._cache.get(word)
        if got is not None:
            return got
        r = self.resources
        ids = set(self._syn_ids(word))
        e = r.exc.lookup(word)
        if e >= 0:  # irregular form: the bases' synsets
            ids.update(r.exc_sets[int(r.exc_start[e]) : int(r.exc_start[e + 1])].tolist())
        else:
            ids.update(self._syn_ids(self.morph(word)))
        got = frozenset(ids)
        self._cache[word] = got
        return got

    def _syn_ids(self, word: str) -> list[int]:
        r = self.resources
        i = r.syn.lookup(word)
        if i < 0:
            return []
        return r.syn_sets[int(r.syn_start[i]) : int(r.syn_start[i + 1])].tolist()

    def morph(self, s: str) -> str:
        """SynonymDictionary.morph, including its quirks (a ``-ful`` word is looked up whole
        and gets ``ful`` appended to the result; no match gives the empty string)."""
        tail = "ful" if s.endswith("ful") else ""
        if s.endswith("ss") or _utf16_len(s) <= 2:
            return s
        for suf, rep in _MORPH:
            if s.endswith(suf):
                cand = s[: len(s) - len(suf)] + rep
                if self.resources.syn.lookup(cand) >= 0:
                    return cand + tail
        return ""

    def synsets_many(self, words: list[str]) -> list[frozenset]:
        """:meth:`synsets_of` of many words with a few batched table searches."""
        r = self.resources
        syn_idx = dict(zip(words, r.syn.lookup_many(words)))
        exc_idx = r.exc.lookup_many(words)
        # SynonymDictionary.morph for the words that are not irregular forms
        trials: dict[str, list[str]] = {}
        morph: dict[str, str] = {}
        for w, e in zip(words, exc_idx):
            if e >= 0:
                continue
            if w.endswith("ss") or _utf16_len(w) <= 2:
                morph[w] = w
                continue
            trials[w] = [w[: len(w) - len(suf)] + rep for suf, rep in _MORPH if w.endswith(suf)]
        cands = list({c for cs in trials.values() for c in cs if c not in syn_idx})
        syn_idx.update(zip(cands, r.syn.lookup_many(cands)))
        for w, cs in trials.items():
            tail = "ful" if w.endswith("ful") else ""
            morph[w] = next((c + tail for c in cs if syn_idx[c] >= 0), "")
        rest = list({m for m in morph.values() if m not in syn_idx})
        syn_idx.update(zip(rest, r.syn.lookup_many(rest)))
        syn_start, syn_sets = r.syn_start, r.syn_sets

        def syn_ids(x: str) -> list[int]:
            i = syn_idx[x]
            return [] if i < 0 else syn_sets[int(syn_start[i]) : int(syn_start[i + 1])].tolist()

        out = []
        for w, e in zip(words, exc_idx):
            ids = set(syn_ids(w))
            if e >= 0:
                ids.update(r.exc_sets[int(r.exc_start[e]) : int(r.exc_start[e + 1])].tolist())
            else:
                ids.update(syn_ids(morph[w]))
            out.append(frozenset(ids))
        return out
