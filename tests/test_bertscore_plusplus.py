"""BERT-S++ (``bertscore++``) against the official code's computation on a tiny random BERT.

Two references, both on the same tiny BERT saved in float64 (so that the 0.4 threshold
compares float64 cosines, which batching or summation order move by ~1e-15 only):

- :func:`_transcribed`: run_metric.py (ck0123/improved-bertscore-for-image-captioning-evaluation
  @ b837055) transcribed line by line here, with its loops, its per-caption embeddings and its
  float32 idf padding; it shares no code with capeval. Always runs.
- the official script itself, when ``CAPEVAL_BERTSPP_SRC`` names a checkout of that repository
  (not installable, never vendored): its pytorch-pretrained-bert 0.6.2 model and tokenizer are
  stubbed by transformers' BertModel/BertTokenizer on the same folder, its ``Pool(4)`` by a
  serial map. Skipped with the reason otherwise.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import types
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

from bertscore_models import tiny_bert  # noqa: E402

from capeval.errors import CapevalError, InputError  # noqa: E402
from capeval.metrics.bertscore.plusplus_scorer import BertScorePlusPlus  # noqa: E402

TOL = 1e-9  # float64 all through; only summation orders and padded batches differ
STOP = ["a", "an", "the", "on", "in", "of", "with", "is", "and", ".", ",", "##s", "A", "The"]
WORDS = ["dog", "dogs", "runs", "cat", "sits", "red", "sofa", "man", "rides", "bike", "street", "children", "play",
         "playing", "ball", "park", "people", "walk", "walked", "beach", "sunset", "woman", "blue", "dress", "zebra",
         "grass", "a", "the", "on", "in", "with", "is", "and", ".", ","]


def _random_items(seed: int, n: int) -> list[dict]:
    rng = np.random.default_rng(seed)

    def sentence(lo: int, hi: int) -> str:
        return " ".join(rng.choice(WORDS, rng.integers(lo, hi + 1)))

    items = []
    for _ in range(n):
        refs = [sentence(1, 9) for _ in range(rng.integers(1, 6))]
        if len(refs) > 2 and rng.random() < 0.3:
            refs[2] = refs[0]  # duplicates among the references
        cand = refs[rng.integers(len(refs))] if rng.random() < 0.2 else sentence(1, 8)
        items.append({"refs": refs, "cand": cand})
    return items


EDGE = [
    {"refs": ["a dog runs on the grass", "two dogs play", "a dog"], "cand": "dog"},  # single-token candidate
    {"refs": ["a dog runs", "a dog runs", "the cat sits"], "cand": "a cat runs"},  # duplicate references
    {"refs": ["the cat sits on a red sofa", "a cat"], "cand": "a the on ."},  # only stop words
    {"refs": ["the a", "a dog runs"], "cand": "a dog runs"},  # a stop-word reference; cand = a reference
    {"refs": ["people walk along the beach at sunset"], "cand": "people walk along the beach at sunset"},
    {"refs": ["dog", "cat", "zebra"], "cand": "cat"},  # single-token references
    {"refs": ["a man rides a bike , down the street .", "a woman in a blue dress smiles"], "cand": "a man, smiling."},
]


@pytest.fixture(scope="module")
def model64(tmp_path_factory):
    return tiny_bert(tmp_path_factory.mktemp("bert64"), dtype="float64", layers=10)


@pytest.fixture(scope="module")
def stop_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("stop") / "stop_word_list.txt"
    path.write_text("\n".join(STOP) + "\n", encoding="utf-8")
    return path


def _ours(folder, items, stop_file, **opts):
    s = BertScorePlusPlus(model=str(folder), stop_words=str(stop_file), **opts)
    r = s.score([it["cand"] for it in items], {str(i): it["refs"] for i, it in enumerate(items)})["bertscore++"]
    return np.array([r.items[str(i)] for i in range(len(items))]), r


def _transcribed(folder, items, stop, num_layers=8, threshold=0.4, idf=True):
    """run_metric.py l. 11-218 in float64, literally (its loops and its index arithmetic)."""
    thr = threshold
    from transformers import BertModel, BertTokenizer

    tokenizer = BertTokenizer.from_pretrained(str(folder))
    model = BertModel.from_pretrained(str(folder)).double().eval()
    model.encoder.layer = torch.nn.ModuleList([layer for layer in model.encoder.layer[:num_layers]])

    def hidden(cap):  # get_bert_embedding([cap], batch_size=1), then the div_ of matrix_*
        ids = tokenizer.convert_tokens_to_ids(["[CLS]"] + tokenizer.tokenize(cap) + ["[SEP]"])
        with torch.no_grad():
            h = model(torch.tensor([ids]), token_type_ids=torch.zeros(1, len(ids), dtype=torch.long),
                      attention_mask=torch.ones(1, len(ids), dtype=torch.long)).last_hidden_state
        return h / torch.norm(h, dim=-1).unsqueeze(-1)

    caps = [c for it in items for c in [*it["refs"], it["cand"]]]
    count = Counter()
    for c in caps:
        count.update(set(tokenizer.convert_tokens_to_ids(["[CLS]"] + tokenizer.tokenize(c) + ["[SEP]"])))

    def idf_of(token):  # idf_dict[id], padded as torch.float, .item()
        if not idf:
            return 1.0
        c = count.get(tokenizer.convert_tokens_to_ids([token])[0], 0)
        return float(np.float32(math.log((len(caps) + 1) / (c + 1))))

    def search_mismatch(ref_hid, cand_hid):
        sim = torch.bmm(cand_hid, ref_hid.transpose(1, 2))[:, 1:-1, 1:-1]
        masks = []
        for r in range(sim.shape[2]):
            tmp = 0.
            for g in range(sim.shape[1]):
                tmp = max(float(sim[0, g, r]), tmp)
            masks.append(1 if tmp > thr else 0)
        return masks

    def compute_rm_stop_word(ref_hid, cand_hid, tokens_r, tokens_c):
        sim = torch.bmm(cand_hid, ref_hid.transpose(1, 2))[:, 1:-1, 1:-1]
        total, n = 0., 0.
        for r in range(sim.shape[2]):
            if tokens_r[r] in stop:
                continue
            tmp = 0.
            for g in range(sim.shape[1]):
                if tokens_c[g] not in stop:
                    tmp = max(float(sim[0, g, r]), tmp)
            if tmp > thr:
                total += tmp
                n += 1.
        return total / n if total != 0.0 else 0.0

    def compute_full(ref_hid, cand_hid, idfs_ref):
        sim = torch.bmm(cand_hid, ref_hid.transpose(1, 2))[:, 1:-1, 1:-1]
        score, weight = 0.0, 0.0
        for r in range(sim.shape[2]):
            tmp = 0.
            for g in range(sim.shape[1]):
                if float(sim[0, g, r]) > tmp:
                    tmp = float(sim[0, g, r])
            if tmp > thr:
                score += tmp * idfs_ref[r + 1]
                weight += idfs_ref[r + 1]
        return score / weight if weight != 0. else 0.0

    out = []
    for it in items:
        refs_hid = [hidden(r) for r in it["refs"]]
        cand_hid = hidden(it["cand"])
        k_refs = len(it["refs"])
        mismatch = [{nxt: search_mismatch(refs_hid[nxt], refs_hid[cur]) for nxt in range(k_refs) if nxt != cur}
                    for cur in range(k_refs)]
        tokens_cand = tokenizer.tokenize(it["cand"])
        total = 0.
        for nxt in range(k_refs):
            hidden_ref = refs_hid[nxt]
            tokens_ref = tokenizer.tokenize(it["refs"][nxt])
            for left in range(k_refs):
                if left == nxt:
                    continue
                tokens_left = tokenizer.tokenize(it["refs"][left])
                marks_base = mismatch[nxt][left]
                for k in range(len(marks_base)):
                    if marks_base[k] == 0:
                        duplicate = any(mismatch[c][left][k] == 1 for c in range(k_refs) if c < left and c != nxt)
                        if not duplicate:
                            hidden_ref = torch.cat([hidden_ref, refs_hid[left][0][k].reshape(1, 1, -1)], 1)
                            tokens_ref.append(tokens_left[k])
            idfs_ref = [idf_of(t) for t in ["[CLS]", *tokens_ref, "[SEP]"]]
            score = compute_full(hidden_ref, cand_hid, idfs_ref)
            score_rm = compute_rm_stop_word(hidden_ref, cand_hid, tokens_ref, tokens_cand)
            total += score_rm * score
        out.append(total / k_refs)
    return np.array(out)


@pytest.mark.parametrize("seed", [0, 1])
def test_parity_with_transcription_random_and_edge_items(model64, stop_file, seed):
    items = _random_items(seed, 16) + EDGE
    ours, res = _ours(model64, items, stop_file, batch_size=5)
    theirs = _transcribed(model64, items, set(STOP))
    assert np.abs(ours - theirs).max() <= TOL, np.abs(ours - theirs).max()
    assert res.system == pytest.approx(float(np.mean(ours)))
    assert 0 < np.count_nonzero(ours) < len(ours)  # the stop-word-only candidate scores 0
    assert ours[len(items) - len(EDGE) + 2] == 0.0


@pytest.mark.parametrize("opts", [dict(num_layers=3, threshold=0.6), dict(num_layers=0, threshold=0.0),
                                  dict(idf=False, threshold=0.2)])
def test_parity_with_transcription_options(model64, stop_file, opts):
    items = _random_items(7, 10) + EDGE
    ours, res = _ours(model64, items, stop_file, **opts)
    theirs = _transcribed(model64, items, set(STOP), **opts)
    assert np.abs(ours - theirs).max() <= TOL
    assert f"layer:{opts.get('num_layers', 8)}" in str(res.signature)


def test_idf_zero_everywhere_scores_zero(model64, stop_file):
    # every caption identical: every word piece is in all N documents, idf = log(1) = 0
    items = [{"refs": ["a dog runs", "a dog runs"], "cand": "a dog runs"}] * 3
    ours, _ = _ours(model64, items, stop_file)
    assert np.array_equal(ours, _transcribed(model64, items, set(STOP))) and not ours.any()


def test_signature_and_extras(model64, stop_file):
    from capeval.hashing import file_digest

    _, res = _ours(model64, EDGE, stop_file)
    sig = str(res.signature)
    assert sig.startswith("metric:bertscore++|") and "layer:8" in sig and "idf:captions" in sig
    assert f"stopwords:{file_digest(stop_file)[:12]}" in sig and "threshold:0.4" in sig and "transformers:" in sig
    assert set(res.extras["idf_recall"]) == set(res.items)


def _stub_ppb(folder: Path, dtype: torch.dtype) -> types.ModuleType:
    """pytorch_pretrained_bert 0.6.2's BertTokenizer/BertModel API over transformers' classes."""
    from transformers import BertModel, BertTokenizer

    mod = types.ModuleType("pytorch_pretrained_bert")

    class Tokenizer:
        @classmethod
        def from_pretrained(cls, name):
            self = cls()
            self.tok = BertTokenizer.from_pretrained(str(folder))
            return self

        def tokenize(self, text):
            return self.tok.tokenize(text)

        def convert_tokens_to_ids(self, tokens):
            return self.tok.convert_tokens_to_ids(tokens)

    class Model(torch.nn.Module):
        @classmethod
        def from_pretrained(cls, name):
            self = cls()
            self.bert = BertModel.from_pretrained(str(folder)).to(dtype)
            self.encoder = self.bert.encoder
            return self

        def forward(self, x, x_seg, attention_mask=None, output_all_encoded_layers=True):
            assert not output_all_encoded_layers
            return self.bert(x, token_type_ids=x_seg, attention_mask=attention_mask).last_hidden_state, None

    mod.BertTokenizer, mod.BertModel, mod.BertForMaskedLM = Tokenizer, Model, Model
    return mod


def _official(src: Path, folder: Path, items, stop, tmp: Path, monkeypatch, dtype=torch.float64):
    import runpy

    (tmp / "example").mkdir()
    samples = {str(i): {"refs": it["refs"], "cand": [it["cand"]]} for i, it in enumerate(items)}
    (tmp / "example" / "flickr.json").write_text(json.dumps(samples))
    (tmp / "stop_word_list.txt").write_text("\n".join(stop) + "\n")
    for name in [m for m in sys.modules if m == "bert_score" or m.startswith("bert_score.")]:
        monkeypatch.delitem(sys.modules, name)  # the installed bert-score 0.3.13 is another package
    monkeypatch.setitem(sys.modules, "pytorch_pretrained_bert", _stub_ppb(folder, dtype))
    monkeypatch.syspath_prepend(str(src))
    monkeypatch.chdir(tmp)
    import bert_score.utils as utils

    class SerialPool:  # get_idf_dict's Pool(4).map, in this process
        def __init__(self, n):
            pass

        def map(self, f, xs):
            return list(map(f, xs))

    monkeypatch.setattr(utils, "Pool", SerialPool)
    out = runpy.run_path(str(src / "run_metric.py"))["samples"]
    return np.array([out[str(i)]["metric_result"] for i in range(len(items))])


def _official_src() -> Path:
    src = os.environ.get("CAPEVAL_BERTSPP_SRC")
    if not src or not (Path(src) / "run_metric.py").is_file():
        pytest.skip("official BERT-S++ code not given: set CAPEVAL_BERTSPP_SRC to a checkout of "
                    "ck0123/improved-bertscore-for-image-captioning-evaluation")
    return Path(src)


def test_parity_with_official_code(model64, stop_file, tmp_path, monkeypatch):
    src = _official_src()
    items = _random_items(3, 16) + EDGE
    theirs = _official(src, model64, items, STOP, tmp_path, monkeypatch)
    ours, _ = _ours(model64, items, stop_file, batch_size=4)
    assert np.abs(ours - theirs).max() <= TOL, np.abs(ours - theirs).max()
    assert np.abs(_transcribed(model64, items, set(STOP)) - theirs).max() <= TOL


def test_official_stop_word_list_is_the_checkpoint_entry():
    from capeval.hashing import file_digest
    from capeval.models.clip.checkpoints import get_checkpoint

    path = _official_src() / "stop_word_list.txt"
    assert file_digest(path) == get_checkpoint("bertscore++/stop-words").sha256


@pytest.mark.parametrize("opts, message", [
    ({"num_layers": 11}, "num_layers: expected 0..10"),
    ({"num_layers": -1}, "num_layers=-1 out of range"),
    ({"threshold": 1.5}, "threshold=1.5 out of range: threshold must be"),
    ({"batch_size": 0}, "batch_size=0 out of range"),
    ({"idf": "yes"}, "option idf: expected true or false"),
    ({"stop_words": "/nonexistent.txt"}, "option stop_words: no file"),
])
def test_option_errors(model64, stop_file, opts, message):
    kwargs = {"stop_words": str(stop_file), **opts}
    with pytest.raises(CapevalError, match=re.escape(message)) as exc:
        BertScorePlusPlus(model=str(model64), **kwargs)
    assert "\n" not in str(exc.value)


def test_missing_model_and_stop_words_are_one_line(tmp_path, monkeypatch, stop_file):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("CAPEVAL_CHECKPOINTS", str(tmp_path))
    with pytest.raises(CapevalError, match=re.escape("run `capeval download bertscore++`")) as exc:
        BertScorePlusPlus(model="no-such-org/no-such-model", stop_words=str(stop_file))
    assert "\n" not in str(exc.value)
    with pytest.raises(CapevalError, match=re.escape("stop-word list is not on this machine: run `capeval download "
                                                     "bertscore++`")) as exc:
        BertScorePlusPlus()
    assert "\n" not in str(exc.value)


def test_declared_ranges_checked_before_building():
    from capeval.options import check_options

    for opt, value in (("threshold", -0.1), ("threshold", 2), ("num_layers", -1), ("batch_size", 0)):
        with pytest.raises(InputError, match=rf"option bertscore\+\+\.{opt}={value} out of range"):
            check_options("bertscore++", {"bertscore++": {opt: value}})


def test_long_caption_is_one_line_error(model64, stop_file):
    with pytest.raises(InputError, match="candidate '1' has 52 word pieces") as exc:
        BertScorePlusPlus(model=str(model64), stop_words=str(stop_file)).score(
            ["a dog", " ".join(["dog"] * 50)], {"0": ["a dog"], "1": ["a cat"]})
    assert "\n" not in str(exc.value)


def test_bench_flickr8k_expert_end_to_end(model64, stop_file, shared_data, tmp_path):
    import subprocess

    out = tmp_path / "r.json"
    run = subprocess.run([sys.executable, "-m", "capeval.cli", "bench", "flickr8k-expert", "-m", "bertscore++",
                          "-O", f"bertscore++.model={model64}", "-O", f"bertscore++.stop_words={stop_file}",
                          "-O", "bertscore++.num_layers=2", "--data-root", str(shared_data), "--bootstrap", "0",
                          "--out", str(out), "--quiet"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    rows = {(r["metric"], r["statistic"]): r for r in json.loads(out.read_text())["results"]}
    row = rows[("bertscore++", "kendall_tau_c")]
    assert row["n"] == 16992 and -100 <= row["value"] <= 100
    assert "46.7" in run.stdout  # PAC-S++ Table 1's published BERT-S++ cell beside the row


def test_reproduce_and_download_name_the_two_entries(tmp_path, monkeypatch, capsys):
    from capeval.bench.reproduce import missing_weights
    from capeval.cli.main import main
    from capeval.models import download as dl

    assert missing_weights("bertscore++", tmp_path) == "bertscore++/bert-base-uncased"
    fetched = []
    monkeypatch.setattr(dl, "download", lambda name, d, force: (fetched.append(name), (tmp_path / name, "0" * 64))[1])
    assert main(["download", "bertscore++", "--dir", str(tmp_path)]) == 0
    assert fetched == ["bertscore++/bert-base-uncased", "bertscore++/stop-words"]


def test_cli_score_with_device_flag(model64, stop_file, tmp_path):
    import subprocess

    (tmp_path / "c.json").write_text(json.dumps({"a": "a dog runs", "b": "the cat sits"}))
    (tmp_path / "r.json").write_text(json.dumps({"a": ["a dog runs on the grass", "two dogs"], "b": ["a cat"]}))
    base = [sys.executable, "-m", "capeval.cli", "score", "-m", "bertscore++", "-c", str(tmp_path / "c.json"),
            "-r", str(tmp_path / "r.json"), "-O", f"bertscore++.model={model64}", "-O",
            f"bertscore++.stop_words={stop_file}", "--quiet", "--device", "cpu"]
    out = subprocess.run(base, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    items = [{"refs": ["a dog runs on the grass", "two dogs"], "cand": "a dog runs"}, {"refs": ["a cat"], "cand": "the cat sits"}]
    expected = float(np.mean(_transcribed(model64, items, set(STOP))))
    assert json.loads(out.stdout)["scores"]["bertscore++"] == pytest.approx(expected, abs=TOL)
