"""WordNet 3.0 for CAPTURE, offline: nltk's reader on Debian's ``wordnet-base`` files.

CAPTURE lemmatises with nltk's ``WordNetLemmatizer`` and finds synonyms with
``nltk.corpus.wordnet.synsets`` (capture-metric 0.1.13, ``capture.py``), both reading the
WordNet corpus nltk finds under ``corpora/wordnet`` on ``nltk.data.path``. nltk's copy of
that corpus is WordNet 3.0's database files; Debian's package ``wordnet-base``
(``apt-get install wordnet-base``) installs the same WordNet 3.0 database in
``/usr/share/wordnet`` but without ``lexnames`` (the 45 lexicographer-file names, which nltk's
reader needs to open the corpus). :func:`ensure_wordnet` therefore makes nltk find one:

1. nltk's own ``corpora/wordnet`` when it is installed (``python -m nltk.downloader wordnet``);
2. else a folder named by ``$CAPEVAL_WORDNET``, or Debian's ``/usr/share/wordnet``: its
   database files are copied once into ``<capeval cache>/nltk_data/corpora/wordnet`` with the
   standard ``lexnames`` table written beside them, and that ``nltk_data`` folder is appended
   to ``nltk.data.path`` (nltk's path sandbox only reads under its data paths).

Both routes give nltk the same WordNet 3.0, so the package and capeval read the same words.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from capeval.errors import ResourceError

DEBIAN_DIR = "/usr/share/wordnet"
#: the database files nltk's WordNetCorpusReader opens
FILES = tuple(f"{kind}.{pos}" for kind in ("data", "index") for pos in ("noun", "verb", "adj", "adv")) + \
    tuple(f"{pos}.exc" for pos in ("noun", "verb", "adj", "adv")) + ("index.sense",)
#: WordNet 3.0's lexicographer files in number order (lexnames(5WN)); the last field of each
#: line of ``lexnames`` is the syntactic category (1 noun, 2 verb, 3 adjective, 4 adverb)
LEXNAMES = (
    ("adj.all", 3), ("adj.pert", 3), ("adv.all", 4), *((f"noun.{n}", 1) for n in (
        "Tops", "act", "animal", "artifact", "attribute", "body", "cognition", "communication", "event",
        "feeling", "food", "group", "location", "motive", "object", "person", "phenomenon", "plant",
        "possession", "process", "quantity", "relation", "shape", "state", "substance", "time")),
    *((f"verb.{n}", 2) for n in (
        "body", "change", "cognition", "communication", "competition", "consumption", "contact",
        "creation", "emotion", "motion", "perception", "possession", "social", "stative", "weather")),
    ("adj.ppl", 3),
)
MISSING = ("capture: WordNet 3.0 is not on this machine: install Debian's WordNet (apt-get install wordnet-base "
           "wordnet-sense-index), or nltk's copy (python -m nltk.downloader wordnet), or set CAPEVAL_WORDNET to a "
           "folder with the WordNet 3.0 database files")


def _nltk_has_wordnet() -> bool:
    import nltk

    try:
        nltk.data.find("corpora/wordnet")
        return True
    except LookupError:
        try:
            nltk.data.find("corpora/wordnet.zip")
            return True
        except LookupError:
            return False


def source_dir() -> Path | None:
    """The WordNet database folder to copy from: ``$CAPEVAL_WORDNET`` or Debian's, if complete."""
    for raw in (os.environ.get("CAPEVAL_WORDNET"), DEBIAN_DIR):
        if raw and all((Path(raw) / f).is_file() for f in FILES):
            return Path(raw)
    return None


def build_corpus(source: Path, root: Path) -> Path:
    """Write ``root/corpora/wordnet`` (the database files of ``source`` plus ``lexnames``) unless
    it is there; returns ``root``. Files are written under a temporary name, then renamed."""
    target = root / "corpora" / "wordnet"
    if (target / "lexnames").is_file() and all((target / f).is_file() for f in FILES):
        return root
    target.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        tmp = target / f".{name}.tmp{os.getpid()}"
        shutil.copyfile(source / name, tmp)
        os.replace(tmp, target / name)
    tmp = target / f".lexnames.tmp{os.getpid()}"
    tmp.write_text("".join(f"{i:02d}\t{name}\t{cat}\n" for i, (name, cat) in enumerate(LEXNAMES)))
    os.replace(tmp, target / "lexnames")
    return root


def ensure_wordnet(cache: str | os.PathLike[str] | None = None) -> str:
    """Make ``nltk.corpus.wordnet`` readable offline; returns where it comes from (``"nltk"`` or
    the source folder). Raises the one-line :data:`MISSING` error when there is no WordNet."""
    import nltk

    if _nltk_has_wordnet():
        return "nltk"
    source = source_dir()
    if source is None:
        raise ResourceError(MISSING)
    if cache is None:
        from capeval.paths import cache_dir

        cache = cache_dir()
    root = build_corpus(source, Path(cache) / "nltk_data")
    if str(root) not in nltk.data.path:
        nltk.data.path.append(str(root))
    return str(source)
