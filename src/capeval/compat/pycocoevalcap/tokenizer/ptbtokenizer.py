"""``pycocoevalcap.tokenizer.ptbtokenizer.PTBTokenizer`` (1.2) without Java.

``tokenize({image_id: [{"caption": str, ...}, ...]})`` returns ``{image_id: [str, ...]}``:
every caption lower-cased, PTB-tokenised as Stanford CoreNLP 3.4.1 does, the tokens of
:data:`PUNCTUATIONS` dropped, joined by single spaces; images in input order, captions in
list order; an image with no caption gets no key (as in the original). All captions of
the call are tokenised as one text, in that order, as the Java process sees them
(:func:`capeval.tokenize.ptb_tokenize_batch`). Under ``CAPEVAL_AS_PYCOCOEVALCAP`` the
tokens of recent inputs are remembered by content (:mod:`capeval.compat.pycocoevalcap._memo`). One deliberate difference: a ``\\r``,
``\\v``, ``\\f``, U+2028 or U+2029 inside a caption is a space here, where Java reads a
line break and shifts every later caption onto the wrong image (see
:mod:`capeval.tokenize.ptb`). Reference: pycocoevalcap/tokenizer/ptbtokenizer.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from capeval.compat.pycocoevalcap._common import CompatInputError
from capeval.compat.pycocoevalcap._memo import digest, enabled, remember

#: the tokens pycocoevalcap removes after tokenisation: the original's public list (capeval's
#: tokenizer holds the same tokens as :data:`capeval.tokenize.PUNCTUATIONS`, a frozenset)
PUNCTUATIONS = ["''", "'", "``", "`", "-LRB-", "-RRB-", "-LCB-", "-RCB-", ".", "?", "!", ",", ":", "-", "--", "...", ";"]


class PTBTokenizer:
    """Python PTB tokenisation with pycocoevalcap's input and output layout."""

    def tokenize(self, captions_for_image: Mapping[Any, list[Mapping[str, Any]]]) -> dict[Any, list[str]]:
        """``{image_id: [{"caption": ...}]}`` -> ``{image_id: [tokenised caption]}``."""
        from capeval.tokenize import ptb_tokenize_batch

        if not isinstance(captions_for_image, Mapping):
            raise CompatInputError(f"PTBTokenizer.tokenize needs a dict {{image_id: [{{'caption': ...}}]}}, got {type(captions_for_image).__name__}")
        image_id: list[Any] = []
        texts: list[str] = []
        for k, anns in captions_for_image.items():
            for j, ann in enumerate(anns):
                caption = ann.get("caption") if isinstance(ann, Mapping) else None
                if not isinstance(caption, str):
                    raise CompatInputError(f"image {k!r}, caption #{j}: needs a dict with a string 'caption'", str(k))
                image_id.append(k)
                texts.append(caption.replace("\n", " "))
        if enabled():  # under the switch: the same input (keys, captions, order) is tokenised once
            groups = [len(anns) for anns in captions_for_image.values()]
            key = digest(captions_for_image.keys(), texts, groups)
            tokens = remember("ptb", key, lambda: tuple(ptb_tokenize_batch(texts)))
        else:
            tokens = ptb_tokenize_batch(texts)
        out: dict[Any, list[str]] = {}
        for k, tok in zip(image_id, tokens):
            out.setdefault(k, []).append(tok)
        return out
