"""From FACTUAL output strings to CAPTURE's objects, attributes and relations.

As capture-metric 0.1.13 (``capture.py``: ``sample_to_parse_results``, ``merge_sentence_results``)
on FactualSceneGraph 0.7.3 (``utils.py``: ``space_out_symbols_in_graph``,
``clean_graph_string``; ``scene_graph_parser.py``: ``graph_string_to_object``), read line by line:

- each sentence's output is spaced out around ``( ) ,``; a cut-off last fact is dropped (an
  output of one cut-off fact keeps its first field); facts are de-duplicated and sorted;
- a fact ``(s, is, digits)`` is a quantity, ``(s, is, a)`` an attribute of ``s``, ``(s, r, o)`` a
  relation; a fact without three fields counts only when it is the output's only fact (then its
  first field is an entity) - so lone ``( cat )`` facts of longer outputs are dropped, as there;
- heads are lemmatised as nouns, attributes as adjectives (WordNet), an attribute containing
  ``" of"`` is dropped, relation predicates are kept as written;
- objects in the stop-word list are dropped; objects, attribute owners and both relation ends
  must be nouns of the caption (nltk's tagger, tags ``NN*``, lemmatised), or every word of them.

Sets keep first-appearance order here; the package iterates Python sets, whose order depends on
``PYTHONHASHSEED``, which can change which pairs its greedy synonym stage matches first.
"""

from __future__ import annotations

from typing import Callable, Iterable, Sequence

Lemmatize = Callable[[str, str], str]
#: (objects, {object: [attribute, ...]}, [(subject, predicate, object), ...])
Parsed = tuple[list[str], dict[str, list[str]], list[tuple[str, str, str]]]


def spaced(text: str) -> str:
    """Spaces around ``(``, ``)`` and ``,``; runs of whitespace become one space."""
    return " ".join(text.replace("(", " ( ").replace(")", " ) ").replace(",", " , ").split())


def clean_facts(text: str) -> list[str]:
    """The fact bodies of a spaced output: cut-off tail dropped, de-duplicated, sorted."""
    facts = text.strip().split(") ,")
    if not text.endswith(")"):
        facts = facts[:-1] if len(facts) > 1 else [facts[0].split(",")[0]]
    bodies = {f.strip().strip("()").strip() for f in facts}
    return sorted(b for b in bodies if b)


def graph_of(output: str) -> tuple[list[dict], list[tuple[int, str, int]]]:
    """Entities (``head``, ``attributes``) and relations ``(subject index, predicate, object
    index)`` of one raw FACTUAL output string."""
    cleaned = " , ".join(f"( {f} )" for f in clean_facts(spaced(output)))
    entities: list[dict] = []
    index: dict[str, int] = {}
    relations: list[tuple[int, str, int]] = []

    def entity(name: str) -> int:
        if name not in index:
            index[name] = len(entities)
            entities.append({"head": name, "attributes": {}})
        return index[name]

    pieces = cleaned.strip().split(") ,")
    for piece in pieces:
        parts = [p.strip() for p in piece.strip().strip("()").split(",")]
        if len(parts) != 3:
            if len(pieces) == 1:
                entity(parts[0])
            continue
        subject, predicate, obj = parts
        s = entity(subject)
        if predicate == "is":
            if not obj.isdigit():  # digits: a quantity, unused by CAPTURE
                entities[s]["attributes"].setdefault(obj)
        else:
            relations.append((s, predicate, entity(obj)))
    return entities, relations


def merge(outputs: Iterable[str], lemmatize: Lemmatize) -> Parsed:
    """Objects, attributes and relations of a caption's sentence outputs, lemmatised."""
    objects: dict[str, None] = {}
    attributes: dict[str, dict[str, None]] = {}
    relations: dict[tuple[str, str, str], None] = {}
    for output in outputs:
        entities, rels = graph_of(output)
        for e in entities:
            head = lemmatize(e["head"], "n")
            objects.setdefault(head)
            for attribute in e["attributes"]:
                attribute = lemmatize(attribute, "a")
                if " of" not in attribute:
                    attributes.setdefault(head, {}).setdefault(attribute)
        for s, predicate, o in rels:
            relations.setdefault((lemmatize(entities[s]["head"], "n"), predicate,
                                  lemmatize(entities[o]["head"], "n")))
    return list(objects), {k: list(v) for k, v in attributes.items()}, list(relations)


def _is_noun(phrase: str, nouns: set[str]) -> bool:
    return phrase in nouns or all(piece in nouns for piece in phrase.split(" "))


def keep_visual(parsed: Parsed, nouns: set[str], stop_words: set[str]) -> Parsed:
    """Drop stop-word objects and every element whose objects are not nouns of the caption."""
    objects, attributes, relations = parsed
    return ([o for o in objects if o not in stop_words and _is_noun(o, nouns)],
            {k: v for k, v in attributes.items() if _is_noun(k, nouns)},
            [r for r in relations if _is_noun(r[0], nouns) and _is_noun(r[2], nouns)])


def parse_caption(sentence_outputs: Sequence[str], nouns: Iterable[str], lemmatize: Lemmatize,
                  stop_words: set[str]) -> Parsed:
    """One caption's CAPTURE elements from its sentences' FACTUAL outputs and its noun lemmas."""
    return keep_visual(merge(sentence_outputs, lemmatize), set(nouns), stop_words)
