"""Tiny random RoBERTa checkpoints for the BERTScore tests and benchmark (built offline)."""

from __future__ import annotations

from pathlib import Path

TEXTS = ["a dog runs on the grass", "two children play with a ball in the park", "a man rides a bike down the street",
         "the cat sits on a red sofa", "people walk along the beach at sunset", "a woman in a blue dress smiles"]


def tiny_roberta(folder: Path, *, dtype: str = "float32", layers: int = 4, hidden: int = 32, heads: int = 4,
                 intermediate: int = 64, vocab: int = 300, max_length: int = 40, positive: bool = True,
                 seed: int = 0) -> Path:
    """A randomly initialised RoBERTa with a byte-level BPE tokenizer trained on :data:`TEXTS`,
    saved with ``save_pretrained``. ``positive``: every layer's output LayerNorm gets a shared
    bias, so token cosines are positive as in real RoBERTa (whose layer-17 cosines are)."""
    import torch
    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaConfig, RobertaModel, RobertaTokenizer

    folder.mkdir(parents=True, exist_ok=True)
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(TEXTS * 5, vocab_size=vocab, min_frequency=1,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    bpe.save_model(str(folder))
    tok = RobertaTokenizer(vocab=str(folder / "vocab.json"), merges=str(folder / "merges.txt"),
                           model_max_length=max_length)
    tok.save_pretrained(str(folder))
    torch.manual_seed(seed)
    cfg = RobertaConfig(vocab_size=len(tok), hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                        intermediate_size=intermediate, max_position_embeddings=max_length + 4,
                        pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    model = RobertaModel(cfg, add_pooling_layer=False)
    if positive:
        with torch.no_grad():
            for layer in model.encoder.layer:
                layer.output.LayerNorm.bias.fill_(1.0)
            model.embeddings.LayerNorm.bias.fill_(1.0)
    if dtype == "float64":
        model = model.double()
    model.save_pretrained(str(folder))
    return folder


#: word pieces of the tiny BERT vocabulary besides the words of :data:`TEXTS` (stop words, suffixes)
BERT_EXTRA = ["a", "an", "the", "is", "on", "in", "of", "with", "and", ".", ",", "##s", "##ing", "dog", "cat", "run",
              "walk", "sit", "red", "blue", "bike", "man", "woman", "play", "##er", "##ed"]


def tiny_bert(folder: Path, *, dtype: str = "float32", layers: int = 4, hidden: int = 32, heads: int = 4,
              intermediate: int = 64, max_length: int = 40, bias: float = 0.5, seed: int = 0) -> Path:
    """A randomly initialised BERT with a WordPiece vocabulary (lower-cased) of :data:`TEXTS`'
    words and :data:`BERT_EXTRA`, saved with ``save_pretrained``. ``bias``: every output
    LayerNorm gets this shared bias, so that token cosines spread around BERT-S++'s 0.4."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizer

    folder.mkdir(parents=True, exist_ok=True)
    words = dict.fromkeys(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *BERT_EXTRA,
                           *(w for t in TEXTS for w in t.split())])
    (folder / "vocab.txt").write_text("\n".join(words) + "\n", encoding="utf-8")
    tok = BertTokenizer(vocab=str(folder / "vocab.txt"), do_lower_case=True, model_max_length=max_length)
    tok.save_pretrained(str(folder))
    torch.manual_seed(seed)
    cfg = BertConfig(vocab_size=len(words), hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                     intermediate_size=intermediate, max_position_embeddings=max_length + 2,
                     pad_token_id=tok.pad_token_id)
    model = BertModel(cfg, add_pooling_layer=False)
    with torch.no_grad():
        for layer in model.encoder.layer:
            layer.output.LayerNorm.bias.fill_(bias)
        model.embeddings.LayerNorm.bias.fill_(bias)
    if dtype == "float64":
        model = model.double()
    model.save_pretrained(str(folder))
    return folder
