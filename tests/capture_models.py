"""A tiny randomly initialised Sentence-BERT with all-mpnet-base-v2's architecture (MPNet +
mean pooling + L2 normalisation), for CAPTURE's soft-matching parity and its benchmark."""

from __future__ import annotations

from pathlib import Path

#: the tiny vocabulary (lower-cased words; anything else is <unk>)
WORDS = ("a the of on in with and is near under above behind holding wearing riding sitting standing "
         "car automobile truck vehicle road street building tower clock sky tree man woman person dog cat "
         "horse bike bicycle shirt hat table chair cup glass window door red blue green white black tall "
         "small large big wooden old young bright dark clear busy modern").split()


def tiny_sbert(folder: Path, *, seed: int = 0, dtype: str = "float64", hidden: int = 32, layers: int = 2) -> object:
    """A ``SentenceTransformer`` of a random MPNet (``dtype`` float64: matches are exact up to
    float64 rounding whatever the batching), saved in ``folder`` and loaded from it."""
    import torch
    from sentence_transformers import SentenceTransformer
    try:  # sentence-transformers >= 6 moved the modules
        from sentence_transformers.sentence_transformer import modules as models
    except ImportError:
        from sentence_transformers import models
    from transformers import MPNetConfig, MPNetModel, MPNetTokenizer

    folder.mkdir(parents=True, exist_ok=True)
    words = ["<s>", "<pad>", "</s>", "[UNK]", "<mask>", *WORDS, ".", ","]  # MPNet's special tokens first
    tok = MPNetTokenizer(vocab={w: i for i, w in enumerate(words)}, do_lower_case=True, model_max_length=64)
    tok.save_pretrained(str(folder))
    torch.manual_seed(seed)
    cfg = MPNetConfig(vocab_size=len(tok), hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=4,
                      intermediate_size=2 * hidden, max_position_embeddings=80, pad_token_id=tok.pad_token_id)
    MPNetModel(cfg).save_pretrained(str(folder))
    word = models.Transformer(str(folder), max_seq_length=64)
    model = SentenceTransformer(modules=[word, models.Pooling(hidden, "mean"), models.Normalize()], device="cpu")
    return model.double() if dtype == "float64" else model
