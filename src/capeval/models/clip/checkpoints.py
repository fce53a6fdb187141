"""Checkpoints as data: name -> architecture, URLs, sha256, preprocessing, activation, kind.

Sources (checked by reading the reference code):

- OpenAI: ``clip/clip.py`` ``_MODELS``; the sha256 is the folder name in each URL. The
  files are TorchScript archives (fp16); see :func:`read_state_dict` for how they are read.
- open_clip ``ViT-L-14`` ``laion2b_s32b_b82k``: Hugging Face ``laion/CLIP-ViT-L-14-laion2B-s32B-b82K``;
  GELU (not QuickGELU), mean = std = 0.5 (open_clip ``pretrained.py``). sha256 not published -> None.
- PAC-S (aimagelab/pacscore README): ``clip_ViT-B-32.pth`` and ``openClip_ViT-L-14.pth`` on
  Google Drive; the README links both names to one Drive id (pacscore issues #3, #8, #9), so
  the ViT-L/14 file has no trusted direct URL here: download it by hand from the Drive folder.
- PAC-S++: ``PAC++_clip_ViT-{B-32,L-14}.pth`` from ailb-web.ing.unimore.it (users report 403s).
  No sha256 is published for any PAC-S/PAC-S++ file -> None. The signature always records
  the sha256 computed from the file actually loaded, so results stay traceable.

- Alpha-CLIP (SunzeY/AlphaCLIP ``model-zoo.md``): visual-only full fine-tunes of OpenAI
  ViT-B/16, ViT-L/14 and ViT-L/14@336px (GRIT-1M, GRIT-20M, GRIT-1M + MaskImageNet), each on
  OpenXLab and Google Drive; ``base`` names the OpenAI checkpoint they are loaded over
  (:mod:`capeval.models.clip.alpha`). File names are OpenXLab's. No sha256 published -> None.

- Long-CLIP (Zhang et al., ECCV 2024; beichenzbc/Long-CLIP ``checkpoints/model_zoo.md``):
  ``longclip-B.pt`` (ViT-B/16) and ``longclip-L.pt`` (ViT-L/14) in the Hugging Face repositories
  ``BeichenZhang/LongCLIP-B`` / ``-L``: plain ``torch.save(state_dict)`` files (``train/train.py``)
  with 248-row ``positional_embedding`` and ``positional_embedding_res``; OpenAI's preprocessing
  (``model/longclip.py`` ``_transform``) and QuickGELU. No sha256 published -> None.

- FACTUAL (Li et al., Findings of ACL 2023; zhuang-li/FactualSceneGraph README): the textual
  scene-graph parser HICE-S takes its phrases from (Zeng et al. 2024, Sec. 4.1), the flan-t5
  model ``lizhuang144/flan-t5-base-VG-factual-sg`` on the Hugging Face hub. Kind ``hf-model``:
  a folder (config, weights, tokenizer) fetched from the hub into ``<folder>/factual/``, not
  one file. No sha256 published -> None; the parser records the sha256 of the loaded weights
  in the signature (``parser_sha256``).

A PAC-S/PAC-S++ file is a dict whose ``state_dict`` holds the whole fine-tuned model (every
key: pacscore loads it with ``load_state_dict(strict=True)``, and PAC-S++ files carry the
LoRA factors next to the frozen base weights); ``base`` still names the base checkpoint,
whose architecture and preprocessing the fine-tuned file inherits.

These files are pickles. They are read with ``torch.load(weights_only=True)``, which only
rebuilds tensors and plain containers; a file that needs arbitrary classes is refused rather
than unpickled, since a pickle from an untrusted mirror could run code.
"""

from __future__ import annotations

import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from capeval.models.clip.preprocess import INCEPTION_MEAN, INCEPTION_STD, Preprocess
from capeval.errors import ResourceError, UnknownNameError
from capeval.hashing import file_digest

_OPENAI = "https://openaipublic.azureedge.net/clip/models"
_PACS_DRIVE_FOLDER = "https://drive.google.com/drive/folders/15Da_nh7CYv8xfryIdETG6dPFSqcBiqpd"
_PACPP = "https://ailb-web.ing.unimore.it/publicfiles/pac++"
FACTUAL_HUB = "lizhuang144/flan-t5-base-VG-factual-sg"
_BSPP = ("https://raw.githubusercontent.com/ck0123/improved-bertscore-for-image-captioning-evaluation/"
         "b83705562ffc9a564ec3a20c5dcc7fb56a163b82")


@dataclass(frozen=True)
class Checkpoint:
    """One entry of the table. ``kind``: openai | open_clip | pacs | pacs++ | longclip | alpha-clip | vocab | text |
    hf-model.

    ``hf-model`` entries are Hugging Face hub repositories (``hub``), downloaded as a folder
    named ``filename``."""

    name: str
    arch: str
    kind: str
    filename: str
    urls: tuple[str, ...]
    sha256: str | None
    preprocess: Preprocess = field(default_factory=Preprocess)
    activation: str = "quick_gelu"
    base: str | None = None  # checkpoint whose weights the fine-tuned file is applied to
    note: str = ""
    hub: str | None = None  # hf-model: the hub repository id

    def to_dict(self) -> dict[str, Any]:
        out = {"arch": self.arch, "kind": self.kind, "file": self.filename, "urls": list(self.urls),
               "sha256": self.sha256, "base": self.base, "activation": self.activation,
               "preprocess": self.preprocess.signature(), "note": self.note}
        if self.hub:
            out["hub"] = self.hub
        return out

    def present(self, directory: str | os.PathLike[str] | None = None) -> bool:
        """Whether the file (or, for ``hf-model``, the folder with its config) is in ``directory``."""
        path = local_path(self, directory)
        return (path / "config.json").is_file() if self.kind == "hf-model" else path.is_file()


def _openai(arch: str, sha: str, size: int = 224) -> Checkpoint:
    fname = f"{arch}.pt" if size == 224 else f"{arch}-{size}px.pt"
    return Checkpoint(f"openai/{arch}" + ("" if size == 224 else f"-{size}"), arch if size == 224 else f"{arch}-{size}",
                      "openai", fname, (f"{_OPENAI}/{sha}/{fname}",), sha, Preprocess(size))


def _longclip(arch: str, size: str) -> Checkpoint:
    fname = f"longclip-{size}.pt"
    return Checkpoint(
        f"longclip/{arch}", f"LongCLIP-{arch}", "longclip", fname,
        (f"https://huggingface.co/BeichenZhang/LongCLIP-{size}/resolve/main/{fname}",), None,
        note=f"Long-CLIP (Zhang et al. 2024), 248-token text over OpenAI {arch}; sha256 not published",
    )


_ALPHA_XLAB = "https://download.openxlab.org.cn/models/SunzeY/AlphaCLIP/weight"


def _alpha(arch: str, data: str, fname: str, drive_id: str) -> Checkpoint:
    size = 336 if arch.endswith("-336") else 224
    return Checkpoint(
        f"alpha-clip/{arch}-{data}", arch, "alpha-clip", fname,
        (f"{_ALPHA_XLAB}/{fname}", f"https://drive.usercontent.google.com/download?id={drive_id}&export=download&confirm=t"),
        None,  # not published: record on first verified download
        Preprocess(size), base=f"openai/{arch}",
        note=f"Alpha-CLIP (Sun et al. 2024) visual tower, full fine-tune on {data} over OpenAI {arch}; sha256 not published",
    )


CHECKPOINTS: dict[str, Checkpoint] = {
    c.name: c
    for c in (
        _openai("ViT-B-32", "40d365715913c9da98579312b702a82c18be219cc2a73407c4526f58eba950af"),
        _openai("ViT-B-16", "5806e77cd80f8b59890b7e101eabd078d9fb84e6937f9e85e4ecb61988df416f"),
        _openai("ViT-L-14", "b8cca3fd41ae0c99ba7e8951adf17d267cdb84cd88be6f7c2e0eca1737a03836"),
        _openai("ViT-L-14", "3035c92b350959924f9f00213499208652fc7ea050643e8b385c2dac08641f02", 336),
        Checkpoint(
            "open_clip/ViT-L-14-laion2b_s32b_b82k", "ViT-L-14", "open_clip", "open_clip_pytorch_model.bin",
            ("https://huggingface.co/laion/CLIP-ViT-L-14-laion2B-s32B-b82K/resolve/main/open_clip_pytorch_model.bin",),
            None, Preprocess(224, INCEPTION_MEAN, INCEPTION_STD), "gelu",
            note="sha256 not published by open_clip; the computed hash is recorded in the signature",
        ),
        Checkpoint(
            "pac-s/ViT-B-32", "ViT-B-32", "pacs", "clip_ViT-B-32.pth",
            ("https://drive.usercontent.google.com/download?id=1F-0Pma-vfJPAiDzeyl-iEdSXZIO1cDae&export=download&confirm=t",),
            None, base="openai/ViT-B-32",
            note="PAC-S (Sarto et al. 2023) over OpenAI ViT-B/32; sha256 not published",
        ),
        Checkpoint(
            "pac-s/ViT-L-14", "ViT-L-14", "pacs", "openClip_ViT-L-14.pth", (),
            None, Preprocess(224, INCEPTION_MEAN, INCEPTION_STD), "gelu", base="open_clip/ViT-L-14-laion2b_s32b_b82k",
            note=f"PAC-S over open_clip ViT-L-14 laion2b_s32b_b82k; the pacscore README links this name to the "
            f"ViT-B/32 file's Drive id, so download openClip_ViT-L-14.pth by hand from {_PACS_DRIVE_FOLDER}; "
            "sha256 not published",
        ),
        Checkpoint(
            "pac-s++/ViT-B-32", "ViT-B-32", "pacs++", "PAC++_clip_ViT-B-32.pth", (f"{_PACPP}/PAC++_clip_ViT-B-32.pth",),
            None, base="openai/ViT-B-32", note="PAC-S++ (Sarto et al. 2024), LoRA r=4 over OpenAI ViT-B/32; sha256 not published",
        ),
        Checkpoint(
            "pac-s++/ViT-L-14", "ViT-L-14", "pacs++", "PAC++_clip_ViT-L-14.pth", (f"{_PACPP}/PAC++_clip_ViT-L-14.pth",),
            None, base="openai/ViT-L-14", note="PAC-S++, LoRA r=4 over OpenAI ViT-L/14; sha256 not published",
        ),
        _longclip("ViT-B-16", "B"),
        _longclip("ViT-L-14", "L"),
        _alpha("ViT-B-16", "grit1m", "clip_b16_grit1m_fultune_8xe.pth", "16fHEXZ-7bgzcSBHzEz1wXRIZTjQIXm_2"),
        _alpha("ViT-L-14", "grit1m", "clip_l14_grit1m_fultune_8xe.pth", "1PIhplBnsmSWiJN--TXCCSsiaV6bY9koq"),
        _alpha("ViT-L-14-336", "grit1m", "clip_l14_336_grit1m_fultune_8xe.pth", "1DeNbUv0lraDxJZItb7shTlvGW6z_Z9Si"),
        _alpha("ViT-B-16", "grit20m", "clip_b16_grit20m_fultune_2xe.pth", "1cj3cYwrzBivx0h0NzSjlCg9HAd5aTkDW"),
        _alpha("ViT-L-14", "grit20m", "clip_l14_grit20m_fultune_2xe.pth", "1WykuBYWePriCVeW5lOwBsgxgeBMzb1nd"),
        _alpha("ViT-L-14-336", "grit20m", "clip_l14_336_grit_20m_4xe.pth", "1dUq1deeLcou26RuxZbBG57m2ALPWev6-"),
        _alpha("ViT-B-16", "grit1m-mim", "clip_b16_grit+mim_fultune_4xe.pth", "11iDlSAYI_BAi1A_Qz6LTWYHNgPe-UY7I"),
        _alpha("ViT-L-14", "grit1m-mim", "clip_l14_grit+mim_fultune_6xe.pth", "1JfzOTvjf0tqBtKWwpBJtjYxdHi-06dbk"),
        Checkpoint(
            f"factual/{FACTUAL_HUB.split('/')[1]}", "flan-t5-base", "hf-model", FACTUAL_HUB.split("/")[1],
            (f"https://huggingface.co/{FACTUAL_HUB}",), None, hub=FACTUAL_HUB,
            note="FACTUAL textual scene-graph parser (Li et al. 2023), HICE-S's phrase parser; a hub folder; "
            "sha256 not published (the weights' sha256 is recorded in the hice-s signature)",
        ),
        Checkpoint(
            "polos/reprod", "", "zip", "reprod.zip", ("https://polos-polaris.s3.ap-northeast-1.amazonaws.com/reprod.zip",),
            None, note="Polos (Wada et al. 2024) released model: reprod/reprod.ckpt (Lightning) in a zip, the URL of "
            "keio-smilab24/Polos polos/models/__init__.py download_model; sha256 not published",
        ),
        Checkpoint(
            "polos/sup-simcse-roberta-base", "roberta-base", "hf-model", "sup-simcse-roberta-base",
            ("https://huggingface.co/princeton-nlp/sup-simcse-roberta-base",), None,
            hub="princeton-nlp/sup-simcse-roberta-base",
            note="Polos's text encoder config and tokenizer (configs/polos-trainer.yaml pretrained_model); "
            "its weights come from the Polos checkpoint",
        ),
        Checkpoint(
            "bertscore/roberta-large", "roberta-large", "hf-model", "roberta-large",
            ("https://huggingface.co/FacebookAI/roberta-large",), None, hub="FacebookAI/roberta-large",
            note="BERTScore's default English model (bert-score's lang2model['en']); a hub folder; sha256 not "
            "published (the weights' sha256 is recorded in the bertscore signature)",
        ),
        Checkpoint(
            "bertscore++/bert-base-uncased", "bert-base-uncased", "hf-model", "bert-base-uncased",
            ("https://huggingface.co/google-bert/bert-base-uncased",), None, hub="google-bert/bert-base-uncased",
            note="BERT-S++'s model (ck0123/improved-bertscore-for-image-captioning-evaluation run_metric.py); a hub "
            "folder; sha256 not published (the weights' sha256 is recorded in the bertscore++ signature)",
        ),
        Checkpoint(
            "bertscore++/stop-words", "", "text", "stop_word_list.txt", (f"{_BSPP}/stop_word_list.txt",),
            "5a5e87d822fcd97bbc7b3e75d9b31bb92da3d99ba61e9f7b21111ffc24da520e",
            note="BERT-S++'s stop-word list (the official repository's stop_word_list.txt at b837055)",
        ),
        Checkpoint(
            "clip-vocab", "", "vocab", "bpe_simple_vocab_16e6.txt.gz",
            ("https://github.com/openai/CLIP/raw/main/clip/bpe_simple_vocab_16e6.txt.gz",
             "https://raw.githubusercontent.com/mlfoundations/open_clip/v2.24.0/src/open_clip/bpe_simple_vocab_16e6.txt.gz"),
            "924691ac288e54409236115652ad4aa250f48203de50a9e4722a6ecd48d6804a",
            note="CLIP's BPE vocabulary (OpenAI, MIT licence)",
        ),
    )
}


def get_checkpoint(name: str) -> Checkpoint:
    if name not in CHECKPOINTS:
        raise UnknownNameError(f"unknown checkpoint {name!r}; known: {', '.join(CHECKPOINTS)}")
    return CHECKPOINTS[name]


def checkpoint_dir() -> Path:
    """Where downloaded checkpoints live: ``$CAPEVAL_CHECKPOINTS`` or ``cache_dir()/clip``."""
    env = os.environ.get("CAPEVAL_CHECKPOINTS")
    if env:
        return Path(env).expanduser()
    from capeval.paths import cache_dir

    return cache_dir() / "clip"


def by_hub(repo: str) -> Checkpoint | None:
    """The ``hf-model`` entry of a hub repository id, if the table has one."""
    return next((c for c in CHECKPOINTS.values() if c.hub == repo), None)


def local_path(ckpt: Checkpoint, directory: str | os.PathLike[str] | None = None) -> Path:
    sub = "" if ckpt.kind == "vocab" else ckpt.name.split("/")[0]
    return Path(directory or checkpoint_dir()) / sub / ckpt.filename


def sha256_file(path: str | os.PathLike[str]) -> str:
    """sha256 of a checkpoint file (re-read every time: files may be replaced by a download)."""
    return file_digest(path, "sha256", cached=False)


def resolve(ckpt: Checkpoint, directory: str | os.PathLike[str] | None = None) -> tuple[Path, str]:
    """Path of the local file and its sha256 (verified when the table knows it); else ResourceError."""
    path = local_path(ckpt, directory)
    if not path.is_file():
        how = f"run `capeval download {ckpt.name}`" if ckpt.urls else f"download {ckpt.filename} by hand ({ckpt.note})"
        raise ResourceError(
            f"checkpoint {ckpt.name} is not available: {how}, or place {ckpt.filename} at {path} "
            f"(set CAPEVAL_CHECKPOINTS to use another folder); a file path also works as the backbone name"
        )
    digest = sha256_file(path)
    if ckpt.sha256 and digest != ckpt.sha256:
        problem = sniff(path)
        if problem:  # say what the file is rather than only that its hash differs
            raise ResourceError(f"checkpoint {path} {problem} (expected {ckpt.name}, sha256 {ckpt.sha256[:12]}...)")
        raise ResourceError(
            f"{path}: sha256 {digest} does not match the expected {ckpt.sha256} for {ckpt.name}; "
            f"the file is corrupt or a different checkpoint: delete it and run `capeval download {ckpt.name}`"
        )
    return path, digest


def is_torchscript(path: str | os.PathLike[str]) -> bool:
    """TorchScript archives (OpenAI's ``.pt``) are zips with a ``code/`` folder and ``constants.pkl``."""
    try:
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
    except (zipfile.BadZipFile, OSError):
        return False
    return any("/code/" in n or n.startswith("code/") for n in names) and any(n.endswith("constants.pkl") for n in names)


def _first_line(exc: BaseException, limit: int = 160) -> str:
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0].strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _looks_like_safetensors(head: bytes, size: int) -> bool:
    if len(head) < 9:
        return False
    n = int.from_bytes(head[:8], "little")
    return 2 <= n <= size - 8 and head[8:9] == b"{"


def sniff(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` cannot be a checkpoint, judged from its size and first bytes; None if it may be one.

    Catches what failed downloads leave behind: an empty file, an HTML page (Google Drive's
    virus-scan warning, a login or error page) or an XML error document saved under the
    checkpoint's name, and a plain-text error message.
    """
    path = Path(path)
    size = path.stat().st_size
    if size == 0:
        return "is empty (0 bytes): the download did not complete; delete it and download it again"
    with open(path, "rb") as f:
        head = f.read(4096)
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if text.startswith((b"<!doctype html", b"<html", b"<head", b"<body")) or (
        text.startswith(b"<") and b"<html" in text
    ):
        title = ""
        lo = head.lower()
        if b"<title>" in lo:
            t = head[lo.index(b"<title>") + 7:]
            title = t[: t.lower().find(b"</title>")].decode("utf-8", "replace").strip()[:80] if b"</title>" in t.lower() else ""
        return (f"is an HTML page ({size:,} bytes{', title ' + repr(title) if title else ''}), not a checkpoint: "
                "the download was redirected (e.g. to Google Drive's virus-scan warning or a login page); "
                "download the file again in a browser and save it under this name")
    if text.startswith(b"<?xml"):
        return f"is an XML document ({size:,} bytes, e.g. a storage server's error reply), not a checkpoint"
    if b"\x00" not in head and sum(32 <= c < 127 or c in (9, 10, 13) for c in head) >= 0.95 * len(head):
        first = head.decode("utf-8", "replace").strip().splitlines()[0][:60] if head.strip() else ""
        return f"is a text file ({size:,} bytes, starting {first!r}), not a checkpoint (an error message saved by the download?)"
    return None


def read_state_dict(path: str | os.PathLike[str], trusted: bool = False) -> dict[str, Any]:
    """Tensors of a checkpoint file: safetensors, or ``torch.load(weights_only=True)``.

    OpenAI's ``.pt`` files are TorchScript archives, which ``weights_only`` cannot read; they
    are opened with ``torch.jit.load(map_location="cpu").state_dict()`` only when ``trusted``
    (the file's sha256 matched the official hash, or the user named the file directly).
    A dict with ``state_dict`` (PAC-S, PAC-S++) is unwrapped. An empty file, an HTML page
    saved under a checkpoint's name and a truncated or corrupt file raise a one-line
    :class:`ResourceError` naming the file and what it looks like.
    """
    path = Path(path)
    try:
        problem = sniff(path)
    except FileNotFoundError:
        raise ResourceError(f"checkpoint {path} not found") from None
    except IsADirectoryError:
        raise ResourceError(f"checkpoint {path} is a directory, not a file") from None
    if problem:
        raise ResourceError(f"checkpoint {path} {problem}")
    import torch

    with open(path, "rb") as f:
        head = f.read(16)
    size = path.stat().st_size
    if path.suffix == ".safetensors" or _looks_like_safetensors(head, size):
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        try:
            return dict(load_file(str(path)))
        except (SafetensorError, OSError, ValueError) as exc:
            raise ResourceError(f"checkpoint {path} is truncated or corrupt (safetensors: {_first_line(exc)}); "
                                "delete it and download it again") from None
    if is_torchscript(path):
        if not trusted:
            raise ResourceError(f"{path} is a TorchScript archive whose sha256 is not the official one; refusing to load it")
        try:
            return dict(torch.jit.load(str(path), map_location="cpu").state_dict())
        except Exception as exc:  # a damaged archive fails in many ways inside TorchScript
            raise ResourceError(f"checkpoint {path} is truncated or corrupt (TorchScript: {_first_line(exc)}); "
                                "delete it and download it again") from None
    if head[:2] != b"PK" and head[:1] != b"\x80":  # torch.save writes a zip archive or (legacy) a pickle
        raise ResourceError(f"checkpoint {path} is not a checkpoint format capeval reads (safetensors, or a "
                            f"torch.save zip/pickle); it starts with bytes {head[:8].hex(' ')}")
    try:
        obj = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as exc:
        raise ResourceError(f"checkpoint {path} {_torch_load_problem(exc, path, head, size)}") from None
    if isinstance(obj, dict) and "state_dict" in obj and isinstance(obj["state_dict"], dict):
        obj = obj["state_dict"]
    if not isinstance(obj, dict):
        raise ResourceError(f"checkpoint {path}: expected a state dict, got {type(obj).__name__}")
    if not any(isinstance(v, torch.Tensor) for v in obj.values()):
        raise ResourceError(f"checkpoint {path}: the file holds a dict without tensors (keys: "
                            f"{', '.join(map(str, list(obj)[:5])) or 'none'}), not a state dict")
    return obj


def _torch_load_problem(exc: BaseException, path: Path, head: bytes, size: int) -> str:
    """What a ``torch.load`` failure means for the user, in one line."""
    import pickle

    msg = _first_line(exc)
    if "weights only load failed" in str(exc).lower() or "unsupported global" in str(exc).lower():
        # intact file, but pickled Python objects beyond tensors: refused for safety
        detail = next((ln.strip() for ln in str(exc).splitlines() if "Unsupported global" in ln), msg)
        return (f"holds pickled Python objects, not only tensors; capeval reads checkpoints with "
                f"torch.load(weights_only=True) and refuses it ({_first_line(Exception(detail))})")
    zipped = head[:2] == b"PK"
    if zipped:
        try:
            zipfile.ZipFile(path).close()
        except (zipfile.BadZipFile, OSError):  # no end-of-archive record: cut short
            return (f"is truncated or corrupt ({size:,} bytes; the zip archive's end record is missing, so the "
                    "file was cut short); delete it and download it again")
    if zipped or isinstance(exc, (EOFError, pickle.UnpicklingError, RuntimeError)):
        kind = "zip archive" if zipped else "pickle"
        return (f"is truncated or corrupt ({size:,} bytes, {kind}: {msg}); delete it and download it again")
    return f"cannot be read with torch.load(weights_only=True): {msg}"


def checkpoint_info(directory: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """For ``capeval info``: each checkpoint's table entry, local path and whether it is present."""
    out: dict[str, Any] = {"dir": str(Path(directory) if directory else checkpoint_dir()), "entries": {}}
    for name, ckpt in CHECKPOINTS.items():
        path = local_path(ckpt, directory)
        entry = ckpt.to_dict()
        entry.update({"path": str(path), "present": ckpt.present(directory)})
        out["entries"][name] = entry
    return out
