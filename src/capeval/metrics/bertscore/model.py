"""The contextual embedding model of BERTScore: load once, embed each distinct sentence once.

As bert_score 0.3.13 (``utils.get_model``, ``sent_encode``, ``get_bert_embedding``): the
sentence is stripped, encoded with the special tokens (with a space before its first word for
RoBERTa/GPT-2 tokenizers, as transformers 4 does for the package's ``add_prefix_space=True``)
and truncated to ``model_max_length``; the encoder keeps its first ``num_layers`` layers and
its last hidden state is the embedding (layer 0: the embedding layer's output). Batches are padded with the pad token and an attention mask; capeval sorts
the distinct sentences by token count so that little padding is computed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Sequence

from capeval.errors import InputError, ResourceError
from capeval.hashing import file_digest

#: the default model of ``lang="en"`` and its layer (bert_score ``lang2model`` / ``model2layers``)
DEFAULT_MODEL = "roberta-large"
DEFAULT_LAYERS = {"roberta-large": 17}
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


def missing_message(name: str, metric: str = "bertscore", default: str = DEFAULT_MODEL) -> str:
    return (f"{metric}: the model {name!r} is not on this machine: run `capeval download {metric}` once online "
            f"({default}), download {name} once into the Hugging Face cache, or give a folder saved with "
            f"save_pretrained: -O {metric}.model=PATH")


def locate(name: str, metric: str = "bertscore", default: str = DEFAULT_MODEL) -> Path:
    """The folder to load ``name`` from: a folder as it is; capeval's downloaded copy of a hub
    name of the checkpoint table; else the Hugging Face cache's snapshot (offline lookup)."""
    if os.path.isdir(os.path.expanduser(name)):
        return Path(os.path.expanduser(name))
    from capeval.models.clip.checkpoints import by_hub, local_path

    entry = by_hub(HUB_ALIASES.get(name, name))
    if entry is not None and entry.present():
        return local_path(entry)
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(HUB_ALIASES.get(name, name), local_files_only=True))
    except Exception:  # not in the cache (offline lookup only): many exception types
        raise ResourceError(missing_message(name, metric, default)) from None


#: short hub names that moved under an organisation (the package uses the short ones)
HUB_ALIASES = {"roberta-large": "FacebookAI/roberta-large", "bert-base-uncased": "google-bert/bert-base-uncased"}


def weights_sha256(folder: Path) -> str:
    """sha256 of the weights file(s) loaded (sharded checkpoints: of the digests joined)."""
    files = [folder / w for w in WEIGHT_FILES if (folder / w).is_file()]
    if not files:
        files = sorted(folder.glob("model-*.safetensors")) or sorted(folder.glob("pytorch_model-*.bin"))
    if not files:
        raise ResourceError(f"bertscore: {folder} has no weights file ({' or '.join(WEIGHT_FILES)})")
    if len(files) == 1:
        return file_digest(files[0])
    import hashlib

    return hashlib.sha256("".join(file_digest(f) for f in files).encode()).hexdigest()


def layer_count(folder: Path) -> int:
    """Number of encoder layers from ``config.json`` (read before the weights are loaded)."""
    try:
        cfg = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        return int(cfg.get("num_hidden_layers", cfg.get("n_layers", cfg.get("num_layers"))))
    except (OSError, ValueError, TypeError) as exc:
        raise ResourceError(f"bertscore: {folder}/config.json is missing or has no layer count "
                            f"({type(exc).__name__})") from None


class Embedder:
    """Tokenizer + encoder truncated to ``num_layers``; ``embed`` returns unit-normalised embeddings."""

    def __init__(self, folder: Path, name: str, num_layers: int, device: str = "cpu", batch_size: int = 64,
                 metric: str = "bertscore"):
        from capeval._optional import require

        torch = require("torch", extra="bertscore", purpose="bertscore")
        tf = require("transformers", extra="bertscore", purpose="bertscore")
        self.name, self.num_layers, self.device, self.batch_size = name, num_layers, device, batch_size
        try:
            self.tokenizer = tf.AutoTokenizer.from_pretrained(str(folder), use_fast=False)
            model = tf.AutoModel.from_pretrained(str(folder))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise ResourceError(f"{metric}: cannot load the model {name} from {folder} ({first[:200]})") from None
        model.eval()
        if hasattr(model, "decoder") and hasattr(model, "encoder"):
            model = model.encoder
        layers = getattr(getattr(model, "encoder", None), "layer", None)
        if layers is None:
            raise InputError(f"{metric}: model {name} ({type(model).__name__}) is not a BERT-like encoder "
                             "(no encoder.layer); capeval supports BERT/RoBERTa-style models")
        model.encoder.layer = torch.nn.ModuleList(list(layers)[:num_layers])  # the package's truncation
        self.model = model.to(device)
        self.prefix_space = isinstance(self.tokenizer, (tf.GPT2Tokenizer, tf.RobertaTokenizer))
        self.special = frozenset(t for t in (self.tokenizer.sep_token_id, self.tokenizer.cls_token_id) if t is not None)
        self.max_length = self.tokenizer.model_max_length

    def encode(self, sentence: str) -> list[int]:
        """Token ids with special tokens, as ``bert_score.utils.sent_encode`` under transformers 4.

        bert_score passes ``add_prefix_space=True`` to a RoBERTa/GPT-2 tokenizer's ``encode``;
        transformers 4's tokenizer then prepends a space to a text that does not begin with one
        (so the first word is ``Ġa``, as inside a sentence). transformers >= 5 ignores that
        argument (the first word becomes ``a``), so the space is written into the text here:
        the same ids under either version (tests/test_bertscore_tf4.py compares them id by id)."""
        text = sentence.strip()
        if self.prefix_space and text:
            text = " " + text
        return list(self.tokenizer.encode(text, add_special_tokens=True, max_length=self.max_length, truncation=True))

    def was_cut(self, sentence: str, ids: Sequence[int]) -> bool:
        """Whether :meth:`encode` cut ``sentence`` (``ids``: its output) to ``model_max_length``.

        Only a sequence of exactly the maximum length can have been cut; that one is encoded
        again by :meth:`encode` itself with no effective limit, so the two always tokenise alike."""
        if len(ids) < self.max_length:
            return False
        limit, self.max_length = self.max_length, 1 << 30
        try:
            return len(self.encode(sentence)) > limit
        finally:
            self.max_length = limit

    def embed(self, token_ids: Sequence[tuple[int, ...]], progress: Any = None) -> list[Any]:
        """Unit-normalised embeddings (numpy, n_tokens x d) of each token id sequence, in order;
        sequences are batched by length (longest first)."""
        import torch

        order = sorted(range(len(token_ids)), key=lambda k: -len(token_ids[k]))
        out: list[Any] = [None] * len(token_ids)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                chunk = order[start: start + self.batch_size]
                width = max(len(token_ids[k]) for k in chunk)
                ids = torch.full((len(chunk), width), pad, dtype=torch.long)
                mask = torch.zeros((len(chunk), width), dtype=torch.long)
                for row, k in enumerate(chunk):
                    ids[row, : len(token_ids[k])] = torch.tensor(token_ids[k], dtype=torch.long)
                    mask[row, : len(token_ids[k])] = 1
                hidden = self.model(ids.to(self.device), attention_mask=mask.to(self.device))[0]
                hidden = hidden / torch.norm(hidden, dim=-1, keepdim=True)
                hidden = hidden.cpu().numpy()
                for row, k in enumerate(chunk):
                    out[k] = hidden[row, : len(token_ids[k])]
                if progress is not None:
                    progress(len(chunk))
        return out
