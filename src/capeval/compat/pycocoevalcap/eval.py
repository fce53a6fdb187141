"""``pycocoevalcap.eval.COCOEvalCap`` (1.2) on capeval's scorers: the COCO caption evaluation flow.

``COCOEvalCap(coco, cocoRes)`` takes pycocotools ``COCO`` objects (or anything with
``getImgIds()`` and an ``imgToAnns`` mapping ``image id -> [{"caption": ...}]``);
``params['image_id']`` starts as ``coco.getImgIds()``. ``evaluate()`` tokenises the
references and the results (two tokenizer calls, as the original), runs BLEU-1..4, METEOR,
ROUGE-L, CIDEr and SPICE, prints the original's lines (``tokenization...``, ``setting up
scorers...``, ``computing <method> score...``, BLEU's statistics, ``<metric>: %0.3f``) and
fills ``eval`` (``{"Bleu_1": ..., "METEOR": ..., "ROUGE_L": ..., "CIDEr": ..., "SPICE":
...}``), ``imgToEval`` (``{image_id: {"image_id": ..., metric: item score}}``) and
``evalImgs`` (its values, a list). As in the original, every metric's per-item scores are
paired with the image ids in tokenised-``gts`` order, although SPICE returns them in
sorted id order: with image ids that are not in ascending order, ``imgToEval``'s SPICE
entries belong to other images (pycocoevalcap 1.2's behaviour, kept for parity).
Reference: pycocoevalcap/eval.py.
"""

from __future__ import annotations

from typing import Any

from capeval.compat.pycocoevalcap.bleu.bleu import Bleu
from capeval.compat.pycocoevalcap.cider.cider import Cider
from capeval.compat.pycocoevalcap.meteor.meteor import Meteor
from capeval.compat.pycocoevalcap.rouge.rouge import Rouge
from capeval.compat.pycocoevalcap.spice.spice import Spice
from capeval.compat.pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer


class COCOEvalCap:
    """The COCO caption evaluation of ``cocoRes`` against ``coco`` (see the module docs)."""

    def __init__(self, coco: Any, cocoRes: Any):
        self.evalImgs: list[dict[str, Any]] = []
        self.eval: dict[str, Any] = {}
        self.imgToEval: dict[Any, dict[str, Any]] = {}
        self.coco = coco
        self.cocoRes = cocoRes
        self.params = {"image_id": coco.getImgIds()}

    def evaluate(self) -> None:
        """Score every image of ``params['image_id']``; fills ``eval``, ``imgToEval``, ``evalImgs``."""
        imgIds = self.params["image_id"]
        gts = {}
        res = {}
        for imgId in imgIds:
            gts[imgId] = self.coco.imgToAnns[imgId]
            res[imgId] = self.cocoRes.imgToAnns[imgId]

        print("tokenization...")
        tokenizer = PTBTokenizer()
        gts = tokenizer.tokenize(gts)
        res = tokenizer.tokenize(res)

        print("setting up scorers...")
        scorers = [
            (Bleu(4), ["Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4"]),
            (Meteor(), "METEOR"),
            (Rouge(), "ROUGE_L"),
            (Cider(), "CIDEr"),
            (Spice(), "SPICE"),
        ]
        for scorer, method in scorers:
            print(f"computing {scorer.method()} score...")
            score, scores = scorer.compute_score(gts, res)
            if isinstance(method, list):
                for sc, scs, m in zip(score, scores, method):
                    self.setEval(sc, m)
                    self.setImgToEvalImgs(scs, gts.keys(), m)
                    print(f"{m}: {sc:0.3f}")
            else:
                self.setEval(score, method)
                self.setImgToEvalImgs(scores, gts.keys(), method)
                print(f"{method}: {score:0.3f}")
        self.setEvalImgs()

    def setEval(self, score: Any, method: str) -> None:
        self.eval[method] = score

    def setImgToEvalImgs(self, scores: Any, imgIds: Any, method: str) -> None:
        for imgId, score in zip(imgIds, scores):
            if imgId not in self.imgToEval:
                self.imgToEval[imgId] = {}
                self.imgToEval[imgId]["image_id"] = imgId
            self.imgToEval[imgId][method] = score

    def setEvalImgs(self) -> None:
        self.evalImgs = [ev for ev in self.imgToEval.values()]
