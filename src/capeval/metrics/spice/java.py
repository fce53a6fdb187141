"""``spice-java``: the official SPICE 1.0 jar, run as pycocoevalcap 1.2 runs it.

Needs ``java`` on the PATH, pycocoevalcap's ``spice/spice-1.0.jar`` with its ``lib/`` and
Stanford CoreNLP 3.6.0 (``lib/stanford-corenlp-3.6.0.jar`` and
``lib/stanford-corenlp-3.6.0-models.jar``; pycocoevalcap downloads them on first use,
:func:`download_corenlp` does the same here). Captions are PTB-tokenised as for every
pycocoevalcap metric, written to a JSON file and scored with
``java -jar -Xmx8G spice-1.0.jar in.json -cache DIR -out out.json -subset -silent``.

From Java 15 on the jar's ``-out`` cannot work: ``SpiceScorer`` pretty-prints its JSON
through the JavaScript engine, removed from the JDK in Java 15, and dies with a
NullPointerException. There the same steps (``SpiceParser``, ``SpiceStats`` with the six
filters) run from a small driver (:data:`DRIVER_SOURCE`, launched as a source file) that
writes ``SpiceStats.toJSONString()`` directly. From Java 16 on the LMDB parse cache (FST
serialisation by reflection into ``java.lang``) is refused by the module system, so no
cache is used there. Neither changes any number.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar

from capeval.errors import InputError, ResourceError
from capeval.io.inputs import prepare_text_inputs
from capeval.metrics.spice.scorer import result_from_evaluations
from capeval.metrics.spice.tuples import Evaluation
from capeval.metrics.text import tokenize_span
from capeval.progress import make_progress
from capeval.result import MetricResult, Report, Signature
from capeval.scorer import ScorerBase

_USE_SPICE = "or use the pure-Python metric `spice` (no Java)"


@dataclass(frozen=True)
class JarDownload:
    """A file to fetch, like an entry of the checkpoint table: name, where it goes, URLs,
    the member of the archive at the URL, and the published sha256 (None: none published)."""

    name: str
    filename: str
    urls: tuple[str, ...]
    member: str
    sha256: str | None
    required_entry: str  # a path the jar must contain (the check when there is no sha256)


# pycocoevalcap's get_stanford_models.py downloads this archive (~400 MB) and keeps two jars.
# Stanford publishes no checksum for it (Maven Central has the two jars with SHA-1 only).
CORENLP_ZIP_URLS = (
    "https://nlp.stanford.edu/software/stanford-corenlp-full-2015-12-09.zip",
    "http://nlp.stanford.edu/software/stanford-corenlp-full-2015-12-09.zip",
)
CORENLP_JARS = (
    JarDownload("stanford-corenlp-3.6.0", "stanford-corenlp-3.6.0.jar", CORENLP_ZIP_URLS,
                "stanford-corenlp-full-2015-12-09/stanford-corenlp-3.6.0.jar", None,
                "edu/stanford/nlp/pipeline/StanfordCoreNLP.class"),
    JarDownload("stanford-corenlp-3.6.0-models", "stanford-corenlp-3.6.0-models.jar", CORENLP_ZIP_URLS,
                "stanford-corenlp-full-2015-12-09/stanford-corenlp-3.6.0-models.jar", None,
                "edu/stanford/nlp/models/lexparser/englishPCFG.ser.gz"),
)


def spice_home(spice_dir: str | os.PathLike[str] | None = None) -> Path:
    """The folder holding ``spice-1.0.jar`` and ``lib/`` (default: pycocoevalcap's ``spice/``)."""
    if spice_dir is not None:
        return Path(spice_dir)
    import importlib.util

    spec = importlib.util.find_spec("pycocoevalcap")
    if spec is None or not spec.submodule_search_locations:
        raise ResourceError(f"spice-java needs pycocoevalcap 1.2 (pip install pycocoevalcap==1.2) {_USE_SPICE}")
    return Path(next(iter(spec.submodule_search_locations))) / "spice"


def missing_files(home: Path) -> list[str]:
    """The jar files SPICE 1.0 needs that ``home`` lacks."""
    need = [home / "spice-1.0.jar", home / "lib" / "Meteor-1.5.jar"]
    need += [home / "lib" / j.filename for j in CORENLP_JARS]
    return [str(p) for p in need if not p.is_file()]


def _check_jar(path: Path, entry: str) -> None:
    try:
        with zipfile.ZipFile(path) as z:
            names = set(z.namelist())
    except (OSError, zipfile.BadZipFile) as exc:
        raise ResourceError(f"{path} is not a jar ({exc})") from None
    if entry not in names:
        raise ResourceError(f"{path} does not contain {entry}")


def download_corenlp(spice_dir: str | os.PathLike[str] | None = None, force: bool = False) -> list[Path]:
    """Fetch Stanford CoreNLP 3.6.0 into ``<spice>/lib`` as pycocoevalcap does (the archive
    of :data:`CORENLP_ZIP_URLS`, two jars kept); returns the jar paths.

    Jars already there and readable are kept unless ``force``. No sha256 is published, so
    each jar is checked to be a readable jar holding its ``required_entry``.
    """
    from capeval.models.download import fetch

    lib = spice_home(spice_dir) / "lib"
    targets = [lib / j.filename for j in CORENLP_JARS]
    if not force and all(t.is_file() for t in targets):
        try:
            for j, t in zip(CORENLP_JARS, targets):
                _check_jar(t, j.required_entry)
            return targets
        except ResourceError:
            pass  # a broken earlier download: fetch again
    lib.mkdir(parents=True, exist_ok=True)
    errors = []
    with tempfile.TemporaryDirectory(dir=lib) as tmp:
        archive = Path(tmp) / "corenlp.zip"
        for url in CORENLP_ZIP_URLS:
            try:
                fetch(url, archive, None, timeout=120.0)
                break
            except ResourceError:
                raise
            except Exception as exc:  # network errors: try the next URL
                errors.append(f"{url}: {type(exc).__name__}: {exc}")
        else:
            raise ResourceError(f"could not download CoreNLP 3.6.0 ({'; '.join(errors)}); put "
                                f"{' and '.join(j.filename for j in CORENLP_JARS)} into {lib} by hand")
        try:
            with zipfile.ZipFile(archive) as z:
                for j in CORENLP_JARS:
                    with z.open(j.member) as src, open(Path(tmp) / j.filename, "wb") as dst:
                        shutil.copyfileobj(src, dst, 1 << 20)
        except (zipfile.BadZipFile, KeyError) as exc:
            raise ResourceError(f"the downloaded CoreNLP archive is not the expected one ({exc}); "
                                "nothing was written") from None
        for j in CORENLP_JARS:
            _check_jar(Path(tmp) / j.filename, j.required_entry)
        for j, t in zip(CORENLP_JARS, targets):  # both checked before either is moved into place
            os.replace(Path(tmp) / j.filename, t)
    return targets


@lru_cache(maxsize=8)
def java_major(java: str) -> int:
    """Major version of ``java`` (8 for ``1.8.0_312``, 17 for ``17.0.15``)."""
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ResourceError(f"cannot run {java} -version ({exc}) {_USE_SPICE}") from None
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if m is None:
        raise ResourceError(f"cannot read the Java version from `{java} -version` {_USE_SPICE}")
    first = int(m.group(1))
    return int(m.group(2) or 0) if first == 1 else first


#: SpiceScorer.scoreBatch's steps with -subset -silent, writing the JSON without javax.script
DRIVER_SOURCE = """\
import edu.anu.spice.*;
import java.io.*;
import java.util.*;
import org.json.simple.*;
import org.json.simple.parser.JSONParser;

public class SpiceJsonDriver {
  public static void main(String[] args) throws Exception {
    SpiceParser parser = new SpiceParser(args[2].isEmpty() ? null : args[2], Integer.parseInt(args[3]), true);
    Map<String, TupleFilter> filters = new HashMap<String, TupleFilter>();
    filters.put("Object", TupleFilter.objectFilter);
    filters.put("Attribute", TupleFilter.attributeFilter);
    filters.put("Relation", TupleFilter.relationFilter);
    filters.put("Cardinality", TupleFilter.cardinalityFilter);
    filters.put("Color", TupleFilter.colorFilter);
    filters.put("Size", TupleFilter.sizeFilter);
    List<Object> ids = new ArrayList<Object>();
    List<String> tests = new ArrayList<String>(), refs = new ArrayList<String>();
    List<Integer> chunks = new ArrayList<Integer>();
    try (Reader in = new InputStreamReader(new FileInputStream(args[0]), "UTF-8")) {
      for (Object o : (JSONArray) new JSONParser().parse(in)) {
        JSONObject item = (JSONObject) o;
        ids.add(item.get("image_id"));
        tests.add((String) item.get("test"));
        JSONArray r = (JSONArray) item.get("refs");
        chunks.add(r.size());
        for (Object s : r) refs.add((String) s);
      }
    }
    List<SceneGraph> refGraphs = parser.parseCaptions(refs, chunks);
    List<SceneGraph> testGraphs = parser.parseCaptions(tests);
    SpiceStats stats = new SpiceStats(filters, false);
    for (int i = 0; i < testGraphs.size(); ++i) stats.score(ids.get(i), testGraphs.get(i), refGraphs.get(i), true);
    try (Writer out = new OutputStreamWriter(new FileOutputStream(args[1]), "UTF-8")) {
      out.write(stats.toJSONString());
    }
  }
}
"""


class SpiceJava(ScorerBase):
    """SPICE 1.0 through the official jar (Java + CoreNLP 3.6.0): ``spice-java``.

    Same result layout as :class:`~capeval.metrics.spice.scorer.Spice`. All items go to one
    Java process (CoreNLP loads once; no chunks, no forked workers). Options:
    ``tokenizer`` (``"ptb"`` as pycocoevalcap, or ``"none"``); ``workers`` (the jar's
    ``-threads``; default: all processors); ``cache_dir`` (the jar's LMDB parse cache;
    default ``<capeval cache>/spice-1.0``); ``spice_dir`` (folder with ``spice-1.0.jar`` and
    ``lib/``; default pycocoevalcap's); ``java`` (the executable); ``memory`` (``-Xmx``).
    """

    produces: ClassVar[tuple[str, ...]] = ("spice-java",)

    def __init__(self, metrics: Sequence[str] | None = None, tokenizer: str = "ptb", workers: int | None = None,
                 cache_dir: str | None = None, spice_dir: str | None = None, java: str = "java", memory: str = "8G"):
        self.metrics = self._select(metrics)
        if tokenizer not in ("ptb", "none"):
            raise InputError(f"unknown tokenizer {tokenizer!r}; use 'ptb' or 'none'")
        self.tokenizer = tokenizer
        exe = shutil.which(java)
        if exe is None:
            raise ResourceError(f"spice-java needs Java: `{java}` is not on the PATH; install a JDK {_USE_SPICE}")
        self.home = spice_home(spice_dir)
        missing = missing_files(self.home)
        if missing:
            hint = ("`capeval download spice` fetches CoreNLP 3.6.0"
                    if all("stanford-corenlp" in m for m in missing) else "reinstall pycocoevalcap==1.2")
            raise ResourceError(f"spice-java: missing {', '.join(missing)}; {hint}, {_USE_SPICE}")
        self.java = exe
        self.java_version = java_major(exe)
        self.workers = workers
        self.memory = memory
        if cache_dir is None:
            from capeval.paths import cache_dir as capeval_cache

            cache_dir = os.fspath(capeval_cache() / "spice-1.0")
        self.cache_dir = cache_dir

    def command(self, in_path: Path, out_path: Path, driver: Path) -> list[str]:
        """The Java command: the jar's own (Java <= 14), else the driver (see module docs)."""
        threads = [] if self.workers is None else ["-threads", str(self.workers)]
        if self.java_version <= 14:
            return [self.java, "-jar", f"-Xmx{self.memory}", str(self.home / "spice-1.0.jar"), str(in_path),
                    "-cache", self.cache_dir, "-out", str(out_path), "-subset", "-silent", *threads]
        cache = self.cache_dir if self.java_version <= 15 else ""
        classpath = os.pathsep.join([str(self.home / "spice-1.0.jar"), str(self.home / "lib" / "*")])
        return [self.java, f"-Xmx{self.memory}", "-cp", classpath, str(driver), str(in_path), str(out_path), cache,
                str(self.workers or os.cpu_count() or 1)]

    def run_jar(self, hyps: list[str], refs: list[list[str]]) -> list[dict]:
        """Score with the jar; its JSON list, one object per item (``image_id`` = position)."""
        if self.cache_dir and self.java_version <= 15:
            Path(self.cache_dir).mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="capeval-spice-") as tmp:
            in_path, out_path, driver = Path(tmp) / "input.json", Path(tmp) / "output.json", Path(tmp) / "Driver.java"
            data = [{"image_id": k, "test": h, "refs": rs} for k, (h, rs) in enumerate(zip(hyps, refs))]
            in_path.write_text(json.dumps(data), encoding="utf-8")
            driver.write_text(DRIVER_SOURCE, encoding="utf-8")
            proc = subprocess.run(self.command(in_path, out_path, driver), cwd=self.home, capture_output=True,
                                  text=True, encoding="utf-8", errors="replace", check=False)
            if proc.returncode != 0 or not out_path.is_file() or out_path.stat().st_size == 0:
                tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
                raise ResourceError(f"spice-java: the SPICE jar failed (exit {proc.returncode}): {tail}")
            return json.loads(out_path.read_text(encoding="utf-8"))

    def score(self, candidates: Mapping[Any, Any] | Sequence[str], references: Mapping[Any, Any] | None = None, *,
              progress: bool | None = False, **inputs: Any) -> Report:
        """Score ``{id: caption}`` against ``{id: [reference, ...]}`` with the official jar."""
        if inputs:
            raise InputError(f"{type(self).__name__} takes only text; unexpected inputs {sorted(inputs)}")
        cands, refs = prepare_text_inputs(candidates, references, needs_references=True)
        assert refs is not None
        ids = list(cands)
        with make_progress(len(ids) + sum(len(refs[i]) for i in ids), "tokenize", progress) as bar:
            hyps, toks = tokenize_span(self.tokenizer, ids, cands, refs, 0, len(ids), bar.update)
        return Report([self.results_from_json(ids, self.run_jar(hyps, toks), toks)])

    def results_from_json(self, ids: list[str], output: list[dict], refs: list[list[str]]) -> MetricResult:
        """The jar's JSON (``[{"image_id": position, "scores": {...}}]``) as a result."""
        by_pos = {int(item["image_id"]): item["scores"] for item in output}
        per_item = [{name: Evaluation.from_dict(d) for name, d in by_pos[k].items()} for k in range(len(ids))]
        counts = sorted({len(r) for r in refs})
        nrefs = "0" if not counts else str(counts[0]) if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
        sig = Signature.build("spice-java", tok="ptb-corenlp-3.4.1" if self.tokenizer == "ptb" else "none",
                              nrefs=nrefs, parser="corenlp-3.6.0", synonyms="meteor-1.5-wordnet", synsets="yes",
                              merge="yes", subsets="yes", version_spice="1.0", java=str(self.java_version))
        return result_from_evaluations("spice-java", ids, per_item, sig)
