"""Video benchmarks of EMScore (Shi et al. 2022): VATEX-EVAL and ActivityNet-FOIL.

VATEX-EVAL release (``<data-root>/vatex-eval/``, as EMScore's ``VATEX-EVAL-demo.py`` reads it):
``candidates_list.pkl`` (N candidates), ``gts_list.pkl`` (N x 9 references),
``human_scores.pkl`` (3N scores: annotator-major, reshaped to (3, N)), ``video_ids.pkl`` (N ids).
The pickles hold numpy arrays; they are read with an unpickler that only allows numpy's
array reconstruction (no arbitrary code).

ActivityNet-FOIL release (``<data-root>/activitynet-foil/``, as ``ActivityNet-FOIL_demo.py``):
``final_right_video_sentences.json`` / ``final_foil_video_sentences.json``
(``{"results": {video: [{"sentence": ...}, ...]}}``), ``anet_entities_test_1.json``
(per video ``timestamps`` of the candidate segments and ``duration``) and
``anet_entities_test_2.json`` (per video reference ``sentences`` and ``timestamps``).
A segment's references are the reference sentences whose span is covered by more than 40 %
by the candidate segment (integer seconds, inclusive ranges), else all of the video's.

IDF corpus (EMScore's protocol): both scripts build the IDF table once from the dataset's
*training* captions, not from the split's references or candidates, and apply it to every
score they report (reference-free ``EMScore(X,V)`` included, whatever the number of
references): ``VATEX-EVAL-demo.py`` from ``vatex_train_en_annotations.json`` (``{video:
[caption, ...]}``, every caption), ``ActivityNet-FOIL_demo.py`` from ``train.json`` (ActivityNet
Captions, ``{video: {"sentences": [...]}}``, dropping sentences of more than 66 space-separated
words, which CLIP's tokenizer would reject). Both files ship in the same release folders. The
loaders read them and hand the corpus to every EMScore-family metric group as ``idf=[...]``
(:attr:`Loaded.metric_options`); a user's own ``idf`` option still wins and is recorded in the
metric signature like the default (``idf:corpus(n=...,sha=...)``).

Segment frames: each item carries its segment ``(start_s, end_s)``; video metrics sample
their ``n_frames`` from the frames whose timestamps fall in ``[start, end]`` of the item's
video file (see :mod:`capeval.io.video`, each file decoded once). The reference demo
instead slices cached per-frame features of the whole video by index,
``feats[int(start * T // duration) : int(end * T // duration)]`` with the annotation's
``duration``, and keeps every frame of the slice: ``options={"emscore": {"n_frames": None}}``
is the closer match (the same window up to one frame at each end for a constant-frame-rate
file as long as the annotation says).
"""

from __future__ import annotations

import io
import json
import pickle
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from capeval.bench import statistics as stats
from capeval.bench._common import accuracy_spec, count_spec
from capeval.bench.base import Benchmark, Loaded, ScoreItem, Setting, StatSpec, collapse, judgment, malformed, read_release_json
from capeval.errors import ResourceError

_ALLOWED = {
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "scalar"),
    ("builtins", "str"),
    ("builtins", "list"),
    ("builtins", "float"),
    ("builtins", "int"),
}


class _NumpyOnlyUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _ALLOWED:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name} (only numpy arrays are allowed)")
        return super().find_class(module, name)


def load_numpy_pickle(path: Path) -> Any:
    """Unpickle a file that may only contain numpy arrays / plain lists of str and numbers."""
    try:
        return _NumpyOnlyUnpickler(io.BytesIO(path.read_bytes()), encoding="latin1").load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, ImportError) as exc:
        raise malformed(path, "pickle", str(exc)) from None


# metric groups that take EMScore's ``idf`` option (capeval.metrics.emscore.scorer.EMScore and subclasses)
IDF_GROUPS = ("emscore", "pac-s-video")


def _idf_options(corpus: list[str]) -> dict[str, dict[str, Any]]:
    return {group: {"idf": corpus} for group in IDF_GROUPS}


def _corpus_error(bench: str, exc: ResourceError) -> ResourceError:
    return ResourceError(f"{exc} (EMScore's IDF corpus, part of the {bench} release; the protocol needs it)")


_VX = "vatex-eval/"
_VX_FILES = ("candidates_list.pkl", "gts_list.pkl", "human_scores.pkl", "video_ids.pkl")
_VX_IDF = _VX + "vatex_train_en_annotations.json"


class VatexEval(Benchmark):
    name = "vatex-eval"
    title = "VATEX-EVAL"
    modality = "video"
    citation = "Shi et al. 2022, EMScore: Evaluating Video Captioning via Coarse-Grained and Fine-Grained Embedding Matching (CVPR)"
    protocol = (
        "Candidates for VATEX val videos rated by 3 annotators. Metric scores are rounded to 4 decimals (as "
        "the reference code) and correlated with each annotator; Kendall tau-b and Spearman rho x100 averaged "
        "over the 3 annotators, with 0 (reference-free metrics only), 1 and 9 references (the first k of each "
        "list); bootstrap resamples candidates. EMScore-family metrics take their IDF from the VATEX training "
        "captions (vatex_train_en_annotations.json) in every setting."
    )
    protocol_id = "emscore-v2"
    files = {**{_VX + f: None for f in _VX_FILES}, _VX_IDF: None}
    human_label = "mean annotator score"

    def load(self, root: Path, seed: int = 0, **options: Any) -> Loaded:
        paths = {rel: self.path(root, rel) for rel in self.files if rel != _VX_IDF}
        try:
            paths[_VX_IDF] = self.path(root, _VX_IDF)
        except ResourceError as exc:
            raise _corpus_error(self.name, exc) from None
        cands = [str(c) for c in np.asarray(load_numpy_pickle(paths[_VX + "candidates_list.pkl"]), dtype=object).ravel()]
        gts = load_numpy_pickle(paths[_VX + "gts_list.pkl"])
        gts = [[str(r) for r in row] for row in (gts.tolist() if hasattr(gts, "tolist") else gts)]
        human = np.asarray(load_numpy_pickle(paths[_VX + "human_scores.pkl"]), dtype=float).ravel()
        vids = [str(v) for v in np.asarray(load_numpy_pickle(paths[_VX + "video_ids.pkl"]), dtype=object).ravel()]
        n = len(cands)
        if len(gts) != n or len(vids) != n:
            raise malformed(paths[_VX + "gts_list.pkl"], "lengths", f"{n} candidates, {len(gts)} reference lists, {len(vids)} video ids")
        if human.size != 3 * n:
            raise malformed(paths[_VX + "human_scores.pkl"], "length", f"expected 3 x {n} scores, got {human.size}")
        human = human.reshape(3, n).T
        off = ~((human >= 1) & (human <= 5))  # NaN included
        if off.any():  # EMScore (Shi et al. 2022, Sec. 5.1): each annotator rates a candidate 1 to 5
            i, a = (int(x) for x in np.argwhere(off)[0])
            judgment(human[i, a], paths[_VX + "human_scores.pkl"], f"candidate {i}, annotator {a + 1}", "a score", 1, 5)
        settings = {}
        for k in (0, 1, 9):
            items = {}
            for i in range(n):
                refs = tuple(collapse(r) for r in gts[i][:k])
                if k and len(refs) < 1:
                    raise malformed(paths[_VX + "gts_list.pkl"], f"row {i}", "empty reference list")
                items[str(i)] = ScoreItem(collapse(cands[i]), refs, video=vids[i])
            settings[f"refs{k}"] = Setting(f"refs{k}", items, with_references=k > 0, description=f"{k} references")
        info = {"candidates": n, "videos": len(set(vids)), "annotators": 3}
        corpus = self._train_corpus(paths[_VX_IDF])
        info["idf_corpus"] = len(corpus)
        files = self.checksum_files(root, paths, info)
        return Loaded(self, settings, human, files, info, root, options={"round": 4},
                      metric_options=_idf_options(corpus))

    @staticmethod
    def _train_corpus(path: Path) -> list[str]:
        """Every caption of ``{video: [caption, ...]}``, in file order (VATEX-EVAL-demo.py)."""
        data = _read_json(path)
        if not isinstance(data, dict):
            raise malformed(path, "top level", "expected {video: [caption, ...]}")
        out: list[str] = []
        for vid, caps in data.items():
            if not isinstance(caps, list) or not all(isinstance(c, str) for c in caps):
                raise malformed(path, f"video {vid!r}", "expected a list of caption strings")
            out.extend(caps)
        if not out:
            raise malformed(path, "top level", "no caption")
        return out

    def statistics(self, loaded: Loaded, scores: Mapping[str, np.ndarray]) -> list[StatSpec]:
        human = loaded.data
        out = []
        for name in ("refs0", "refs1", "refs9"):
            if name not in scores:
                continue
            metric = np.around(np.asarray(scores[name], float), 4)
            ranks = [stats.KendallRanks(metric, human[:, a]) for a in range(3)]

            def tau(units: np.ndarray | None, ranks=ranks) -> float:
                return 100.0 * float(np.mean([r(units)[0] for r in ranks]))

            def rho(units: np.ndarray | None, metric=metric) -> float:
                m = metric if units is None else metric[units]
                h = human if units is None else human[units]
                return 100.0 * float(np.mean([stats.spearman(m, h[:, a]) for a in range(3)]))

            n = metric.size
            out.append(StatSpec(f"kendall_tau_b_{name}", tau, n, n, name, headline=True))
            out.append(StatSpec(f"spearman_{name}", rho, n, n, name))
        return out

    def plot_data(self, loaded: Loaded, scores: Mapping[str, np.ndarray]):
        name = next((s for s in ("refs9", "refs1", "refs0") if s in scores), None)
        return (loaded.data.mean(axis=1), np.asarray(scores[name], float)) if name else None


_AN = "activitynet-foil/"
_AN_IDF = _AN + "train.json"
_AN_MAX_WORDS = 66  # ActivityNet-FOIL_demo.py drops longer training sentences from the IDF corpus


def _read_json(path: Path) -> Any:
    try:
        return read_release_json(path)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise malformed(path, "JSON", str(exc)) from None


def _overlapping_refs(ts: tuple[float, float], ref_ts: list[Any]) -> list[int]:
    """Indices of references whose integer span is covered > 40 % by ``ts`` (reference rule)."""
    a, b = int(ts[0]), int(ts[1])
    use = []
    for i, (c, d) in enumerate(ref_ts):
        c, d = int(c), int(d)
        span = d - c + 1
        if span <= 0:
            continue
        inter = max(0, min(b, d) - max(a, c) + 1)
        if inter / span > 0.4:
            use.append(i)
    return use


class ActivityNetFoil(Benchmark):
    name = "activitynet-foil"
    title = "ActivityNet-FOIL"
    modality = "video"
    citation = VatexEval.citation
    protocol = (
        "Correct and foil paragraphs for ActivityNet Captions test videos. Each sentence is scored on its "
        "segment (timestamps of anet_entities_test_1.json); references = sentences of anet_entities_test_2.json "
        "whose span the segment covers by > 40 %, else all. Video metrics sample frames with timestamps in "
        "[start, end] of the segment (the reference code keeps every frame of the segment: n_frames=None). "
        "Paragraph score = mean over its segments; accuracy "
        "x100 = share of videos whose correct paragraph scores strictly higher than the foil. Settings with "
        "references and without (reference-free metrics). EMScore-family metrics take their IDF from the "
        "ActivityNet Captions training sentences of at most 66 words (train.json) in both settings."
    )
    protocol_id = "emscore-v2"
    files = {
        _AN + "final_right_video_sentences.json": None,
        _AN + "final_foil_video_sentences.json": None,
        _AN + "anet_entities_test_1.json": None,
        _AN + "anet_entities_test_2.json": None,
        _AN_IDF: None,
    }
    human_label = "correct (1) vs foil (0)"

    def _json(self, path: Path) -> Any:
        return _read_json(path)

    def load(self, root: Path, seed: int = 0, **options: Any) -> Loaded:
        paths = {rel: self.path(root, rel) for rel in self.files if rel != _AN_IDF}
        try:
            paths[_AN_IDF] = self.path(root, _AN_IDF)
        except ResourceError as exc:
            raise _corpus_error(self.name, exc) from None
        right = self._json(paths[_AN + "final_right_video_sentences.json"])
        foil = self._json(paths[_AN + "final_foil_video_sentences.json"])
        t1 = self._json(paths[_AN + "anet_entities_test_1.json"])
        t2 = self._json(paths[_AN + "anet_entities_test_2.json"])
        for p, obj in ((_AN + "final_right_video_sentences.json", right), (_AN + "final_foil_video_sentences.json", foil)):
            if not isinstance(obj, dict) or not isinstance(obj.get("results"), dict):
                raise malformed(paths[p], "top level", "expected {\"results\": {video: [{\"sentence\": ...}]}}")
        vids = [v for v in right["results"] if v in foil["results"] and v in t1 and v in t2]
        if not vids:
            raise ResourceError("activitynet-foil: no video is present in both prediction files and both anet_entities files")
        settings = {name: Setting(name, {}, with_references=name == "refs") for name in ("refs", "norefs")}
        layout = []
        for v in vids:
            ts_list = t1[v].get("timestamps", [])
            ref_s, ref_ts = t2[v].get("sentences", []), t2[v].get("timestamps", [])
            for kind, preds in (("right", right["results"][v]), ("foil", foil["results"][v])):
                layout.append((v, kind, len(preds)))
                for i, seg in enumerate(preds):
                    if i >= len(ts_list):
                        raise malformed(paths[_AN + "anet_entities_test_1.json"], v, f"no timestamp for segment {i}")
                    ts = (float(ts_list[i][0]), float(ts_list[i][1]))
                    use = _overlapping_refs(ts, ref_ts) or list(range(len(ref_s)))
                    refs = tuple(collapse(ref_s[j]) for j in use)
                    cand = collapse(str(seg["sentence"]))
                    key = f"{v}/{kind}/{i}"
                    settings["refs"].items[key] = ScoreItem(cand, refs, video=v, segment=ts)
                    settings["norefs"].items[key] = ScoreItem(cand, (), video=v, segment=ts)
        corpus = self._train_corpus(paths[_AN_IDF])
        info = {"videos": len(vids), "segments": len(settings["refs"].items), "idf_corpus": len(corpus)}
        files = self.checksum_files(root, paths, info)
        return Loaded(self, settings, layout, files, info, root, metric_options=_idf_options(corpus))

    @staticmethod
    def _train_corpus(path: Path) -> list[str]:
        """``sentences`` of every video of ``train.json``, those of more than 66 words (split on
        single spaces, as the reference script) left out."""
        data = _read_json(path)
        if not isinstance(data, dict):
            raise malformed(path, "top level", 'expected {video: {"sentences": [...]}}')
        out: list[str] = []
        for vid, entry in data.items():
            sents = entry.get("sentences") if isinstance(entry, dict) else None
            if not isinstance(sents, list) or not all(isinstance(x, str) for x in sents):
                raise malformed(path, f"video {vid!r}", 'expected "sentences": [sentence, ...]')
            out.extend(x for x in sents if len(x.split(" ")) <= _AN_MAX_WORDS)
        if not out:
            raise malformed(path, "top level", "no sentence")
        return out

    def statistics(self, loaded: Loaded, scores: Mapping[str, np.ndarray]) -> list[StatSpec]:
        out = []
        for name in ("refs", "norefs"):
            if name not in scores:
                continue
            sc = np.asarray(scores[name], float)
            para, pos = [], 0
            for _v, _kind, n in loaded.data:
                para.append(float(sc[pos : pos + n].mean()) if n else float("nan"))
                pos += n
            p = np.array(para).reshape(-1, 2)  # (right, foil) per video
            correct = (p[:, 0] > p[:, 1]).astype(float)
            out.append(accuracy_spec(f"accuracy_{name}", correct, name, headline=True))
            out.append(count_spec(f"ties_{name}", float((p[:, 0] == p[:, 1]).sum()), len(p), name))
        return out
