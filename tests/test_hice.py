"""HICE-S / RefHICE-S: the formulas on hand-built similarity matrices (against loops written
from the paper's Eq. 4-11), the FACTUAL output reader, the scorer end to end on the sample
images with a tiny random Alpha-CLIP (grid regions and a tiny random SAM) against an
independent recomputation, explanations (JSON schema, PNG), the CLI, the published-values
table and bad input."""

from __future__ import annotations

import itertools
import json
import shutil

import numpy as np
import pytest

from _reference import SHARED_DATA, require_module, unavailable

from capeval.errors import InputError, MissingDependencyError, ResourceError
from capeval.functional import hice as F
from capeval.metrics.hice.factual import fact_phrases, parse_facts

SAMPLES = SHARED_DATA / "samples" / "clipscore_example"


# -- formulas -----------------------------------------------------------------------------

def paper_local(sim) -> tuple[float, float, float]:
    """Eq. 4-6 as written, with max(cos, 0) per comparison: loops over Python floats."""
    n, m = len(sim), len(sim[0])
    c = [[max(0.0, float(sim[i][j])) for j in range(m)] for i in range(n)]
    p = sum(max(c[i][j] for i in range(n)) for j in range(m)) / m
    r = sum(max(c[i][j] for j in range(m)) for i in range(n)) / n
    return p, r, (0.0 if p == 0 or r == 0 else 2 * p * r / (p + r))


def test_set_match_on_a_hand_built_matrix():
    # 3 regions x 2 phrases; the -0.5 is clipped to 0
    sim = [[0.9, 0.1], [0.2, 0.4], [0.3, -0.5]]
    m = F.set_match(sim)
    assert m.precision == pytest.approx((0.9 + 0.4) / 2)
    assert m.recall == pytest.approx((0.9 + 0.4 + 0.3) / 3)
    assert m.f == pytest.approx(2 * 0.65 * (1.6 / 3) / (0.65 + 1.6 / 3))
    assert m.column_arg.tolist() == [0, 1] and m.row_arg.tolist() == [0, 1, 0]
    assert m.column_best.tolist() == pytest.approx([0.9, 0.4]) and m.row_best.tolist() == pytest.approx([0.9, 0.4, 0.3])


@pytest.mark.parametrize("seed", range(6))
def test_set_match_equals_the_paper_loops(seed):
    rng = np.random.default_rng(seed)
    sim = rng.uniform(-0.4, 0.6, size=(int(rng.integers(1, 7)), int(rng.integers(1, 7))))
    m = F.set_match(sim)
    assert (m.precision, m.recall, m.f) == pytest.approx(paper_local(sim.tolist()), abs=1e-12)


def test_hmean_parts_zero_nan_and_negative():
    assert float(F.hmean(0.2, 0.6)) == pytest.approx(2 * 0.2 * 0.6 / 0.8)
    assert float(F.hmean(0.2, 0.4, 0.5, 0.8)) == pytest.approx(4 / (1 / 0.2 + 1 / 0.4 + 1 / 0.5 + 1 / 0.8))
    assert float(F.hmean(0.0, 0.9)) == 0.0 and float(F.hmean(0.3, 0.0, 0.2, 0.1)) == 0.0
    assert np.isnan(F.hmean(np.nan, 0.5))
    with pytest.raises(ValueError, match="clip cosines"):
        F.hmean(-0.1, 0.5)
    assert F.hmean([0.2, 0.0], [0.6, 0.6]).tolist() == pytest.approx([0.3, 0.0])  # element-wise


def test_hice_and_ref_hice_from_parts():
    g, l_itc, g_ttc, l_ttc = 0.25, 0.2, 0.7, 0.6
    assert float(F.hice_s(g, l_itc, w=1.0)) == pytest.approx(2 * g * l_itc / (g + l_itc))
    assert float(F.hice_s(g, l_itc)) == pytest.approx(2.5 * 2 * g * l_itc / (g + l_itc))  # w=2.5 scales it
    four = 4 / (1 / g + 1 / l_itc + 1 / g_ttc + 1 / l_ttc)
    assert float(F.ref_hice_s(g, l_itc, g_ttc, l_ttc, w=2.0)) == pytest.approx(2.0 * four)
    assert float(F.hice_s(-0.3, 0.5)) == 0.0  # a negative global cosine is clipped, hMean with a 0 part is 0
    assert float(F.ref_hice_s(0.3, 0.5, -0.1, 0.4)) == 0.0


def test_negative_cosines_and_empty_sets():
    m = F.set_match(-np.ones((3, 2)))
    assert (m.precision, m.recall, m.f) == (0.0, 0.0, 0.0)
    for shape in ((0, 3), (2, 0)):
        with pytest.raises(ValueError, match="non-empty"):
            F.set_match(np.zeros(shape))
    from capeval.metrics.hice.phrases import phrases_or_caption

    assert phrases_or_caption([], "a photo.") == (["a photo."], True)
    assert phrases_or_caption(["dog run", " dog run ", ""], "x") == (["dog run"], False)


def test_reference_modes_one_vs_several():
    a = np.array([[0.8, 0.1], [0.2, 0.3]])  # reference A's 2 phrases x candidate's 2 phrases
    b = np.array([[0.1, 0.9]])              # reference B's 1 phrase
    pooled = paper_local(np.vstack([a, b]).tolist())[2]
    fa, fb = paper_local(a.tolist())[2], paper_local(b.tolist())[2]
    assert F.local_ttc([a, b], "pool") == pytest.approx(pooled)
    assert F.local_ttc([a, b], "max") == pytest.approx(max(fa, fb))
    assert F.local_ttc([a, b], "mean") == pytest.approx((fa + fb) / 2)
    assert len({round(F.local_ttc([a, b], mode), 9) for mode in ("pool", "max", "mean")}) == 3
    for mode in ("pool", "max", "mean"):  # one reference: every mode is that reference's lTTC
        assert F.local_ttc([a], mode) == pytest.approx(fa)
    assert F.combine_refs([0.2, 0.6], "max") == 0.6 and F.combine_refs([0.2, 0.6], "mean") == pytest.approx(0.4)
    with pytest.raises(ValueError, match="reference mode"):
        F.combine_refs([0.2], "min")


# -- FACTUAL output strings ------------------------------------------------------------------

def test_factual_output_strings():
    out = "( man , is , young ) , ( man , v:ride , horse:1 ) , ( horse:1 , is , brown ) , ( cat ) , ( man , is , young )"
    facts = parse_facts(out)
    assert facts == [("man", "is", "young"), ("man", "ride", "horse"), ("horse", "is", "brown"), ("cat",)]
    assert fact_phrases(facts) == ["man is young", "man ride horse", "horse is brown", "cat"]
    assert parse_facts("( dog , pv:hold by , Man ) , ( dog , is , 2 )") == [("dog", "hold by", "man"), ("dog", "is", "2")]
    assert parse_facts("( man , v:ride , horse )", strip_marks=False) == [("man", "v:ride", "horse")]
    # a truncated last fact, a two-field group, an empty field and free text are dropped
    assert parse_facts("( a , on , b ) , ( c , d ) , ( , x , y ) , ( e , near , f") == [("a", "on", "b")]
    assert parse_facts("Generate Scene Graph: nothing") == [] and parse_facts("") == []
    assert fact_phrases([("dog",), ("dog", "on", "grass")]) == ["dog on grass"]  # the triple names the dog


class _StubTokenizer:
    def __init__(self, outputs):
        self.outputs, self.calls = outputs, []

    def __call__(self, texts, **kwargs):
        import torch

        self.calls.append(list(texts))
        return {"input_ids": torch.zeros(len(texts), 3, dtype=torch.long), "attention_mask": torch.ones(len(texts), 3)}

    def batch_decode(self, ids, **kwargs):
        return [self.outputs[self.calls[-1][k].removeprefix("Generate Scene Graph: ")] for k in range(len(ids))]


class _StubModel:
    def generate(self, input_ids, **kwargs):
        assert kwargs["num_beams"] == 5 and kwargs["max_length"] == 128
        return input_ids


def test_factual_parser_with_given_model_parses_each_caption_once():
    pytest.importorskip("torch")
    from capeval.metrics.hice.factual import FactualParser

    tok = _StubTokenizer({"a man rides a horse": "( man , v:ride , horse )", "a cat": "( cat )"})
    parser = FactualParser("stub", model=_StubModel(), tokenizer=tok)
    assert parser.phrases(["a man rides a horse", "a cat", "a man rides a horse"]) == [["man ride horse"], ["cat"],
                                                                                      ["man ride horse"]]
    parser.phrases(["a cat"])
    # one batch (tokenised twice: truncated for the model, untruncated to count what was cut)
    assert tok.calls == [["Generate Scene Graph: a man rides a horse", "Generate Scene Graph: a cat"]] * 2
    assert parser.signature_fields()["parser"] == "factual-1" and parser.signature_fields()["parser_model"] == "stub"


def test_factual_parser_runs_a_tiny_random_t5():
    require_module("transformers", "the FACTUAL parser runs through transformers")
    tokenizers = require_module("tokenizers", "a word-level tokenizer for the tiny T5")
    import transformers as tf

    from capeval.metrics.hice.factual import FactualParser

    words = ["<pad>", "</s>", "<unk>", "(", ")", ",", "man", "ride", "horse", "is", "Generate", "Scene", "Graph:", "a"]
    core = tokenizers.Tokenizer(tokenizers.models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    core.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    tok = tf.PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", eos_token="</s>", unk_token="<unk>")
    cfg = tf.T5Config(vocab_size=len(words), d_model=16, d_kv=8, d_ff=32, num_layers=1, num_heads=2,
                      decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
    model = tf.T5ForConditionalGeneration(cfg)
    parser = FactualParser("tiny-t5", model=model, tokenizer=tok, beam_size=2, max_output_len=8)
    raw = parser.generate(["a man ride a horse"])
    assert isinstance(raw[0], str)
    assert parser.phrases(["a man ride a horse"]) == [fact_phrases(parse_facts(raw[0]))]
    assert len(parser.signature_fields()["parser_sha256"]) == 16


#: what the tiny FACTUAL model writes, token by token ("##" tokens join the previous word)
FACT_OUTPUT = ["(", "man", ",", "v:ride", "##,", "horse", ")", "##(", "dog", "##)"]
FACT_WORDS = ["<pad>", "</s>", "<unk>", *FACT_OUTPUT, "a", "the", "on", "grass", "Generate", "Scene", "Graph:"]


def tiny_t5_folder(folder, seed=0):
    """A tiny FACTUAL-shaped model saved as ``capeval download factual`` leaves it: a
    T5ForConditionalGeneration (config + safetensors weights) and a word-level tokenizer
    (tokenizer.json), built offline. Random weights (the encoder), except that the decoder is
    set to map each token of FACT_OUTPUT to the next: it writes "( man, v:ride, horse )( dog)"
    through the real generate/decode path."""
    tf = require_module("transformers", "the FACTUAL parser runs through transformers")
    tokenizers = require_module("tokenizers", "a word-level tokenizer for the tiny T5")
    import torch

    ids = {w: i for i, w in enumerate(FACT_WORDS)}
    core = tokenizers.Tokenizer(tokenizers.models.WordLevel(ids, unk_token="<unk>"))
    core.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    core.decoder = tokenizers.decoders.WordPiece(prefix="##")  # words joined by spaces, "##x" glued
    tok = tf.PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", eos_token="</s>", unk_token="<unk>")
    d = 32
    cfg = tf.T5Config(vocab_size=len(FACT_WORDS), d_model=d, d_kv=8, d_ff=d, num_layers=1, num_heads=2,
                      feed_forward_proj="relu", decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
    torch.manual_seed(seed)
    model = tf.T5ForConditionalGeneration(cfg)
    chain = [0] + [ids[w] for w in FACT_OUTPUT] + [1]  # decoder start -> ... -> </s>
    with torch.no_grad():
        # one-hot embeddings (tied to lm_head: the logits read the residual stream's coordinates);
        # the decoder's attention outputs are zero, its feed-forward adds 10 x (next token) to
        # the previous token, so the greedy and the beam answer is the chain
        model.shared.weight.copy_(torch.eye(len(FACT_WORDS), d))
        block = model.decoder.block[0]
        block.layer[0].SelfAttention.o.weight.zero_()
        block.layer[1].EncDecAttention.o.weight.zero_()
        for norm in (block.layer[2].layer_norm, model.decoder.final_layer_norm):
            norm.weight.fill_(1.0)
        ff = block.layer[2].DenseReluDense
        ff.wi.weight.copy_(torch.eye(d))
        ff.wo.weight.zero_()
        for prev, nxt in itertools.pairwise(chain):
            ff.wo.weight[nxt, prev] = 10.0
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def t5_dir(tmp_path_factory):
    return tiny_t5_folder(tmp_path_factory.mktemp("factual") / "flan-t5-base-VG-factual-sg")


def test_factual_parser_loads_a_saved_folder(t5_dir):
    from capeval.metrics.hice.factual import FactualParser

    parser = FactualParser(str(t5_dir), beam_size=2, max_output_len=24)
    caps = ["a man ride a horse", "a dog on the grass", "the horse"]
    raw = parser.generate(caps)
    assert raw == ["( man, v:ride, horse )( dog)"] * 3  # decoded with clean_up_tokenization_spaces
    assert parser.phrases(caps) == [["man ride horse", "dog"]] * 3
    sig = parser.signature_fields()
    assert sig["parser"] == "factual-1" and sig["parser_model"] == str(t5_dir)
    assert len(sig["parser_sha256"]) == 16 and int(sig["parser_sha256"], 16) >= 0


# -- the scorer on the sample images --------------------------------------------------------

@pytest.fixture(scope="module")
def samples():
    if not (SAMPLES / "images").is_dir():
        unavailable(f"sample images not found at {SAMPLES} (set CAPEVAL_DATA or place ../shared/data)")
    return {k: json.loads((SAMPLES / f"{k}.json").read_text()) for k in ("good_captions", "bad_captions", "refs")}


@pytest.fixture(scope="module")
def bb():
    require_module("torch", "Alpha-CLIP runs on torch")
    require_module("PIL", "images are read with Pillow")
    from capeval.models.clip.alpha import random_alpha_backbone

    return random_alpha_backbone("tiny", seed=0, alpha_std=0.5)


@pytest.fixture(scope="module")
def parser():
    require_module("spacy", "the scorer tests' phrases come from capeval's SPICE parser (parser='spice', spice extra)")
    from capeval.metrics.hice.phrases import SpicePhrases

    p = SpicePhrases()
    try:
        p.phrases(["a dog"])
    except MissingDependencyError as exc:
        unavailable(str(exc))
    return p


def scorer(bb, parser, **options):
    from capeval.metrics.hice.scorer import HiceScore

    return HiceScore(backbone=bb, regions=options.pop("regions", "grid"), parser=parser, **options)


def oracle(bb, parser, image_path, caption, refs=None, w=2.5, rows=3, cols=3):
    """HICE-S / RefHICE-S recomputed one image at a time (encode_regions, not the scorer's
    cross-image batches), with the paper's loops; pooled reference phrases, max over references."""
    import torch

    from capeval.models.clip.preprocess import open_image
    from capeval.models.regions.grid import GridRegions

    pil = open_image(image_path)
    regions = GridRegions(rows=rows, cols=cols).masks(pil)
    px = bb.load_image(pil)
    alpha = torch.stack([bb.load_mask(r.mask, None, pil.size) for r in regions])

    def unit(x):
        x = x.double().numpy()
        return x / np.linalg.norm(x, axis=-1, keepdims=True)

    glob = unit(bb.encode_images(px[None])[0])
    reg = unit(bb.encode_regions(px, alpha))

    def text(t):
        return unit(bb.encode_texts(bb.tokenize([t])[0])[0])

    def phrases(t):
        return parser.phrases([t])[0] or [t]

    cand = text(caption)
    fc = [text(p) for p in phrases(caption)]
    g_itc = max(0.0, float(glob @ cand))
    l_itc = paper_local([[float(r @ f) for f in fc] for r in reg])[2]
    out = {"hice-s": w * (0 if g_itc * l_itc == 0 else 2 * g_itc * l_itc / (g_itc + l_itc))}
    if refs is not None:
        g_ttc = max(max(0.0, float(text(r) @ cand)) for r in refs)
        pooled = list(dict.fromkeys(p for r in refs for p in phrases(r)))
        l_ttc = paper_local([[float(text(p) @ f) for f in fc] for p in pooled])[2]
        parts = (g_itc, l_itc, g_ttc, l_ttc)
        out["ref-hice-s"] = w * (0 if 0 in parts else 4 / sum(1 / x for x in parts))
    return out


def test_pipeline_matches_an_independent_recomputation(bb, parser, samples):
    from PIL import Image

    # a third, smaller image in memory: masks of other sizes in the same batch must stay with their image
    images = {i: SAMPLES / "images" / f"{i}.jpg" for i in samples["good_captions"]}
    images["crop"] = Image.open(images["image2"]).crop((100, 50, 700, 450))
    cands = {**samples["good_captions"], "crop": "a cat walks on a wooden floor"}
    refs = {**samples["refs"], "crop": ["an orange cat on the floor"]}
    rep = scorer(bb, parser).score(cands, refs, images=images)
    assert list(rep) == ["hice-s", "ref-hice-s"]
    for i in cands:
        want = oracle(bb, parser, images[i], cands[i], refs[i])
        assert rep["hice-s"].items[i] == pytest.approx(want["hice-s"], abs=2e-5)
        assert rep["ref-hice-s"].items[i] == pytest.approx(want["ref-hice-s"], abs=2e-5)
        assert 0 < rep["hice-s"].items[i] <= 2.5
    assert rep["hice-s"].system == pytest.approx(np.mean(list(rep["hice-s"].items.values())))
    parts = rep["hice-s"].extras["parts"]["image1"]
    assert set(parts) == {"g_itc", "l_itc", "precision", "recall", "g_ttc", "l_ttc", "ttc_precision", "ttc_recall"}
    assert rep["hice-s"].extras["region_regions"] == 27  # 3 images x 3 x 3 grid cells


def test_shapes_determinism_batching_and_cache(bb, parser, samples, tmp_path):
    cands = samples["good_captions"]
    first = scorer(bb, parser, metrics=("hice-s",), batch_size=32).score(cands, images=SAMPLES / "images")
    again = scorer(bb, parser, metrics=("hice-s",), batch_size=1, cache=tmp_path).score(cands, images=SAMPLES / "images")
    assert dict(again["hice-s"].items) == pytest.approx(dict(first["hice-s"].items), abs=1e-6)
    expl = first["hice-s"].extras["explanations"]["image2"]
    assert len(expl["regions"]) == 9 and all(0 <= p["best_region"] < 9 for p in expl["phrases"])
    cached = scorer(bb, parser, metrics=("hice-s",), cache=tmp_path)
    hit = cached.score(cands, images=SAMPLES / "images")
    assert cached.embedder.stats["cache_hits"] == 2 and cached.embedder.stats["forward_passes"] == 0
    assert dict(hit["hice-s"].items) == pytest.approx(dict(first["hice-s"].items), abs=1e-6)
    other = scorer(bb, parser, metrics=("hice-s",), cache=tmp_path, region_options={"rows": 2, "cols": 2})
    other.score(cands, images=SAMPLES / "images")
    assert other.embedder.stats["cache_hits"] == 0  # other masks never reuse an entry


def test_image_chunks_and_the_evaluator_give_the_same_numbers(bb, parser, samples, monkeypatch):
    import capeval
    from capeval.metrics.hice import scorer as scorer_module

    cands, refs = samples["good_captions"], samples["refs"]
    whole = scorer(bb, parser).score(cands, refs, images=SAMPLES / "images")
    monkeypatch.setattr(scorer_module, "IMAGE_CHUNK", 1)  # one image per chunk: items meet their image anyway
    chunked = scorer(bb, parser).score(cands, refs, images=SAMPLES / "images")
    via = capeval.score(cands, refs, metrics="hice", images=SAMPLES / "images",
                        options={"hice": {"backbone": bb, "regions": "grid", "parser": parser}})
    for m in ("hice-s", "ref-hice-s"):
        assert dict(chunked[m].items) == pytest.approx(dict(whole[m].items), abs=1e-6)
        assert dict(via[m].items) == pytest.approx(dict(whole[m].items), abs=1e-6)


def test_a_caption_describing_nothing_changes_the_scores(bb, parser, samples):
    cands = samples["good_captions"]
    s = scorer(bb, parser, metrics=("hice-s",))
    base = s.score(cands, images=SAMPLES / "images")["hice-s"]
    empty = s.score({i: "a photograph." for i in cands}, images=SAMPLES / "images")["hice-s"]
    wrong = s.score(samples["bad_captions"], images=SAMPLES / "images")["hice-s"]
    for i in cands:
        assert empty.items[i] != pytest.approx(base.items[i], abs=1e-4)
        assert wrong.items[i] != pytest.approx(base.items[i], abs=1e-4)
    e = empty.extras["explanations"]["image1"]
    assert [p["text"] for p in e["phrases"]] == parser.phrases(["a photograph."])[0] and not e["phrase_fallback"]
    # no phrase at all (PTB tokenisation leaves no word): the caption itself is the one phrase
    none = s.score({"image1": "..."}, images=SAMPLES / "images")["hice-s"]
    e = none.extras["explanations"]["image1"]
    assert e["phrase_fallback"] and [p["text"] for p in e["phrases"]] == ["..."]
    assert none.extras["phrase_fallbacks"] == 1 and len(e["regions"]) == 9


def test_signature_records_every_choice(bb, parser, samples):
    rep = scorer(bb, parser, refs="mean", ref_phrases="max", w=1.0, prompt="A photo depicts ",
                 incorrect_below=0.2).score(samples["good_captions"], samples["refs"], images=SAMPLES / "images")
    sig = rep["ref-hice-s"].signature.to_dict()
    for key, value in {"metric": "ref-hice-s", "backbone": "random-alpha/tiny", "regions": "grid", "w": 1.0,
                       "refs": "mean", "ref_phrases": "max", "parser": "spacy-1", "phrase_objects": "unrelated",
                       "prompt": '"A photo depicts "', "alpha": "conv1_alpha", "nrefs": "3",
                       "max_regions": "all", "thresholds": "incorrect<0.2,unmentioned<0.5"}.items():
        assert sig[key] == value, key
    assert len(sig["regions_sha"]) == 16 and "sha256" in sig and "torch" in sig
    assert "refs" not in rep["hice-s"].signature.to_dict()


def _downloaded_factual(t5_dir, root):
    """``root`` laid out as ``capeval download factual --dir root`` leaves it (the tiny model)."""
    target = root / "factual" / "flan-t5-base-VG-factual-sg"
    shutil.copytree(t5_dir, target)
    return root


def test_default_is_the_papers_factual_parser(bb, samples, t5_dir, tmp_path, monkeypatch):
    """No parser option: the FACTUAL model from capeval's model folder; its phrases feed the
    scores (against the independent recomputation) and the signature says so, with w=2.5 and
    the crop mask geometry."""
    from capeval.metrics.hice.factual import FactualParser
    from capeval.metrics.hice.scorer import HiceScore

    monkeypatch.setenv("CAPEVAL_CHECKPOINTS", str(_downloaded_factual(t5_dir, tmp_path / "models")))
    s = HiceScore(backbone=bb, regions="grid")
    assert isinstance(s.parser, FactualParser)
    rep = s.score(samples["good_captions"], samples["refs"], images=SAMPLES / "images")
    sig = rep["hice-s"].signature
    text = str(sig)
    assert "parser:factual-1" in text and "parser_model:lizhuang144/flan-t5-base-VG-factual-sg" in text
    d = sig.to_dict()
    assert d["w"] == 2.5 and d["mask_geometry"] == "crop" and d["parser_generate"] == "beams=5,in=64,out=128"
    oracle_parser = FactualParser(str(t5_dir))
    for i, cap in samples["good_captions"].items():
        want = oracle(bb, oracle_parser, SAMPLES / "images" / f"{i}.jpg", cap, samples["refs"][i])
        assert rep["hice-s"].items[i] == pytest.approx(want["hice-s"], abs=2e-5)
        assert rep["ref-hice-s"].items[i] == pytest.approx(want["ref-hice-s"], abs=2e-5)
        phrases = [p["text"] for p in rep["hice-s"].extras["explanations"][i]["phrases"]]
        assert phrases == ["man ride horse", "dog"]  # what the tiny model writes, not the SPICE phrases
    spice_sig = str(HiceScore(backbone=bb, regions="grid", parser=_FixedPhrases()).signature("hice-s"))
    assert "parser:fixed" in spice_sig and "parser:factual" not in spice_sig


class _FixedPhrases:
    def phrases(self, captions):
        return [["x"] for _ in captions]

    def signature_fields(self):
        return {"parser": "fixed"}


def test_missing_factual_model_is_one_line_naming_download_and_spice(bb, tmp_path, monkeypatch):
    from capeval.metrics.hice.factual import missing_message
    from capeval.metrics.hice.scorer import HiceScore

    monkeypatch.setenv("CAPEVAL_CHECKPOINTS", str(tmp_path / "empty"))
    try:
        HiceScore(backbone=bb, regions="grid")
    except ResourceError as exc:
        msg = str(exc)
    else:  # this machine's Hugging Face cache holds the real model: the message is still checked below
        msg = missing_message("lizhuang144/flan-t5-base-VG-factual-sg")
    assert "\n" not in msg and "capeval download factual" in msg and "-O hice-s.parser=spice" in msg


def test_capeval_download_factual_writes_a_checked_folder(t5_dir, tmp_path, monkeypatch, capsys):
    from capeval.cli.main import main
    from capeval.models import download as dl
    from capeval.models.clip.checkpoints import read_state_dict, sha256_file

    files = sorted(p.name for p in t5_dir.iterdir()) + ["tf_model.h5", "pytorch_model.bin", "sub/x.json"]
    fetched: list[str] = []
    monkeypatch.setattr(dl, "_hub_files", lambda repo: files if repo == "lizhuang144/flan-t5-base-VG-factual-sg" else [])

    def fetch(repo, name, folder):
        fetched.append(name)
        shutil.copy(t5_dir / name, folder / name)

    monkeypatch.setattr(dl, "_hub_fetch", fetch)
    root = tmp_path / "models"
    assert main(["download", "factual", "--dir", str(root)]) == 0
    out = json.loads(capsys.readouterr().out)
    target = root / "factual" / "flan-t5-base-VG-factual-sg"
    assert out["path"] == str(target) and out["sha256"] == sha256_file(target / "model.safetensors")
    assert "model.safetensors" in fetched and "tf_model.h5" not in fetched and "pytorch_model.bin" not in fetched
    assert read_state_dict(target / "model.safetensors")  # the weights as fetched
    assert not [p for p in root.joinpath("factual").iterdir() if p.name.startswith(".")]  # no temporary left
    assert main(["download", "--list", "--json", "--dir", str(root)]) == 0
    entry = json.loads(capsys.readouterr().out)["entries"]["factual/flan-t5-base-VG-factual-sg"]
    assert entry["present"] and entry["sha256"] is None and entry["kind"] == "hf-model"
    # an HTML page instead of the weights: refused, nothing written
    monkeypatch.setattr(dl, "_hub_fetch", lambda repo, name, folder: (folder / name).write_bytes(
        b"<!DOCTYPE html><html>rate limited</html>" if name == "model.safetensors" else (t5_dir / name).read_bytes()))
    other = tmp_path / "other"
    assert main(["download", "factual", "--dir", str(other)]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "nothing was written" in err and "HTML" in err.upper()
    assert not (other / "factual" / "flan-t5-base-VG-factual-sg").exists()
    assert not [p for p in (other / "factual").iterdir()]


def test_cli_without_factual_weights_prints_one_line(samples, tmp_path):
    """`capeval score -m hice-s` as a user runs it, with no FACTUAL model anywhere (empty model
    folder and Hugging Face cache, offline): exit 2, one stderr line, no traceback."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    require_module("transformers", "the FACTUAL parser runs through transformers")
    cands = tmp_path / "c.json"
    cands.write_text(json.dumps(samples["good_captions"]))
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1] / "src"),
               CAPEVAL_CHECKPOINTS=str(tmp_path / "models"), HF_HOME=str(tmp_path / "hf"),
               HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    env.pop("HF_HUB_CACHE", None)
    env.pop("TRANSFORMERS_CACHE", None)
    proc = subprocess.run([sys.executable, "-m", "capeval.cli", "score", "-m", "hice-s", "-c", str(cands),
                           "--images", str(SAMPLES / "images"), "-q"], capture_output=True, text=True, env=env,
                          timeout=300, check=False)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == "" and "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0] == ("capeval: error: hice-s parser='factual': the FACTUAL model "
                        "lizhuang144/flan-t5-base-VG-factual-sg is not on this machine: run `capeval download "
                        "factual` once online, or score offline with the SPICE parser, -O hice-s.parser=spice "
                        "(parser='spice' in Python; not the published pipeline)")


def test_one_reference_makes_every_reference_mode_equal(bb, parser, samples):
    one = {i: r[:1] for i, r in samples["refs"].items()}
    runs = [scorer(bb, parser, metrics=("ref-hice-s",), refs=a, ref_phrases=b)
            .score(samples["good_captions"], one, images=SAMPLES / "images")["ref-hice-s"].items
            for a, b in (("max", "pool"), ("mean", "max"), ("max", "mean"))]
    assert runs[0] == pytest.approx(runs[1], abs=1e-9) and runs[0] == pytest.approx(runs[2], abs=1e-9)
    several = [scorer(bb, parser, metrics=("ref-hice-s",), refs=a).score(
        samples["good_captions"], samples["refs"], images=SAMPLES / "images")["ref-hice-s"].extras["parts"]["image1"]
        for a in ("max", "mean")]
    assert several[0]["g_ttc"] > several[1]["g_ttc"]  # three different references: max > mean


class _NoRegions:
    name = "none"

    def settings(self):
        return {"backend": "none"}

    def masks(self, image):
        return []


def test_no_region_falls_back_to_the_full_image(bb, parser, samples):
    rep = scorer(bb, parser, metrics=("hice-s",), regions=_NoRegions()).score(
        samples["good_captions"], images=SAMPLES / "images")["hice-s"]
    e = rep.extras["explanations"]["image1"]
    assert e["region_fallback"] and len(e["regions"]) == 1 and e["regions"][0]["bbox"] == [0, 0, *e["image_size"]]
    assert rep.extras["region_fallback_images"] == 2


def test_tiny_random_sam_backend(bb, parser, samples):
    torch = require_module("torch", "SAM runs on torch")
    tf = require_module("transformers", "the SAM backend uses transformers' SamModel")
    from capeval.models.regions import region_backend

    torch.manual_seed(0)
    cfg = tf.SamConfig(
        vision_config={"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "image_size": 128,
                       "patch_size": 16, "output_channels": 32, "window_size": 4, "global_attn_indexes": [1],
                       "num_pos_feats": 16, "mlp_dim": 64},
        prompt_encoder_config={"hidden_size": 32, "image_size": 128, "patch_size": 16, "mask_input_channels": 4},
        mask_decoder_config={"hidden_size": 32, "mlp_dim": 64, "num_attention_heads": 2, "iou_head_hidden_dim": 32},
    )
    proc = tf.SamImageProcessorPil(size={"longest_edge": 128}, pad_size={"height": 128, "width": 128})
    sam = region_backend("sam", model=tf.SamModel(cfg).eval(), processor=proc, checkpoint="tiny-random",
                         points_per_side=4, pred_iou_thresh=0.0, stability_score_thresh=0.0)
    s = scorer(bb, parser, metrics=("hice-s",), regions=sam, max_regions=5)
    rep = s.score(samples["good_captions"], images=SAMPLES / "images")["hice-s"]
    for i, e in rep.extras["explanations"].items():
        n = len(e["regions"])
        assert 1 <= n <= 5 and all(r["area"] > 0 for r in e["regions"])
        assert 0 <= rep.items[i] <= 2.5
    sig = rep.signature.to_dict()
    assert sig["regions"] == "sam" and sig["regions_checkpoint"] == "tiny-random" and sig["max_regions"] == 5


# -- explanations ------------------------------------------------------------------------------

def test_explanation_files_png_and_schema(bb, parser, samples, tmp_path):
    from PIL import Image

    from capeval.metrics.hice.explain import check_explanation

    cands = {"image1": samples["good_captions"]["image1"], "a/b c": samples["bad_captions"]["image2"]}
    images = {"image1": SAMPLES / "images" / "image1.jpg", "a/b c": SAMPLES / "images" / "image2.jpg"}
    s = scorer(bb, parser, regions="grid", region_options={"rows": 2, "cols": 2})
    rep = s.explain(cands, {k: samples["refs"]["image1"] for k in cands}, images=images, out_dir=tmp_path)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert len(names) == 4 and "image1.json" in names and "image1.png" in names
    odd = [n for n in names if n.startswith("a_b_c-")]
    assert len(odd) == 2  # the id's '/' and ' ' never reach the file system
    doc = json.loads((tmp_path / "image1.json").read_text())
    check_explanation(doc)
    # the schema, checked here field by field (not with the module's own checker)
    assert doc["schema"] == "capeval-hice-explanation/1" and doc["id"] == "image1"
    assert doc["scores"]["hice-s"] == pytest.approx(rep["hice-s"].items["image1"])
    assert doc["scores"]["ref-hice-s"] == pytest.approx(rep["ref-hice-s"].items["image1"])
    for p in doc["phrases"]:
        assert set(p) == {"index", "text", "precision", "best_region", "correct"}
        assert p["correct"] == (p["precision"] >= doc["thresholds"]["incorrect_below"])
    for r in doc["regions"]:
        assert set(r) == {"index", "bbox", "area", "quality", "recall", "best_phrase", "mentioned"}
        assert r["mentioned"] == (r["recall"] >= doc["thresholds"]["unmentioned_below"])
    assert doc["incorrect"] == [p["text"] for p in doc["phrases"] if not p["correct"]]
    bad = dict(doc, phrases=[dict(doc["phrases"][0], best_region=99)])
    with pytest.raises(ValueError, match="best_region"):
        check_explanation(bad)
    # the picture: 750x751 scaled to 768 is not enlarged; the side panel is 360 wide
    png = Image.open(tmp_path / "image1.png")
    original = Image.open(SAMPLES / "images" / "image1.jpg").convert("RGB")
    assert png.size[0] == original.size[0] + 360 and png.size[1] >= original.size[1]
    drawn = np.asarray(png.convert("RGB"))[: original.size[1], : original.size[0]].astype(int)
    plain = np.asarray(original).astype(int)
    r0 = doc["regions"][0]
    x0, y0, x1, y1 = r0["bbox"]
    inside = np.abs(drawn[y0 + 40: y1 - 10, x0 + 10: x1 - 10] - plain[y0 + 40: y1 - 10, x0 + 10: x1 - 10]).mean()
    assert inside > 20  # the region's recall colour is painted over it
    panel = np.asarray(png.convert("RGB"))[:, original.size[0]:]
    assert (panel < 250).any()  # the side panel has text


def test_cli_explain_writes_files_and_refuses_metrics_without_explanations(bb, parser, samples, tmp_path,
                                                                            monkeypatch, capsys):
    from capeval.cli.main import main
    from capeval.models.clip import backbone as bbmod

    monkeypatch.setattr(bbmod, "load_backbone", lambda name, device="cpu", **kw: bb)
    cands = tmp_path / "c.json"
    cands.write_text(json.dumps(samples["good_captions"]))
    out = tmp_path / "explain"
    code = main(["score", "-m", "hice-s", "-c", str(cands), "--images", str(SAMPLES / "images"), "-O",
                 "hice-s.regions=grid", "-O", "hice-s.parser=spice", "--explain", str(out), "-q"])
    text, err = capsys.readouterr()
    assert code == 0, err
    assert sorted(p.name for p in out.iterdir()) == ["image1.json", "image1.png", "image2.json", "image2.png"]
    assert json.loads(text)["signatures"]["hice-s"].startswith("metric:hice-s|")
    code = main(["score", "-m", "clip-s", "-c", str(cands), "--images", str(SAMPLES / "images"), "--explain",
                 str(out), "-q"])
    assert code == 2 and "none of the metrics clip-s writes explanations" in capsys.readouterr().err


# -- registry, bench, published values -----------------------------------------------------

def test_registry_entries_and_preset():
    from capeval import registry

    assert registry.expand("hice") == ["hice-s", "ref-hice-s"]
    spec = registry.get("hice-s")
    assert spec.needs == frozenset({"images"}) and spec.direction == "higher" and spec.range == (0.0, "w")
    assert registry.get("ref-hice-s").needs == frozenset({"images", "references"}) and spec.extra == "clip"
    assert registry.get("hice-s").group == registry.get("ref-hice-s").group


def test_published_values_beside_bench_records():
    from types import SimpleNamespace

    from capeval.bench.beside import beside, table
    from capeval.bench.published import PUBLISHED

    assert PUBLISHED[("flickr8k-expert", "hice-s", "kendall_tau_c")][0] == 56.4
    assert PUBLISHED[("foil", "ref-hice-s", "accuracy_1ref")][0] == 96.4
    assert PUBLISHED[("pascal-50s", "ref-hice-s", "accuracy_mean")][0] == 87.3
    recs = [SimpleNamespace(benchmark="flickr8k-expert", metric="hice-s", statistic="kendall_tau_c", value=50.0),
            SimpleNamespace(benchmark="flickr8k-expert", metric="clip-s", statistic="kendall_tau_c", value=51.0)]
    rows = beside(recs)  # both have a published value now (CLIP-S: 51.2, PAC-S++ Table 1)
    assert len(rows) == 2 and rows[0]["delta"] == pytest.approx(-6.4) and rows[1]["published"] == 51.2
    assert "56.4" in table(rows) and "Table 1" in table(rows)


def test_bench_needs_images_for_hice(capsys):
    from capeval.cli.main import main

    code = main(["bench", "flickr8k-expert", "--metrics", "hice-s", "-q"])
    assert code == 2 and "needs the images of benchmark flickr8k-expert" in capsys.readouterr().err


# -- bad input ----------------------------------------------------------------------------------

def test_bad_inputs_name_the_item(bb, parser, samples, tmp_path):
    s = scorer(bb, parser)
    cands = dict(samples["good_captions"])
    with pytest.raises(InputError, match="item 'image1': caption is empty"):
        s.score({**cands, "image1": "  "}, samples["refs"], images=SAMPLES / "images")
    with pytest.raises(InputError, match="item 'nope': no image nope"):
        s.score({"nope": "a dog"}, {"nope": ["a dog"]}, images=SAMPLES / "images")
    with pytest.raises(InputError, match="ref-hice-s needs references"):
        s.score(cands, images=SAMPLES / "images")
    folder = tmp_path / "imgs"
    shutil.copytree(SAMPLES / "images", folder)
    (folder / "image2.jpg").write_bytes(b"not a jpeg")
    with pytest.raises(InputError, match="item 'image2'"):
        s.score(cands, samples["refs"], images=folder)
    rep = s.score(cands, samples["refs"], images=folder, skip_bad_items=True)
    assert rep["hice-s"].skipped == ("image2",) and list(rep["hice-s"].items) == ["image1"]
    with pytest.raises(InputError, match="refs='min'"):
        scorer(bb, parser, refs="min")
    with pytest.raises(InputError, match="w=0"):
        scorer(bb, parser, w=0)
    with pytest.raises(ResourceError, match="regions='grid' needs no weights"):
        scorer(bb, parser, regions="sam", region_options={"checkpoint": str(tmp_path / "no-such-sam")})
    from capeval.models.clip.backbone import random_backbone

    with pytest.raises(InputError, match="needs an Alpha-CLIP backbone"):
        scorer(random_backbone("tiny"), parser)


def test_missing_spacy_names_the_extra(monkeypatch):
    import sys

    from capeval.metrics.hice.phrases import make_parser

    monkeypatch.setitem(sys.modules, "spacy", None)
    with pytest.raises(MissingDependencyError, match=r"spice.*parser='factual'|\.\[spice\]"):
        make_parser("spice")


@pytest.mark.slow
def test_real_weights_when_present(samples, tmp_path):
    """The published pipeline (Alpha-CLIP ViT-L/14 over OpenAI's weights, SAM ViT-B through
    transformers, FACTUAL phrases) on the sample images, when the user has the weights; not in
    CI (no network, no weights there)."""
    require_module("transformers", "HICE-S's default phrases come from the FACTUAL parser")
    from capeval.errors import CapevalError
    from capeval.metrics.hice.scorer import HiceScore

    try:
        s = HiceScore(cache=str(tmp_path))
        rep = s.score(samples["good_captions"], images=SAMPLES / "images")["hice-s"]
    except (CapevalError, OSError) as exc:
        pytest.skip(f"real HICE-S weights not available here: {str(exc).splitlines()[0]}")
    assert all(0.0 <= v <= 2.5 for v in rep.items.values())
    assert any(len(e["regions"]) > 1 for e in rep.extras["explanations"].values())


def test_bench_explains_the_worst_items_and_the_html_links_them(bb, parser, tmp_path):
    """`capeval bench --explain`: the worst-scored items of hice-s get explanation files, listed in
    the run and linked from the HTML report (Composite fixture, tiny images, grid regions)."""
    import sys
    from pathlib import Path

    from PIL import Image

    import capeval.bench as cb
    from capeval.bench.report import render_html

    sys.path.insert(0, str(Path(__file__).parent))
    from test_bench_fixtures import _write_composite

    _write_composite(tmp_path / "data")
    images = tmp_path / "images"
    images.mkdir()
    for k, name in enumerate(("111_aaa.jpg", "222_bbb.jpg", "333.jpg", "COCO_val2014_000000000042.jpg")):
        Image.new("RGB", (48 + 8 * k, 40), (40 * k, 200 - 40 * k, 90)).save(images / name)
    out = tmp_path / "explained"
    run = cb.run(["composite"], ["hice-s"], data_root=tmp_path / "data", images=images, bootstrap=0,
                 verify_media=False, options={"hice": {"backbone": bb, "regions": "grid", "parser": parser}},
                 explain=out, explain_worst=3)
    rows = run.benchmarks["composite"]["explanations"]["hice-s"]["all"]
    assert len(rows) == 3 and [r["score"] for r in rows] == sorted(r["score"] for r in rows)
    for r in rows:
        assert Path(r["png"]).is_file() and json.loads(Path(r["json"]).read_text())["id"] == r["id"]
    html = render_html(run, str(tmp_path))
    assert "worst-scored items" in html and "explained/composite/all/hice-s/" in html


def test_bench_explain_needs_a_metric_that_explains(capsys):
    from capeval.cli.main import main

    assert main(["bench", "flickr8k-expert", "--metrics", "bleu-1", "--explain", "x", "-q"]) == 2
    assert "none of the metrics bleu-1 explains its scores" in capsys.readouterr().err
