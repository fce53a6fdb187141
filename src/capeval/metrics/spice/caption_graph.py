"""One caption's scene graph as plain data: objects, attributes, subject-predicate-object.

SPICE's parser proposes tuples in SPICE's own order: ``(object,)``, ``(object, attribute)``
and ``(subject, object, predicate)``. :class:`CaptionGraph` regroups them the way people
(and HICE-S, which embeds each triple as a short text) read them: objects, ``(object,
attribute)`` pairs and ``(subject, predicate, object)`` triples, each listed once in parse
order. Words are lower-cased lemmas, as SPICE matches them. No synonym merging happens here
(that is :mod:`.graph`'s job when a graph is scored), so what you see is what the parser said.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence


@dataclass(frozen=True)
class CaptionGraph:
    """Scene graph of one caption.

    ``objects``: every object, including those only named in attributes or relations;
    ``attributes``: ``(object, attribute)``; ``relations``: ``(subject, predicate, object)``;
    ``tuples``: the proposed tuples in SPICE's order (what the SPICE metric consumes).
    """

    caption: str
    objects: tuple[str, ...]
    attributes: tuple[tuple[str, str], ...]
    relations: tuple[tuple[str, str, str], ...]
    tuples: tuple[tuple[str, ...], ...] = field(repr=False)

    @classmethod
    def from_tuples(cls, caption: str, proposed: Iterable[Sequence[str]]) -> "CaptionGraph":
        """Regroup SPICE's proposed tuples; a tuple of another length is a parser bug."""
        objects: dict[str, None] = {}
        attributes: dict[tuple[str, str], None] = {}
        relations: dict[tuple[str, str, str], None] = {}
        kept: list[tuple[str, ...]] = []
        for t in proposed:
            t = tuple(t)
            kept.append(t)
            if len(t) == 1:
                objects.setdefault(t[0])
            elif len(t) == 2:
                objects.setdefault(t[0])
                attributes.setdefault((t[0], t[1]))
            elif len(t) == 3:
                objects.setdefault(t[0])
                objects.setdefault(t[1])
                relations.setdefault((t[0], t[2], t[1]))
            else:
                raise ValueError(f"scene-graph tuple of length {len(t)} for {caption!r}: {t}")
        return cls(caption, tuple(objects), tuple(attributes), tuple(relations), tuple(kept))

    def phrases(self, objects: str = "unrelated") -> list[str]:
        """Short texts, one per fact: ``"man ride horse"`` per relation, ``"brown horse"`` per
        attribute, and the bare objects (``objects="unrelated"``: those in no relation or
        attribute; ``"all"``; ``"none"``)."""
        if objects not in ("unrelated", "all", "none"):
            raise ValueError(f"objects must be 'unrelated', 'all' or 'none', got {objects!r}")
        out = [f"{s} {p} {o}" for s, p, o in self.relations]
        out += [f"{a} {o}" for o, a in self.attributes]
        if objects == "all":
            out += list(self.objects)
        elif objects == "unrelated":
            named = {o for o, _ in self.attributes} | {w for s, _, o in self.relations for w in (s, o)}
            out += [o for o in self.objects if o not in named]
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: caption, objects, attributes and relations (lists)."""
        return {
            "caption": self.caption,
            "objects": list(self.objects),
            "attributes": [list(a) for a in self.attributes],
            "relations": [list(r) for r in self.relations],
        }

    def describe(self) -> str:
        """A few readable lines (``capeval scene-graph`` prints them)."""
        lines = [self.caption]
        lines.append("  objects:    " + (", ".join(self.objects) or "-"))
        lines.append("  attributes: " + (", ".join(f"{o} : {a}" for o, a in self.attributes) or "-"))
        lines.append("  relations:  " + (", ".join(f"{s} -{p}-> {o}" for s, p, o in self.relations) or "-"))
        return "\n".join(lines)
