"""ALOHa's detector: a tiny random DETR of facebook/detr-resnet-50's architecture family (a native
ResNet backbone instead of timm's) against the official ``add_object_detections`` (mirror, its
model names pointed at the tiny folder), and the detections reaching the score."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import types
import warnings
from pathlib import Path

import numpy as np
import pytest

import _aloha_cases as cases
from capeval.errors import InputError
from capeval.metrics.aloha import prompts
from capeval.metrics.aloha.detect import Detector
from capeval.metrics.aloha.scorer import ALOHa

MIRROR = Path("/work/.mirror/DavidMChan+aloha/repo")
LABELS = {0: "dog", 1: "cat", 2: "dining table", 3: "person"}


@pytest.fixture(scope="module")
def detr(tmp_path_factory):
    import torch
    from transformers import DetrConfig, DetrForObjectDetection, DetrImageProcessor, ResNetConfig

    folder = tmp_path_factory.mktemp("detr")
    backbone = ResNetConfig(embedding_size=8, hidden_sizes=[8, 16, 16, 32], depths=[1, 1, 1, 1], layer_type="basic",
                            out_features=["stage4"])
    cfg = DetrConfig(backbone_config=backbone, use_timm_backbone=False, use_pretrained_backbone=False, d_model=16,
                     encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
                     encoder_ffn_dim=32, decoder_ffn_dim=32, num_queries=12, id2label=LABELS,
                     label2id={v: k for k, v in LABELS.items()})
    torch.manual_seed(0)
    model = DetrForObjectDetection(cfg)
    with torch.no_grad():  # confident on some images: some pass 0.9, some do not
        model.model.query_position_embeddings.weight.normal_(0, 1)
        model.class_labels_classifier.weight.normal_(0, 2)
    model.save_pretrained(str(folder))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        DetrImageProcessor(size={"shortest_edge": 64, "longest_edge": 96}).save_pretrained(str(folder))
    from PIL import Image

    images = tmp_path_factory.mktemp("images")
    for k in range(4):
        pixels = (np.random.default_rng(k).random((40 + 7 * k, 50, 3)) * 255).astype("uint8")
        Image.fromarray(pixels).save(images / f"img{k}.png")
    return folder, images


def test_detections_match_the_official_code(detr, monkeypatch, tmp_path):
    folder, images = detr
    if not (MIRROR / "config").exists() and not (MIRROR / "HEAD").exists():
        pytest.skip("no DavidMChan/aloha mirror (fetch github:DavidMChan/aloha)")
    src = subprocess.run(["git", f"--git-dir={MIRROR}", "show", "HEAD:src/aloha/utils/object_detections.py"],
                         capture_output=True, text=True, check=True).stdout
    for name in ("aloha", "aloha.types"):
        mod = types.ModuleType(name)
        mod.__path__ = []  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, name, mod)
    sys.modules["aloha.types"].Sample = dict  # type: ignore[attr-defined]
    path = tmp_path / "official_detections.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("_official_detections", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    from transformers import AutoImageProcessor, DetrForObjectDetection

    names = []

    def pointed(cls):
        class Pointed:
            @staticmethod
            def from_pretrained(name):
                names.append(name)
                return cls.from_pretrained(str(folder))
        return Pointed

    module.AutoImageProcessor = pointed(AutoImageProcessor)
    module.DetrForObjectDetection = pointed(DetrForObjectDetection)
    samples = [{"image_path": f"img{k}.png"} for k in range(4)]
    official = module.add_object_detections(samples, str(images))
    assert names == ["facebook/detr-resnet-50"] * 2  # the published names
    ours = Detector(str(folder)).detect({f"img{k}": images / f"img{k}.png" for k in range(4)})
    got = [ours[f"img{k}"] for k in range(4)]
    assert got == [s["detections"] for s in official]
    flat = [x for g in got for x in g]
    assert flat and sum(map(len, got)) < 4 * 12  # the threshold drops some
    assert set(flat) <= set(LABELS.values())


def test_detector_labels_reach_the_references(detr):
    folder, images = detr
    script = {prompts.candidate_turn("a cat"): "- cat", prompts.references_turn(["a pet"]): "- pet"}
    kw = dict(backend=cases.ScriptedBackend(script), embedder=cases.encode, spacy_model=cases.FakeNLP(), cache=None)
    res = ALOHa(detector="detr", detector_model=str(folder), **kw).score(
        {"a": "a cat"}, {"a": ["a pet"]}, images={"a": images / "img0.png"})["aloha"]
    labels = Detector(str(folder)).labels(images / "img0.png")
    assert res.extras["detections"]["a"] == labels
    assert res.extras["reference_objects"]["a"] == [["pet"], ["pet"]] + [[d] for d in dict.fromkeys(labels)]
    assert "detections:detr:" in str(res.signature)
    with pytest.raises(InputError, match="needs the images"):
        ALOHa(detector="detr", detector_model=str(folder), **kw).score({"a": "a cat"}, {"a": ["a pet"]})
    with pytest.raises(InputError, match="not both"):
        ALOHa(detector="detr", detections={"a": []}, **kw)
