"""``capeval check`` and :mod:`capeval.requirements` (issue 47 item 6): everything a metric needs,
said at once and before any run, with the command that provides each; nothing loaded to check.
Also: ``capeval download factual`` draws no progress line of the hub client, and a missing spaCy
pipeline names its release wheel."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from capeval import registry
from capeval.cli.main import main
from capeval.errors import MissingDependencyError, ResourceError
from capeval.requirements import (DISTRIBUTIONS, EXTRAS, RequirementsMissing, _BY_FACTORY, _extra_dists, check,
                                  init_options, nltk_search_path, requirements)

ROOT = Path(__file__).resolve().parents[1]
#: libraries that checking must never import (seconds each, and nothing to check needs them)
HEAVY = ("torch", "transformers", "spacy", "sentence_transformers", "scipy", "nltk", "PIL")


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    """An empty capeval cache and Hugging Face cache: no checkpoint, no hub model is present."""
    monkeypatch.setenv("CAPEVAL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    for name in ("CAPEVAL_CHECKPOINTS", "CAPEVAL_CLIP_VOCAB", "CAPEVAL_CHECKPOINT_MIRROR", "CAPEVAL_DATA_MIRROR",
                 "CAPEVAL_DATA"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "cache"


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _rows(out: str) -> dict[str, list[str]]:
    """Table rows by NAME: [status, kind, name, needed by, fix or where] (split on 2+ spaces)."""
    rows = {}
    for line in out.splitlines()[2:]:
        cells = re.split(r"\s{2,}", line.strip())
        if len(cells) >= 5:
            rows[cells[2]] = cells[:4] + ["  ".join(cells[4:])]  # the fix and its [note]
    return rows


def _one_error(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("capeval: error: "), err
    return lines[0]


def test_missing_checkpoint_and_chair_option_are_listed_together(capsys, empty_cache):
    code, out, err = _run(capsys, "check", "-m", "clip-s,chair")
    assert code == 2
    rows = _rows(out)
    clip = rows["openai/ViT-B-32"]
    assert clip[:2] == ["missing", "checkpoint"] and clip[3] == "clip-s"
    assert clip[4] == "capeval download openai/ViT-B-32"
    chair = rows["chair.annotations"]
    assert chair[:2] == ["missing", "option"] and chair[3] == "chair-s, chair-i"
    assert chair[4].startswith("-O chair.annotations=DIR")
    line = _one_error(err)
    missing = sum(r[0] == "missing" for r in rows.values())
    assert re.fullmatch(rf"capeval: error: {missing} requirements missing for clip-s, chair-s, chair-i \(.*\)", line)


def test_present_checkpoint_is_listed_present_and_a_saved_html_page_is_not(capsys, empty_cache):
    path = empty_cache / "clip" / "openai" / "ViT-B-32.pt"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"PK\x03\x04" + bytes(range(256)) * 8)  # presence: the file, first bytes sniffed, not hashed
    code, out, err = _run(capsys, "check", "-m", "clip-s", "--json")
    found = {r["name"]: r for r in json.loads(out)["requirements"]}
    assert found["openai/ViT-B-32"]["status"] == "ok" and found["openai/ViT-B-32"]["where"] == str(path)
    path.write_text("<!DOCTYPE html><html><title>Google Drive - Virus scan warning</title></html>")
    code, out, err = _run(capsys, "check", "-m", "clip-s", "--json")
    bad = {r["name"]: r for r in json.loads(out)["requirements"]}["openai/ViT-B-32"]
    assert code == 2 and bad["status"] == "missing" and "HTML page" in bad["note"]


def test_options_change_what_is_needed(capsys, empty_cache):
    code, out, _ = _run(capsys, "check", "-m", "pac-s++", "-O", "pac-s++.backbone=pac-s++/ViT-L-14")
    rows = _rows(out)
    assert "pac-s++/ViT-L-14" in rows and "pac-s++/ViT-B-32" not in rows
    # HICE-S: the FACTUAL parser and SAM by default; parser=spice and regions=grid need neither
    _, out, _ = _run(capsys, "check", "-m", "hice-s")
    rows = _rows(out)
    assert any(n.startswith("FACTUAL ") for n in rows) and "facebook/sam-vit-base" in rows
    assert {"alpha-clip/ViT-L-14-grit20m", "openai/ViT-L-14"} <= set(rows)  # Alpha-CLIP and the CLIP it fine-tunes
    _, out, _ = _run(capsys, "check", "-m", "hice-s", "-O", "hice-s.parser=spice", "-O", "hice-s.regions=grid")
    rows = _rows(out)
    assert not any(n.startswith("FACTUAL ") for n in rows) and "facebook/sam-vit-base" not in rows
    assert rows["en_core_web_sm"][1] == "spacy-model"


def test_annotation_folder_given_is_checked_for_its_files(capsys, empty_cache, tmp_path):
    folder = tmp_path / "coco"
    folder.mkdir()
    (folder / "instances_val2014.json").write_text("{}")
    code, out, err = _run(capsys, "check", "-m", "chair-s", "-O", f"chair.annotations={folder}")
    row = _rows(out)[f"chair.annotations={folder}"]
    assert code == 2 and row[0] == "missing" and "instances_train2014.json" in row[4]
    for name in ("instances_train2014.json", "captions_train2014.json", "captions_val2014.json"):
        (folder / name).write_text("{}")
    _, out, _ = _run(capsys, "check", "-m", "chair-s", "-O", f"chair.annotations={folder}")
    assert _rows(out)[f"chair.annotations={folder}"][0] == "ok"


def test_bad_options_are_one_line_errors(capsys, empty_cache):
    code, out, err = _run(capsys, "check", "-m", "clip-s", "-O", "clip-s.backbon=x")
    assert code == 2 and out == "" and "clip-s.backbon" in _one_error(err) and "backbone" in err
    code, out, err = _run(capsys, "check", "-m", "clip-s", "-O", "chair.annotations=/x")
    assert code == 2 and "not among the metrics being checked" in _one_error(err)
    code, out, err = _run(capsys, "check", "-m", "no-such-metric")
    assert code == 2 and "unknown metric" in _one_error(err)


def test_json_parses_and_counts_agree(capsys, empty_cache):
    code, out, err = _run(capsys, "check", "-m", "capture,clip-s,bleu-4", "--json")
    payload = json.loads(out)
    statuses = [r["status"] for r in payload["requirements"]]
    assert set(statuses) <= {"ok", "missing", "optional", "unchecked"}
    assert payload["missing"] == statuses.count("missing") and payload["ok"] is (payload["missing"] == 0)
    assert code == (2 if payload["missing"] else 0)
    if payload["missing"]:
        _one_error(err)
    assert all(r["fix"] for r in payload["requirements"] if r["status"] == "missing")


def test_nothing_needed_is_status_zero(capsys):
    code, out, err = _run(capsys, "check", "-m", "bleu-4,cider-d,rouge-l")
    assert code == 0 and err == "" and "need nothing" in out
    assert check(["bleu-4"]) == []


def _hidden(modules: list[str], argv: list[str]) -> subprocess.CompletedProcess:
    """``capeval`` in a child where ``modules[0]`` is hidden by ``sys.modules[name] = None`` and the
    others by an import hook that refuses them."""
    code = (
        "import sys, importlib.abc\n"
        f"hidden = {modules!r}\n"
        "sys.modules[hidden[0]] = None\n"
        "class Refuse(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in hidden[1:]:\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "        return None\n"
        "sys.meta_path.insert(0, Refuse())\n"
        "from capeval.cli.main import main\n"
        f"sys.exit(main({argv!r}))\n"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")})


def test_a_missing_package_is_listed_with_its_pip_install():
    run = _hidden(["ftfy", "safetensors"], ["check", "-m", "clip-s,capture"])
    assert run.returncode == 2, run.stderr
    rows = _rows(run.stdout)
    for name in ("ftfy", "safetensors"):
        assert rows[name][:3] == ["missing", "package", name]
        assert rows[name][3] == "clip-s, capture"  # in the order given
        assert rows[name][4] == 'pip install ".[capture,clip]" (in the capeval checkout)'
    assert rows["torch"][0] == "ok" or importlib.util.find_spec("torch") is None
    _one_error(run.stderr)


def test_every_metric_gets_at_least_its_extras_packages(empty_cache):
    factories = {s.factory for s in registry.metrics().values()}
    assert factories <= set(_BY_FACTORY), f"no requirement finder for {sorted(factories - set(_BY_FACTORY))}"
    for name, spec in registry.metrics().items():
        found = requirements(name)
        packages = {r.name for r in found if r.kind == "package" and name in r.metrics}
        expected = {DISTRIBUTIONS[d] for d in _extra_dists(spec.extra) if DISTRIBUTIONS[d]} if spec.extra else set()
        assert expected <= packages, (name, expected - packages)
        for r in found:
            assert r.fix or r.present, (name, r)  # what is missing always says how to get it
            assert r.metrics and set(r.metrics) <= {name}


def _pyproject_extras() -> dict[str, list[str]]:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ImportError:
            pytest.skip("no TOML reader (tomllib is Python 3.11+; tomli is absent)")
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]


def test_extras_table_is_pyproject():
    extras = _pyproject_extras()
    for extra, deps in extras.items():
        if extra in ("all", "docs", "test"):
            continue
        # "capeval[clip,spice]" as it is; "ray[data]>=2.40,<3" -> "ray"
        names = tuple(d[:d.index("]") + 1] if d.startswith("capeval[") else re.match(r"[A-Za-z0-9_.-]+", d).group(0)
                      for d in deps)
        assert EXTRAS.get(extra) == names, extra
        for n in names:
            assert n.startswith("capeval[") or n in DISTRIBUTIONS, n


def test_options_read_from_source_equal_the_signatures():
    from capeval.options import option_types

    for name, spec in registry.metrics().items():
        try:
            types_ = option_types(spec)  # imports the scorer (torch for the CLIP family)
        except MissingDependencyError:
            continue
        assert init_options(spec.factory) == (None if types_ is None else set(types_)), name


def test_checking_imports_no_model_library(tmp_path):
    everything = ",".join(registry.metrics())
    code = (
        "import sys\n"
        "from capeval.cli.main import main\n"
        f"main(['check', '-m', {everything!r}, '-O', 'chair.annotations={tmp_path}', '-O', 'vela.perspective=desc'])\n"
        "import json\n"
        "print('LOADED', json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        f"{HEAVY!r} or m.startswith('capeval.metrics.clip_score') or m.startswith('capeval.models.regions.sam'))))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "src"), "CAPEVAL_CACHE": str(tmp_path / "c")})
    loaded = json.loads(run.stdout.rsplit("LOADED ", 1)[1])
    assert loaded == [], loaded
    assert "Traceback" not in run.stderr, run.stderr


def test_nltk_search_path_is_nltks(monkeypatch, tmp_path):
    monkeypatch.setenv("NLTK_DATA", str(tmp_path))
    code = ("import json, sys\nfrom capeval.requirements import nltk_search_path\nmine = nltk_search_path()\n"
            "assert 'nltk' not in sys.modules\nimport nltk\nprint(json.dumps([mine, nltk.data.path]))")
    if importlib.util.find_spec("nltk") is None:
        assert nltk_search_path()[0] == str(tmp_path)
        return
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    mine, theirs = json.loads(run.stdout)
    assert mine == theirs and mine[0] == str(tmp_path)


def test_python_check_raises_one_error_naming_everything(empty_cache):
    with pytest.raises(RequirementsMissing) as err:
        check(["clip-s", "chair-s"])
    text = str(err.value)
    assert "\n" not in text and isinstance(err.value, MissingDependencyError) and isinstance(err.value, ResourceError)
    parts = text.split(": ", 1)[1].split("; ")
    assert len(parts) == len(err.value.missing) >= 2
    assert any("openai/ViT-B-32: capeval download openai/ViT-B-32" in p for p in parts)
    assert any("chair.annotations" in p and "-O chair.annotations=DIR" in p for p in parts)
    # an object given as the option (a loaded backbone) needs nothing to be checked
    found = requirements(["clip-s"], {"clip-s": {"backbone": object()}})
    assert not any(r.kind == "checkpoint" for r in found)


def test_spacy_pipeline_hint_names_the_release_wheel_of_the_pinned_spacy():
    from capeval.metrics.amber.nouns import spacy_missing
    from capeval.models import spacy_pipelines as sp

    extras = _pyproject_extras()
    pin = next(d for d in extras["amber"] if d.startswith("spacy"))
    low, high = re.findall(r"(\d+)\.(\d+)", pin)
    allowed = {f"{low[0]}.{m}" for m in range(int(low[1]), int(high[1]))}
    assert allowed <= set(sp.PIPELINE_VERSIONS) and sp.PINNED_MINOR == max(allowed)
    sm = next(d for d in extras["spice"] if d.startswith("en-core-web-sm"))
    assert sm.split("==")[1] == sp.PIPELINE_VERSIONS[sp.PINNED_MINOR]  # the wheel pinned for SPICE fits too
    try:
        from importlib.metadata import version

        minor = ".".join(version("spacy").split(".")[:2])
    except Exception:
        minor = sp.PINNED_MINOR
    v = sp.PIPELINE_VERSIONS[minor]
    wheel = (f"pip install https://github.com/explosion/spacy-models/releases/download/en_core_web_lg-{v}/"
             f"en_core_web_lg-{v}-py3-none-any.whl")
    assert wheel in spacy_missing() and "python -m spacy download en_core_web_lg" in spacy_missing()
    assert "\n" not in spacy_missing()


# -- capeval download factual: no line of the hub client's own ------------------------------------


def _safetensors(tensors: dict[str, int]) -> bytes:
    """A safetensors file of float32 zero vectors (written by hand: no torch needed to make it)."""
    header, offset = {}, 0
    for name, n in tensors.items():
        header[name] = {"dtype": "F32", "shape": [n], "data_offsets": [offset, offset + 4 * n]}
        offset += 4 * n
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    return len(raw).to_bytes(8, "little") + raw + bytes(offset)


class _FakeHub(BaseHTTPRequestHandler):
    """The few endpoints of the Hugging Face hub that `capeval download factual` calls."""

    files: dict[str, bytes] = {}

    def log_message(self, *args):  # quiet
        pass

    def _send(self, body: bytes, head: bool, extra: dict[str, str] | None = None) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _route(self, head: bool) -> None:
        import hashlib

        if "/resolve/" in self.path:
            name = self.path.split("/resolve/")[1].split("/", 1)[1].split("?")[0]
            if name not in self.files:
                self.send_response(404)
                self.end_headers()
                return
            body = self.files[name]
            etag = '"' + hashlib.sha256(body).hexdigest() + '"'
            self._send(body, head, {"ETag": etag, "X-Repo-Commit": "a" * 40, "X-Linked-Etag": etag,
                                    "X-Linked-Size": str(len(body))})
        elif self.path.startswith("/api/models/") and "/tree/" in self.path:
            self._send(json.dumps([{"type": "file", "path": n, "size": len(b), "oid": "0" * 40}
                                   for n, b in self.files.items()]).encode(), head)
        elif self.path.startswith("/api/models/"):
            self._send(json.dumps({"id": "x", "sha": "a" * 40,
                                   "siblings": [{"rfilename": n} for n in self.files]}).encode(), head)
        else:
            self.send_response(404)
            self.end_headers()

    def do_GET(self):
        self._route(False)

    def do_HEAD(self):
        self._route(True)


def test_download_factual_prints_no_hub_progress_line(tmp_path):
    for module in ("huggingface_hub", "torch", "safetensors"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is absent: capeval download factual cannot run here")
    _FakeHub.files = {"config.json": json.dumps({"model_type": "t5"}).encode(), "tokenizer_config.json": b"{}",
                      "spiece.model": b"\x00" * 64, "model.safetensors": _safetensors({"shared.weight": 16})}
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeHub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE",
                                                                "HF_HUB_DISABLE_PROGRESS_BARS", "CAPEVAL_CHECKPOINTS")}
        env.update({"HF_ENDPOINT": f"http://127.0.0.1:{server.server_address[1]}", "HF_HOME": str(tmp_path / "hf"),
                    "CAPEVAL_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT / "src"),
                    "TQDM_POSITION": "-1"})  # the hub client's bars drawn even off a terminal, as on one
        run = subprocess.run([sys.executable, "-m", "capeval.cli", "download", "factual"], capture_output=True,
                             text=True, timeout=300, env=env)
    finally:
        server.shutdown()
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["name"] == "factual/flan-t5-base-VG-factual-sg"
    assert run.stderr == ""


def test_caption_score_checks_at_construction(tmp_path, monkeypatch):
    """CaptionScore says what is missing when it is built, not at the first update() (issue 47 item 6)."""
    pytest.importorskip("torchmetrics")
    from capeval.errors import MissingDependencyError, ResourceError
    from capeval.torchmetrics import CaptionScore

    monkeypatch.setenv("CAPEVAL_CACHE", str(tmp_path / "empty-cache"))
    with pytest.raises((MissingDependencyError, ResourceError)) as info:
        CaptionScore("clip-s")
    message = str(info.value)
    assert "\n" not in message and "openai/ViT-B-32" in message and "capeval download" in message
    CaptionScore("bleu-4")  # nothing to fetch: built as before
