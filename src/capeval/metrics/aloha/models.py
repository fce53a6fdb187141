"""ALOHa's models besides the LLM: the sentence embedder of the matching and spaCy's parser
(the root token of each reference object). Loaded lazily, memoised per input (same input,
same output: the official code calls them on every combination's lists).

- embedder: ``MPNetSimilarity`` = ``SentenceTransformer("all-mpnet-base-v2")`` (the hub's
  ``sentence-transformers/all-mpnet-base-v2``: MPNet, mean pooling, L2 normalisation); the
  similarity is ``encode(targets) @ encode(references).T`` in float32 (cosines);
- parser: ``spacy.load("en_core_web_lg")``; the root is the first token whose head is itself.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable

import numpy as np

from capeval.errors import InputError, ResourceError

EMBEDDER = "sentence-transformers/all-mpnet-base-v2"
SPACY_MODEL = "en_core_web_lg"


class SentenceSimilarity:
    """``targets x references`` dot products of a sentence-transformers model's embeddings
    (``model``: hub name or folder), or of ``encode(list[str]) -> array`` when given."""

    def __init__(self, model: str = EMBEDDER, device: str = "cpu", encode: Callable[[list[str]], Any] | None = None):
        self.name = model if encode is None else getattr(encode, "name", "custom")
        self.device = device
        self._encode = encode
        self._memo: dict[tuple[str, ...], np.ndarray] = {}

    def _model(self) -> Callable[[list[str]], Any]:
        if self._encode is None:
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError:
                raise InputError("aloha needs sentence-transformers: pip install 'capeval[aloha]'") from None
            try:
                st = SentenceTransformer(self.name, device=self.device)
            except (OSError, ValueError) as exc:
                raise ResourceError(f"aloha: cannot load the embedder {self.name!r} ({str(exc).splitlines()[0][:160]}); "
                                    "pass -O aloha.embedder=FOLDER holding a sentence-transformers model") from None
            self._encode = lambda texts: st.encode(texts, show_progress_bar=False)
        return self._encode

    def encode(self, texts: list[str]) -> np.ndarray:
        key = tuple(texts)
        if key not in self._memo:
            self._memo[key] = np.asarray(self._model()(list(texts)))
        return self._memo[key]

    def forget(self) -> None:
        """Drop the memoised embeddings (between items: memory stays bounded)."""
        self._memo.clear()

    def __call__(self, targets: list[str], references: list[str]) -> np.ndarray:
        ref = self.encode(references)  # references first, as MPNetSimilarity
        tgt = self.encode(targets)
        return tgt @ ref.T


def spacy_root_noun(model: Any = SPACY_MODEL) -> Callable[[str], str | None]:
    """``text -> root token text`` with spaCy pipeline ``model`` (a name, a folder or an ``nlp``)."""
    if isinstance(model, str):
        try:
            import spacy
        except ImportError:
            raise InputError("aloha needs spaCy: pip install 'capeval[aloha]'") from None
        try:
            nlp = spacy.load(model)
        except OSError:
            from capeval.models.spacy_pipelines import install_hint

            raise ResourceError(f"aloha: spaCy model {model!r} is not installed: {install_hint(model)} "
                                "(or pass -O aloha.spacy_model=FOLDER)") from None
    else:
        nlp = model

    @lru_cache(maxsize=65536)
    def root(text: str) -> str | None:
        token = next((t for t in nlp(text) if t.head == t), None)
        return None if token is None else str(token.text)

    return root
