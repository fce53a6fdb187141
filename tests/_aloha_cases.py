"""Random ALOHa inputs for the parity tests: LLM answers with the edge cases of the official
parser, a seeded random embedder (unit vectors, negative cosines common), a fake spaCy
pipeline and a scripted judge backend."""

from __future__ import annotations

import hashlib
import random

import numpy as np

from capeval.judges.backends import Answer

WORDS = ["dog", "cat", "table", "wooden table", "red car", "car", "man", "woman", "hair", "tree", "sky",
         "umbrella", "Dog", "big red bus", "kite"]


def _line(rng: random.Random) -> str:
    a, b = rng.choice(WORDS), rng.choice(WORDS)
    return rng.choice([
        f"- {a}", f"- {a}", f"- {a}", f"- {a} or {b}", f"- {a}, {b}", f"- {a} (possibly)", f"- possibly {a}",
        f"  - {a}", "- ", "-x", f"* {a}", f"- {a} (near the {b})", "- ()", "- , ", f"- {a} OR {b}",
        f"- {a},{b} or {rng.choice(WORDS)}", f"-{a}", f"- {a}\t",
    ])


def answer(rng: random.Random) -> str:
    """An answer of 0-5 lines; sometimes empty or only blanks."""
    if rng.random() < 0.06:
        return rng.choice(["", "  \n ", "No objects."])
    lines = [_line(rng) for _ in range(rng.randint(1, 5))]
    return ("\n" if rng.random() < 0.2 else "") + "\n".join(lines)


def detections(rng: random.Random) -> list[str] | None:
    if rng.random() < 0.4:
        return None
    return [rng.choice(["dog", "person", "car", "dining table", "dog"]) for _ in range(rng.randint(0, 4))]


def encode(texts: list[str]) -> np.ndarray:
    """A seeded unit vector (float32, 4 dimensions) per string: negative cosines are common."""
    out = []
    for t in texts:
        rng = np.random.default_rng(int(hashlib.sha256(t.encode()).hexdigest()[:12], 16))
        v = rng.standard_normal(4).astype(np.float32)
        out.append(v / np.linalg.norm(v))
    return np.array(out, dtype=np.float32).reshape(len(texts), 4)


def similarity(targets: list[str], references: list[str]) -> np.ndarray:
    return encode(targets) @ encode(references).T


class FakeToken:
    def __init__(self, text: str):
        self.text = text
        self.head: FakeToken = self


class FakeNLP:
    """Tokens split on spaces; the root is the last token, none when the text names the sky."""

    def __call__(self, text: str) -> list[FakeToken]:
        tokens = [FakeToken(w) for w in text.split(" ") if w]
        for k, tok in enumerate(tokens):
            tok.head = tokens[-1] if "sky" not in text else tokens[(k + 1) % len(tokens)]
        if "sky" in text and len(tokens) == 1:
            tokens[0].head = FakeToken("x")
        return tokens


def fake_root(text: str) -> str | None:
    tok = next((t for t in FakeNLP()(text) if t.head == t), None)
    return None if tok is None else tok.text


class ScriptedBackend:
    """A judge backend answering from ``script`` (prompt -> answer); records the prompts."""

    name = "scripted"

    def __init__(self, script: dict[str, str]):
        self.script = script
        self.prompts: list[str] = []

    def identity(self):
        return {"backend": "scripted"}

    def decoding(self):
        return {"temperature": 0.0}

    def signature(self):
        return {"backend": "scripted"}

    def generate(self, requests, on_answer, progress=None):
        for k, req in enumerate(requests):
            self.prompts.append(req.prompt)
            on_answer(k, Answer(self.script[req.prompt]))
