"""Every classic metric against pycocoevalcap 1.2, item by item, on hundreds of random sets.

The sets (fixed seed) are small and built to hit the corners: tiny vocabularies (so n-grams
overlap often), empty and single-token candidates, candidates sharing no word with any
reference of the set (CIDEr-D's all-zero case), duplicate captions across items and within
an item's references, candidate == reference, one to many references, different numbers of
references per item, repeated words, punctuation-only tokens and METEOR's ``|||`` field
separator.

Most sets are given to both sides already tokenised (capeval ``tokenizer="none"``, the
same strings to pycocoevalcap). A second group of raw, cased, punctuated sets goes through
both tokenizers: pycocoevalcap's Java PTBTokenizer vs capeval's pure-Python one, then every
metric. BLEU, ROUGE-L and CIDEr-D of pycocoevalcap run in-process (fresh each run); the
Java parts (PTB tokenizer, METEOR 1.5: one JVM for all sets) are cached under
``.pytest_cache/reference`` keyed by the inputs.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from _reference import cached, require_java, require_module
from capeval import registry

SEED = 20240811
N_TOKENIZED_SETS = 400
N_RAW_SETS = 30

TOL = {"bleu": 1e-12, "rouge-l": 1e-12, "cider-d": 1e-9, "meteor": 1e-6}

# tokenizer="none": punctuation-only tokens are ordinary tokens on both sides
WORDS = ["a", "dog", "the", "cat", "runs", "on", "grass", "man", "red", "is", "in", "two"]
PUNCT = [".", ",", "!", "?", "'s", "-", "...", ";", "(", "|||"]
FOREIGN = ["zzz", "qq", "xylo", "vvv", "kw"]  # never in any reference
# raw text for the PTB path: case, clitics, abbreviations, punctuation glued to words
RAW = [
    "A", "a", "Dog", "dog", "dogs", "dog's", "The", "the", "man", "RUNS", "runs", "U.S.", "don't",
    "isn't", "(", ")", ".", ",", "!", "?", "...", "&", "-", "--", "'", '"', "x-ray", "1,000", "3.5",
    "Mr.", "caf\u00e9", ":", ";", "`", "grass", "on", "in",
]  # fmt: skip

Set = tuple[list[str], dict[str, str], dict[str, list[str]]]


def _tokenized_set(rng: random.Random, k: int) -> Set:
    n_items = rng.choice([1, 1, 1, 2, 2, 3, 4, 5, 6, 8, 12, 20, 40])
    vocab = rng.sample(WORDS + PUNCT, rng.randint(1, 6))
    same_nrefs = rng.choice([None, None, 1, 5])

    def sent(lo: int, hi: int, pool: list[str] = vocab) -> str:
        return " ".join(rng.choice(pool) for _ in range(rng.randint(lo, hi)))

    ids: list[str] = []
    cands: dict[str, str] = {}
    refs: dict[str, list[str]] = {}
    for i in range(n_items):
        item = f"s{k}-{i}"
        if refs and rng.random() < 0.1:  # several candidates for one image: shared reference list
            rs = list(refs[rng.choice(ids)])
        else:
            nr = same_nrefs or rng.choice([1, 1, 2, 3, 4, 5, 5, 7, 12, 20])
            rs = [sent(1, 12) for _ in range(nr)]
            if rng.random() < 0.2:
                rs.append(rs[0])  # a reference given twice
            if rng.random() < 0.05:
                rs = [rs[0]] * len(rs)
        x = rng.random()
        if x < 0.1:
            c = ""
        elif x < 0.2:
            c = rng.choice(vocab)
        elif x < 0.3:
            c = rng.choice(rs)
        elif x < 0.4:
            c = sent(1, 6, FOREIGN)
        elif x < 0.5:
            c = " ".join([rng.choice(vocab)] * rng.randint(2, 10))
        elif x < 0.55 and cands:
            c = rng.choice(list(cands.values()))
        elif x < 0.6:
            c = sent(20, 40)
        else:
            c = sent(0, 15)
        ids.append(item)
        cands[item] = c
        refs[item] = rs
    return ids, cands, refs


def tokenized_sets(seed: int = SEED, n: int = N_TOKENIZED_SETS) -> list[Set]:
    """Random sets of already tokenised captions; the first ones are fixed corner cases."""
    fixed: list[Set] = [
        (["0"], {"0": "zzz"}, {"0": ["a dog"]}),  # the CIDEr-D crash of issue 8
        (["0", "1"], {"0": "zzz", "1": "qq kw"}, {"0": ["a dog"], "1": ["a cat", "the cat"]}),
        (["0"], {"0": ""}, {"0": ["a dog"]}),
        (["0"], {"0": "a dog"}, {"0": ["a dog"]}),
        (["0", "1"], {"0": "a dog", "1": "a dog"}, {"0": ["a dog", "a dog"], "1": ["a dog"]}),
        (["0", "1", "2"], {"0": ".", "1": ". .", "2": "a"}, {"0": ["."], "1": [". , ."], "2": ["a a a"]}),
        (["0"], {"0": "a ||| b"}, {"0": ["a ||| b", "|||"]}),
    ]
    rng = random.Random(seed)
    return fixed + [_tokenized_set(rng, k) for k in range(n - len(fixed))]


def raw_sets(seed: int = SEED + 1, n: int = N_RAW_SETS) -> list[Set]:
    """Random sets of raw captions for the tokenizer path; references never blank (capeval
    refuses those) but may be punctuation only, which the PTB step empties."""
    rng = random.Random(seed)
    out: list[Set] = [(["0", "1"], {"0": "A dog.", "1": "..."}, {"0": [".", "!"], "1": ["?", "-"]})]
    for k in range(n - 1):
        vocab = rng.sample(RAW, rng.randint(2, 9))

        def sent(lo: int, hi: int) -> str:
            return "".join(rng.choice(vocab) + rng.choice([" ", " ", " ", "", "  "]) for _ in range(rng.randint(lo, hi)))

        ids = [f"r{k}-{i}" for i in range(rng.choice([1, 2, 3, 5, 8, 15]))]
        refs = {i: [sent(1, 10).strip() or vocab[0] for _ in range(rng.choice([1, 2, 5]))] for i in ids}
        cands = {i: rng.choice([sent(0, 12), rng.choice(refs[i]), rng.choice(vocab)]) for i in ids}
        out.append((ids, cands, refs))
    return out


# --------------------------------------------------------------------------- reference side


def _coco_python(ids: list[str], cands: dict[str, str], refs: dict[str, list[str]]) -> dict[str, Any]:
    """pycocoevalcap's in-process metrics on one set (its ``gts``/``res`` layout)."""
    from pycocoevalcap.bleu.bleu import Bleu
    from pycocoevalcap.cider.cider import Cider
    from pycocoevalcap.rouge.rouge import Rouge

    gts = {i: list(refs[i]) for i in ids}
    res = {i: [cands[i]] for i in ids}
    b_sys, b_items = Bleu(4).compute_score(gts, res, verbose=0)
    out: dict[str, Any] = {}
    for k in range(4):
        out[f"bleu-{k + 1}"] = (float(b_sys[k]), [float(x) for x in b_items[k]])
    r_sys, r_items = Rouge().compute_score(gts, res)
    out["rouge-l"] = (float(r_sys), [float(x) for x in r_items])
    try:
        c_sys, c_items = Cider().compute_score(gts, res)
        out["cider-d"] = (float(c_sys), [float(x) for x in c_items])
    except ValueError:  # pycocoevalcap: max() of an empty document frequency table
        out["cider-d"] = None
    return out


def _java_side(tok_sets: list[Set], raw: list[Set]) -> dict[str, Any]:
    """Java PTB tokenisation of the raw sets (one pycocoevalcap call per set side, as
    ``COCOEvalCap`` does), then METEOR 1.5 of every set from a single Java process."""
    from pycocoevalcap.meteor.meteor import Meteor
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    tok = PTBTokenizer()
    raw_tok = []
    for ids, cands, refs in raw:
        gts = tok.tokenize({i: [{"caption": r} for r in refs[i]] for i in ids})
        res = tok.tokenize({i: [{"caption": cands[i]}] for i in ids})
        raw_tok.append((ids, {i: res[i][0] for i in ids}, {i: gts[i] for i in ids}))
    java = Meteor()
    meteor = []
    for ids, cands, refs in [*tok_sets, *raw_tok]:
        corpus, items = java.compute_score({i: refs[i] for i in ids}, {i: [cands[i]] for i in ids})
        meteor.append((float(corpus), [float(x) for x in items]))
    del java
    return {"raw_tokenized": raw_tok, "meteor": meteor}


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def sets() -> tuple[list[Set], list[Set]]:
    return tokenized_sets(), raw_sets()


@pytest.fixture(scope="module")
def java(sets) -> dict[str, Any]:
    require_java()
    tok_sets, raw = sets
    return cached("random-parity-java", [tok_sets, raw], lambda: _java_side(tok_sets, raw))


def _scorers(tokenizer: str) -> dict[str, Any]:
    return {
        "bleu": registry.get("bleu-4").build(metrics=("bleu-1", "bleu-2", "bleu-3", "bleu-4"), tokenizer=tokenizer),
        "rouge-l": registry.get("rouge-l").build(tokenizer=tokenizer),
        "cider-d": registry.get("cider-d").build(tokenizer=tokenizer),
    }


def _ours(scorers: dict[str, Any], ids: list[str], cands: dict[str, str], refs: dict[str, list[str]]) -> dict:
    out: dict[str, tuple[float, list[float]]] = {}
    for scorer in scorers.values():
        report = scorer.score(cands, refs)
        for name in scorer.metrics:
            r = report[name]
            out[name] = (r.system, [r.items[i] for i in ids])
    return out


def _compare(name: str, tol: float, pairs: list[tuple[str, Any, Any]]) -> float:
    """Largest |ours - reference| over items and systems; fails naming the worst item."""
    worst = (0.0, "")
    n_items = 0
    for where, ours, ref in pairs:
        o_sys, o_items = ours
        r_sys, r_items = ref
        assert len(o_items) == len(r_items), where
        n_items += len(o_items)
        d = np.abs(np.asarray(o_items, dtype=float) - np.asarray(r_items, dtype=float))
        for label, diff in ((f"{where} system", abs(o_sys - r_sys)), (f"{where} item {int(d.argmax()) if len(d) else -1}", float(d.max(initial=0.0)))):
            if not diff <= worst[0]:  # NaN counts as worst
                worst = (diff, label)
    assert worst[0] <= tol, f"{name}: |capeval - pycocoevalcap| = {worst[0]:.3g} at {worst[1]} (tolerance {tol:g})"
    print(f"{name}: {len(pairs)} sets, {n_items} items, max |diff| {worst[0]:.3g}")
    return worst[0]


# --------------------------------------------------------------------------- tests


def test_sets_cover_the_corner_cases(sets) -> None:
    tok_sets, raw = sets
    items = [(c[i], r[i]) for ids, c, r in tok_sets for i in ids]
    assert len(tok_sets) == N_TOKENIZED_SETS and len(items) > 2000
    assert sum(c == "" for c, _ in items) > 100
    assert sum(len(c.split()) == 1 for c, _ in items) > 100
    assert sum(c in rs for c, rs in items) > 100
    assert sum(len(rs) != len(set(rs)) for _, rs in items) > 50
    assert sum(len(rs) >= 10 for _, rs in items) > 50 and sum(len(rs) == 1 for _, rs in items) > 200
    assert sum(len(set(c.split())) == 1 and len(c.split()) > 2 for c, _ in items) > 50
    assert sum(any(w in PUNCT for w in c.split()) for c, _ in items) > 200
    disjoint_sets = [
        (ids, c) for ids, c, r in tok_sets if not {w for i in ids for w in c[i].split()} & {w for i in ids for x in r[i] for w in x.split()}
    ]
    assert len(disjoint_sets) > 5  # no candidate word in any reference of the set
    assert sum(len({len(r[i]) for i in ids}) > 1 for ids, _, r in tok_sets) > 100


def test_tokenized_sets_bleu_rouge_cider(sets) -> None:
    """BLEU-1..4 (items and corpus), ROUGE-L and CIDEr-D, tokenizer="none" on both sides."""
    require_module("pycocoevalcap", "pycocoevalcap==1.2 is the reference implementation (test extra)")
    tok_sets, _ = sets
    scorers = _scorers("none")
    pairs: dict[str, list] = {}
    for k, (ids, cands, refs) in enumerate(tok_sets):
        ref = _coco_python(ids, cands, refs)
        ours = _ours(scorers, ids, cands, refs)
        assert ref["cider-d"] is not None, f"set {k}: pycocoevalcap CIDEr-D failed"
        for name, value in ref.items():
            pairs.setdefault(name, []).append((f"set {k}", ours[name], value))
    for name, p in pairs.items():
        _compare(name, TOL["bleu" if name.startswith("bleu") else name], p)


def test_tokenized_sets_meteor(sets, java) -> None:
    """METEOR 1.5 item scores and the set's corpus score against the Java METEOR."""
    tok_sets, _ = sets
    meteor = registry.get("meteor").build(tokenizer="none")
    pairs = []
    for k, (ids, cands, refs) in enumerate(tok_sets):
        r = meteor.score(cands, refs)["meteor"]
        pairs.append((f"set {k}", (r.system, [r.items[i] for i in ids]), java["meteor"][k]))
    _compare("meteor", TOL["meteor"], pairs)


def test_raw_sets_through_both_tokenizers(sets, java) -> None:
    """Raw captions: capeval's PTB tokenizer gives the Java tokens, and every metric on raw
    input (capeval tokenising) equals pycocoevalcap on its Java-tokenised text."""
    from capeval.tokenize import ptb_tokenize_batch

    tok_sets, raw = sets
    n_tok = len(tok_sets)
    scorers = _scorers("ptb")
    meteor = registry.get("meteor").build(tokenizer="ptb")
    pairs: dict[str, list] = {}
    all_refs_empty = 0
    for k, ((ids, cands, refs), (_, jc, jr)) in enumerate(zip(raw, java["raw_tokenized"])):
        assert ptb_tokenize_batch([cands[i] for i in ids]) == [jc[i] for i in ids], f"raw set {k} candidates"
        assert ptb_tokenize_batch([r for i in ids for r in refs[i]]) == [r for i in ids for r in jr[i]], f"raw set {k} refs"
        ref = _coco_python(ids, jc, jr)
        ours = _ours(scorers, ids, cands, refs)
        m = meteor.score(cands, refs)["meteor"]
        ours["meteor"] = (m.system, [m.items[i] for i in ids])
        ref["meteor"] = java["meteor"][n_tok + k]
        if ref["cider-d"] is None:
            # every reference of the set tokenises to nothing: pycocoevalcap raises
            # (max() of an empty table); capeval scores every item 0.0
            assert all(r == "" for i in ids for r in jr[i])
            assert ours["cider-d"] == (0.0, [0.0] * len(ids))
            all_refs_empty += 1
            del ref["cider-d"]
        for name, value in ref.items():
            pairs.setdefault(name, []).append((f"raw set {k}", ours[name], value))
    assert all_refs_empty >= 1  # the fixed first raw set
    for name, p in pairs.items():
        _compare(name, TOL["bleu" if name.startswith("bleu") else name], p)
