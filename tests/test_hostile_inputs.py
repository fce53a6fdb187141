"""Hostile and huge inputs (issue 25): each ends in one ``capeval:`` line on stderr, exit
status 2, no traceback and no partial output file, within bounded memory; and what is legal
but large (long captions, many items) is read.

Memory is bounded where it holds on any machine: the child runs under an address-space
limit (``RLIMIT_AS``, a safety net so that a regression fails instead of exhausting the
machine) and its own peak resident size (``ru_maxrss`` from ``wait4``) must stay under
500 MB. No timings: only a generous subprocess timeout.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
import typing
from pathlib import Path

import pytest

import capeval
from capeval import registry
from capeval.cli.main import main
from capeval.errors import InputError, MissingDependencyError, ResourceError

ROOT = Path(__file__).resolve().parents[1]
GB = 2**30
MB = 2**20


def _cli(args: list[str], cwd: Path, env: dict[str, str] | None = None, address_space: int = 3 * GB) -> tuple:
    """Run ``capeval`` in a child (under an address-space limit): (exit status, stdout, stderr)."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))

    full_env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1",
                    OPENBLAS_NUM_THREADS="1", **(env or {}))
    out, err = cwd / "_stdout", cwd / "_stderr"
    with open(out, "wb") as o, open(err, "wb") as e:
        proc = subprocess.Popen([sys.executable, "-m", "capeval.cli", *args], cwd=cwd, stdout=o, stderr=e,
                                env=full_env, preexec_fn=limit)  # noqa: PLW1509 - no threads here
        try:
            proc.wait(timeout=300)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    return proc.returncode, out.read_text(), err.read_text()


def _one_error_line(rc: int, stdout: str, stderr: str, *fragments: str) -> str:
    assert rc == 2, stderr
    assert "Traceback" not in stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("capeval: ")
    for f in fragments:
        assert f in lines[0], lines[0]
    assert stdout == ""
    return lines[0]


def _sparse(path: Path, size: int = 2 * GB) -> Path:
    with open(path, "wb") as f:
        f.truncate(size)  # a sparse file of zero bytes: no disk used
    return path


# ---------------------------------------------------------------------------
# Reading inputs: size and line limits, streaming, CSV quoting (issue 25, input rows)
# ---------------------------------------------------------------------------


@pytest.fixture
def peak_rss_child(tmp_path: Path):
    """Runs one CLI call in a fresh grandchild so its ``ru_maxrss`` is its own, not the
    largest of every child this test process ever had."""

    def run(args: list[str], env: dict[str, str] | None = None) -> tuple:
        code = (
            "import json, os, resource, subprocess, sys\n"
            "args, env, limit = json.loads(sys.argv[1])\n"
            "def pre():\n"
            "    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))\n"
            "p = subprocess.run([sys.executable, '-m', 'capeval.cli', *args], capture_output=True, text=True,\n"
            "                   env=dict(os.environ, **env), preexec_fn=pre, timeout=300)\n"
            "rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024\n"
            "print(json.dumps([p.returncode, p.stdout, p.stderr, rss]))\n"
        )
        full_env = {"PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1",
                    "OPENBLAS_NUM_THREADS": "1", **(env or {})}
        res = subprocess.run([sys.executable, "-c", code, json.dumps([args, full_env, 3 * GB])], cwd=tmp_path,
                             capture_output=True, text=True, timeout=400, check=False)
        assert res.returncode == 0, res.stderr
        return tuple(json.loads(res.stdout))

    return run


@pytest.mark.parametrize("suffix,fragment", [(".json", "bytes, more than the 268,435,456"),
                                             (".jsonl", "line 1: longer than 16,777,216 bytes"),
                                             (".csv", "line 1: longer than 16,777,216 bytes")])
@pytest.mark.parametrize("flag", ["-c", "--items"])
def test_2gb_file_of_zeros_fails_fast_in_bounded_memory(tmp_path: Path, peak_rss_child, suffix: str,
                                                         fragment: str, flag: str) -> None:
    path = _sparse(tmp_path / f"zeros{suffix}")
    inputs = ["-c", path.name, "-r", path.name] if flag == "-c" else ["--items", path.name]
    rc, out, err, rss = peak_rss_child(["score", "-q", "-m", "bleu-1", *inputs, "--per-item", "per_item.json"])
    line = _one_error_line(rc, out, err, path.name, fragment)
    assert "CAPEVAL_MAX_" in line  # says how to raise the limit
    assert rss < 500 * MB, rss
    assert not (tmp_path / "per_item.json").exists()


def test_dev_zero_fails_fast_in_bounded_memory(tmp_path: Path, peak_rss_child) -> None:
    rc, out, err, rss = peak_rss_child(["score", "-q", "-m", "bleu-1", "-c", "/dev/zero", "--per-item", "p.json"])
    _one_error_line(rc, out, err, "/dev/zero", "invalid JSON at line 1")
    assert rss < 500 * MB, rss
    assert not (tmp_path / "p.json").exists()


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".tsv"])
def test_dev_zero_read_as_lines_stops_at_the_line_limit(tmp_path: Path, peak_rss_child, suffix: str) -> None:
    (tmp_path / f"zero{suffix}").symlink_to("/dev/zero")
    rc, out, err, rss = peak_rss_child(["score", "-q", "-m", "bleu-1", "-c", f"zero{suffix}", "--max-line-bytes",
                                        "1048576"])
    _one_error_line(rc, out, err, f"zero{suffix}, line 1: longer than 1,048,576 bytes")
    assert rss < 500 * MB, rss


def test_fifo_json_is_read_up_to_the_limit_only(tmp_path: Path) -> None:
    """A FIFO has no size to check first: it is read up to the limit, then refused."""
    import threading

    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)

    def write() -> None:
        try:
            with open(fifo, "wb") as f:
                f.write(b"[" + b" " * 2**22)
        except BrokenPipeError:  # the reader gave up at the limit, as it should
            pass

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    rc, out, err = _cli(["score", "-q", "-m", "bleu-1", "-c", "pipe.json", "--max-json-bytes", "1048576"], tmp_path)
    _one_error_line(rc, out, err, "pipe.json: more than the 1,048,576 bytes a JSON document may have")
    writer.join(timeout=60)


def test_json_limit_is_an_option_with_a_range(tmp_path: Path) -> None:
    (tmp_path / "c.json").write_text(json.dumps({"1": "a dog runs"}), encoding="utf-8")
    (tmp_path / "r.json").write_text(json.dumps({"1": ["a dog is running"]}), encoding="utf-8")
    args = ["score", "-q", "-m", "bleu-1", "-c", "c.json", "-r", "r.json"]
    rc, out, err = _cli(args, tmp_path, env={"CAPEVAL_MAX_JSON_BYTES": "10"})
    _one_error_line(rc, out, err, "c.json: 19 bytes, more than the 10 a JSON document may have")
    rc, out, err = _cli([*args, "--max-json-bytes", "100"], tmp_path, env={"CAPEVAL_MAX_JSON_BYTES": "10"})
    assert rc == 0, err
    assert json.loads(out)["scores"]["bleu-1"] > 0
    for bad, fragment in (("0", "0 is out of range [1, 1,099,511,627,776]"), ("ten", "expected a whole number")):
        rc, out, err = _cli([*args, "--max-json-bytes", bad], tmp_path)
        _one_error_line(rc, out, err, "--max-json-bytes", fragment)
    rc, out, err = _cli(args, tmp_path, env={"CAPEVAL_MAX_LINE_BYTES": "-5"})
    _one_error_line(rc, out, err, "CAPEVAL_MAX_LINE_BYTES: -5 is out of range")


def test_csv_field_longer_than_the_csv_modules_limit_is_read(tmp_path: Path) -> None:
    """A caption of 200,000 characters (the csv module refuses fields over 131,072) is read:
    its scores equal those of the same captions given as JSON."""
    long = " ".join(["a dog runs on the grass"] * 8000)
    assert len(long) > 131_072
    cands = {"1": long, "2": "a cat sleeps"}
    refs = {"1": ["a dog is running on grass"], "2": ["a cat is sleeping"]}
    with open(tmp_path / "c.csv", "w", encoding="utf-8", newline="") as f:
        f.write("image_id,caption\n" + "".join(f'{i},"{c}"\n' for i, c in cands.items()))
    (tmp_path / "c.json").write_text(json.dumps(cands), encoding="utf-8")
    (tmp_path / "r.json").write_text(json.dumps(refs), encoding="utf-8")
    m = "bleu-4,rouge-l,cider-d"
    rc, _, err = _cli(["score", "-q", "-m", m, "-c", "c.csv", "-r", "r.json", "--per-item", "a.json"], tmp_path)
    assert rc == 0, err
    rc, _, err = _cli(["score", "-q", "-m", m, "-c", "c.json", "-r", "r.json", "--per-item", "b.json"], tmp_path)
    assert rc == 0, err
    assert (tmp_path / "a.json").read_text() == (tmp_path / "b.json").read_text()


@pytest.mark.parametrize("flag", ["-c", "--items"])
def test_csv_unterminated_quote_names_the_line_where_it_opened(tmp_path: Path, flag: str) -> None:
    header = "image_id,caption" if flag == "-c" else "id,candidate,references"
    rows = ['1,a dog runs', '2,"a cat sleeps', '3,a bird flies', '4,a fish swims'] if flag == "-c" else \
        ['1,a dog runs,a dog', '2,"a cat sleeps,a cat', '3,a bird flies,a bird']
    (tmp_path / "c.csv").write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    (tmp_path / "r.json").write_text(json.dumps({str(i): ["a thing"] for i in range(1, 5)}), encoding="utf-8")
    args = ["score", "-q", "-m", "bleu-1", "-c", "c.csv", "-r", "r.json"] if flag == "-c" else \
        ["score", "-q", "-m", "bleu-1", "--items", "c.csv"]
    rc, out, err = _cli([*args, "--per-item", "p.json"], tmp_path)
    _one_error_line(rc, out, err, "c.csv, line 3: a quoted field opened in this row is never closed")
    assert not (tmp_path / "p.json").exists()


def test_csv_text_after_a_closing_quote_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "c.csv").write_text('image_id,caption\n1,a dog\n2,"a cat" sleeps\n', encoding="utf-8")
    rc, out, err = _cli(["score", "-q", "-m", "bleu-1", "-c", "c.csv"], tmp_path)
    _one_error_line(rc, out, err, "c.csv, line 3: bad quoting")


# ---------------------------------------------------------------------------
# Large jobs on the local engine: streamed, results identical to the in-memory path
# ---------------------------------------------------------------------------


def _random_set(n: int, seed: int = 0) -> tuple[dict[str, str], dict[str, list[str]]]:
    import random

    rng = random.Random(seed)
    words = ["a", "the", "dog", "cat", "man", "woman", "runs", "sits", "on", "in", "grass", "red", "blue",
             "two", ".", ",", "street", "ball", "plays"]

    def caption() -> str:
        return " ".join(rng.choice(words) for _ in range(rng.randint(1, 12)))

    cands = {f"img{k}": caption() for k in range(n)}
    cands["img3"] = ""  # an empty candidate is legal
    refs = {i: [caption() for _ in range(rng.randint(1, 5))] for i in cands}
    return cands, refs


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_streamed_jobs_equal_the_in_memory_job(tmp_path: Path) -> None:
    """JSONL/CSV inputs and item tables (streamed, chunk by chunk, over worker processes)
    give the per-item and system results of the same items as JSON objects (read whole);
    the inputs that should stream do (and the shuffled references do not)."""
    cands, refs = _random_set(2500)
    (tmp_path / "c.json").write_text(json.dumps(cands), encoding="utf-8")
    (tmp_path / "r.json").write_text(json.dumps(refs), encoding="utf-8")
    _jsonl(tmp_path / "c.jsonl", [{"image_id": i, "caption": c} for i, c in cands.items()])
    _jsonl(tmp_path / "r.jsonl", [{"image_id": i, "references": r} for i, r in refs.items()])
    _jsonl(tmp_path / "items.jsonl", [{"id": i, "candidate": c, "references": refs[i]} for i, c in cands.items()])
    # references in another order: not streamable, read whole (same results)
    _jsonl(tmp_path / "r_shuffled.jsonl", [{"image_id": i, "references": r} for i, r in reversed(refs.items())])
    with open(tmp_path / "c.tsv", "w", encoding="utf-8", newline="") as f:
        f.write("image_id\tcaption\n" + "".join(f"{i}\t{c}\n" for i, c in cands.items()))
    import csv

    with open(tmp_path / "r.csv", "w", encoding="utf-8", newline="") as f:  # one row per reference
        w = csv.writer(f)
        w.writerow(["image_id", "reference"])
        w.writerows([i, r] for i, rs in refs.items() for r in rs)
    metrics = "bleu-4,rouge-l,cider-d"
    runs = {
        "json": ["-c", "c.json", "-r", "r.json"],
        "jsonl": ["-c", "c.jsonl", "-r", "r.jsonl"],
        "tsv": ["-c", "c.tsv", "-r", "r.jsonl"],
        "csv refs": ["-c", "c.jsonl", "-r", "r.csv"],
        "items": ["--items", "items.jsonl"],
        "shuffled": ["-c", "c.jsonl", "-r", "r_shuffled.jsonl"],
    }
    outputs = {}
    for name, args in runs.items():
        rc, out, err = _cli(["score", "-q", "-m", metrics, *args, "--per-item", f"{name}.json"], tmp_path)
        assert rc == 0, err
        outputs[name] = (json.loads(out)["results"], (tmp_path / f"{name}.json").read_text())
    for name in runs:
        assert outputs[name] == outputs["json"], name
    from capeval.io.text_stream import stream_caption_files, stream_item_tables

    for c, r in (("c.jsonl", "r.jsonl"), ("c.tsv", "r.jsonl"), ("c.jsonl", "r.csv")):
        stream = stream_caption_files(tmp_path / c, tmp_path / r)
        assert stream is not None and stream.ids == list(cands), (c, r)
        assert list(stream.items()) == [(i, c, refs[i]) for i, c in cands.items()]
    assert stream_caption_files(tmp_path / "c.jsonl", tmp_path / "r_shuffled.jsonl") is None
    assert stream_caption_files(tmp_path / "c.json", tmp_path / "r.json") is None
    stream = stream_item_tables([str(tmp_path / "items.jsonl")])
    assert stream is not None and list(stream.items()) == [(i, c, refs[i]) for i, c in cands.items()]


# ---------------------------------------------------------------------------
# Long captions: METEOR's memory is linear in the caption length (issue 25, 100k-word row)
# ---------------------------------------------------------------------------

_METEOR_REFS = ["a man riding a horse on a dirt road", "a person rides a brown horse down a path",
                "the rider is on horseback near some trees", "a man on horseback on a country road"]


def _long_caption(n: int, seed: int) -> str:
    """``n`` words drawn from the references' words and a few stems/synonyms of them, so
    that most words have exact, stem, synonym or paraphrase candidates in every reference."""
    import random

    rng = random.Random(seed)
    vocab = sorted({w for r in _METEOR_REFS for w in r.split()} | {"dog", "running", "rode", "horses", "men", "roads"})
    return " ".join(rng.choice(vocab) for _ in range(n))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_meteor_long_caption_equals_the_reference_implementation(seed: int) -> None:
    """The fast path against the line-by-line port of the Java aligner
    (``reference_segment_stats``), both ways round: a long hypothesis, a long reference."""
    from capeval.metrics.meteor.engine import Meteor15

    m = Meteor15()
    hyp = _long_caption(1500 + 500 * seed, seed)
    for h, refs in ((hyp, _METEOR_REFS), (_METEOR_REFS[seed], [hyp, _METEOR_REFS[3 - seed]])):
        fast = m.segment_stats(h, refs)
        ref = m.reference_segment_stats(h, refs)
        assert vars(fast) == vars(ref)


def test_meteor_100k_word_caption_in_bounded_memory(tmp_path: Path) -> None:
    """Scoring one 100,000-word caption adds less than 500 MB to the process's peak
    resident size (the quadratic version took 6.7 GB), under a 3 GB address-space limit;
    so does one of 100,000 distinct words (a bitmask per distinct word took 2 GB)."""
    code = (
        "import json, resource, sys\n"
        "sys.path.insert(0, sys.argv[2])\n"
        "from test_hostile_inputs import _METEOR_REFS, _long_caption\n"
        "from capeval.metrics.meteor.engine import Meteor15\n"
        "m = Meteor15()\n"
        "m.score(['a man riding a horse'], [_METEOR_REFS], workers=1)\n"
        "hyp = _long_caption(int(sys.argv[1]), 0)\n"
        "base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "_, items = m.score([hyp], [_METEOR_REFS], workers=1)\n"
        "m.score([' '.join(f'w{i}' for i in range(int(sys.argv[1])))], [_METEOR_REFS], workers=1)\n"
        "peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "print(json.dumps([(peak - base) * 1024, items[0]]))\n"
    )

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (3 * GB, 3 * GB))

    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1")
    res = subprocess.run([sys.executable, "-c", code, "100000", str(ROOT / "tests")], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=600, preexec_fn=limit, check=False)
    assert res.returncode == 0, res.stderr[-2000:]
    grown, score = json.loads(res.stdout.strip().splitlines()[-1])
    assert grown < 500 * MB, grown / MB
    assert 0.0 < score < 0.01


def test_rouge_lcs_of_a_long_caption_equals_the_reference_code_in_bounded_memory(tmp_path: Path) -> None:
    """ROUGE-L's bit-parallel LCS equals pycocoevalcap's ``my_lcs`` (its O(|a||b|) table)
    on random small inputs either way round, and on a 100,000-word caption of distinct
    words against a short reference adds less than 100 MB to a fresh process's peak (the
    masks are over the shorter sequence; over the longer one it took 640 MB)."""
    import random

    from pycocoevalcap.rouge.rouge import my_lcs

    from capeval.metrics.rouge import lcs_length

    rng = random.Random(0)
    for _ in range(300):
        a = [rng.choice("abcde") for _ in range(rng.randrange(0, 30))]
        b = [rng.choice("abcde") for _ in range(rng.randrange(0, 30))]
        expected = my_lcs(a, b) if a and b else 0
        assert lcs_length(a, b) == lcs_length(b, a) == expected, (a, b)
    code = (
        "import json, resource\n"
        "from capeval.metrics.rouge import lcs_length\n"
        "a = [str(i) for i in range(100000)]\n"
        "b = 'a man riding a horse'.split() + a[7:19] + ['x', '99999']\n"
        "base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "n = lcs_length(a, b) + lcs_length(b, a)\n"
        "print(json.dumps([(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) * 1024, n]))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    res = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=300, check=False)
    assert res.returncode == 0, res.stderr[-2000:]
    grown, n = json.loads(res.stdout)
    assert n == 2 * 13
    assert grown < 100 * MB, grown / MB


# ---------------------------------------------------------------------------
# options and CLI
# ---------------------------------------------------------------------------

EXAMPLES = ROOT / "examples"
CANDS = str(EXAMPLES / "candidates.json")
REFS = str(EXAMPLES / "references.json")


def _cli_in(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _one_line(code: int, out: str, err: str, expected: str | None = None) -> str:
    assert code == 2, (code, err)
    assert out == "" and "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("capeval: error: "), err
    if expected is not None:
        assert lines[0] == expected
    return lines[0]


@pytest.mark.parametrize("option, expected", [
    ("n=0", "option cider-d.n=0 out of range: n must be an integer >= 1"),
    ("n=-1", "option cider-d.n=-1 out of range: n must be an integer >= 1"),
    ("sigma=0", "option cider-d.sigma=0 out of range: sigma must be a number > 0"),
    ("sigma=-1", "option cider-d.sigma=-1 out of range: sigma must be a number > 0"),
])
def test_numeric_option_out_of_range(capsys, tmp_path, option, expected):
    out = tmp_path / "out.json"
    res = _cli_in(capsys, "score", "-m", "cider-d", "-O", f"cider-d.{option}", "-c", CANDS, "-r", REFS, "-q", "-o", str(out))
    _one_line(*res, "capeval: error: " + expected)
    assert not out.exists()
    with pytest.raises(InputError, match="out of range"):  # the library checks the same table
        capeval.score({"1": "a dog"}, {"1": ["a dog"]}, metrics="cider-d", cider_d={option.split("=")[0]: 0})


def _numeric(hint) -> bool:
    from capeval.options import accepts_value

    return hint is not typing.Any and (accepts_value(hint, 3) is True or accepts_value(hint, 0.5) is True)


def test_every_numeric_option_of_every_metric_has_a_range_and_its_default_is_inside():
    from capeval.options import option_defaults, option_types
    from capeval.ranges import METRIC_RANGES, metric_range

    seen: dict[str, set[str]] = {}
    missing, outside = [], []
    for spec in registry.metrics().values():
        if spec.group in seen:
            continue
        try:
            types_ = option_types(spec) or {}
            defaults = option_defaults(spec)
        except MissingDependencyError:
            pytest.skip(f"{spec.group}: extra not installed, its options cannot be read")
        seen[spec.group] = set(types_)
        for opt, hint in types_.items():
            if not _numeric(hint):
                continue
            rng = metric_range(spec.group, opt)
            if rng is None:
                missing.append(f"{spec.group}.{opt}")
            elif isinstance(defaults.get(opt), (int, float)) and not isinstance(defaults.get(opt), bool) \
                    and not rng.accepts(defaults[opt]):
                outside.append(f"{spec.group}.{opt}={defaults[opt]}")
    assert not missing, f"numeric options without a declared range: {missing}"
    assert not outside, f"defaults outside their declared range: {outside}"
    stale = [f"{g}.{o}" for g, opts in METRIC_RANGES.items() for o in opts if o not in seen.get(g, set())]
    assert not stale, f"ranges declared for options that do not exist: {stale}"


@pytest.fixture
def no_bench(monkeypatch):
    import capeval.bench

    def refuse(*a, **k):
        raise AssertionError("the benchmark run started although the error was knowable up front")

    monkeypatch.setattr(capeval.bench, "run", refuse)


def test_bench_confidence_refused_before_any_work(capsys, tmp_path, no_bench):
    out = tmp_path / "out.json"
    res = _cli_in(capsys, "bench", "pascal-50s", "-m", "bleu-1", "--confidence", "2", "-o", str(out))
    _one_line(*res, "capeval: error: --confidence 2.0 out of range: confidence must be a number in (0, 1)")
    assert not out.exists()


@pytest.mark.parametrize("option, expected", [
    ("pascal-50s.refz=fixed", "bench option pascal-50s.refz: pascal-50s has no loader option 'refz'; valid loader "
                              "options for pascal-50s: draws, nrefs, refs"),
    ("foo.bar=1", "bench option foo.bar: unknown benchmark 'foo'"),
    ("pascal-50s.draws=0", "bench option pascal-50s.draws=0 out of range: draws must be an integer >= 1"),
])
def test_bench_loader_option_typo_refused(capsys, tmp_path, no_bench, option, expected):
    out = tmp_path / "out.json"
    line = _one_line(*_cli_in(capsys, "bench", "pascal-50s", "-m", "bleu-1", "-B", option, "-o", str(out)))
    assert line.startswith("capeval: error: " + expected), line
    assert not out.exists()


def test_backbone_with_text_metrics_only_refused(capsys, tmp_path):
    out = tmp_path / "out.json"
    res = _cli_in(capsys, "score", "-m", "bleu-1", "--backbone", "openai/ViT-B-32", "-c", CANDS, "-r", REFS, "-o", str(out))
    _one_line(*res, "capeval: error: --backbone given, but none of the metrics bleu-1 uses a model")
    assert not out.exists()


def test_score_takes_the_keyword_options_the_evaluator_takes():
    cands, refs = json.loads(Path(CANDS).read_text()), json.loads(Path(REFS).read_text())
    got = capeval.score(cands, refs, metrics="cider-d", cider_d={"sigma": 3.0})
    want = capeval.Evaluator("cider-d", cider_d={"sigma": 3.0}).score(cands, refs)
    default = capeval.score(cands, refs, metrics="cider-d")
    assert got["cider-d"].items == want["cider-d"].items and str(got["cider-d"].signature) == str(want["cider-d"].signature)
    assert "sigma:3.0" in str(got["cider-d"].signature) and got["cider-d"].items != default["cider-d"].items
    with pytest.raises(InputError, match="given twice"):
        capeval.score(cands, refs, metrics="cider-d", options={"cider-d": {"sigma": 6.0}}, cider_d={"sigma": 3.0})


def test_score_metrics_none_is_the_default_preset(monkeypatch):
    from capeval import evaluator

    built = []
    monkeypatch.setattr(evaluator.Evaluator, "_build", lambda self, spec, members, opts: built.append(spec.group))
    monkeypatch.setattr(evaluator.Evaluator, "score", lambda self, *a, **k: self.names)
    assert capeval.score({"1": "a"}, {"1": ["a"]}, metrics=None) == registry.expand("coco")
    with pytest.raises(InputError, match="metrics must be"):
        capeval.score({"1": "a"}, {"1": ["a"]}, metrics=3)


def _flickr_inputs(tmp_path: Path, shared_data: Path) -> tuple[str, str]:
    caps: dict[str, list[str]] = {}
    for line in (shared_data / "flickr8k" / "Flickr8k.token.txt").read_text(encoding="utf-8").splitlines():
        key, _, cap = line.partition("\t")
        caps.setdefault(key.split("#")[0], []).append(cap)
    c, r = tmp_path / "c.json", tmp_path / "r.json"
    c.write_text(json.dumps({k: v[0] for k, v in caps.items()}))
    r.write_text(json.dumps({k: v[1:] for k, v in caps.items()}))
    return str(c), str(r)


def test_sigterm_during_meteor_workers(tmp_path, shared_data):
    psutil = pytest.importorskip("psutil")
    c, r = _flickr_inputs(tmp_path, shared_data)
    capeval.score({"1": "a dog"}, {"1": ["a dog"]}, metrics="meteor")  # the session's METEOR index, built first
    out = tmp_path / "out.json"
    env = dict(os.environ, PYTHONPATH=str(Path(capeval.__file__).parents[1]))
    proc = subprocess.Popen([sys.executable, "-m", "capeval.cli", "score", "-m", "meteor", "-O", "meteor.workers=2",
                             "-c", c, "-r", r, "-q", "-o", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    parent = psutil.Process(proc.pid)
    deadline = time.monotonic() + 120
    children = []
    while time.monotonic() < deadline and proc.poll() is None:
        children = parent.children(recursive=True)
        if len(children) >= 2:
            break
        time.sleep(0.05)
    assert len(children) >= 2, "the METEOR workers never started"
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 143
    assert stderr == "capeval: interrupted\n" and stdout == ""
    gone, alive = psutil.wait_procs(children, timeout=10)
    assert not alive
    assert not out.exists()


def test_unusable_cache_folder_is_named(tmp_path):
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("x")
    env = dict(os.environ, CAPEVAL_CACHE=str(not_a_folder), PYTHONPATH=str(Path(capeval.__file__).parents[1]))
    res = subprocess.run([sys.executable, "-m", "capeval.cli", "score", "-m", "meteor", "-c", CANDS, "-r", REFS, "-q"],
                         capture_output=True, text=True, env=env)
    assert res.returncode == 2 and res.stdout == "" and "Traceback" not in res.stderr
    assert res.stderr.splitlines()[-1] == (f"capeval: error: capeval cache folder {not_a_folder} is not a folder; "
                                           "set CAPEVAL_CACHE to a writable folder")
    from capeval.paths import make_cache_folder

    with pytest.raises(ResourceError, match="CAPEVAL_CACHE"):
        make_cache_folder(not_a_folder / "sub")


@pytest.mark.slow
def test_ray_shard_dir_of_another_job_refused_and_worker_death_names_resume(tmp_path):
    ray = pytest.importorskip("ray")
    from capeval.engines.ray_engine import score_ray

    cands = {str(i): f"a dog runs {i}" for i in range(40)}
    refs = {k: ["a dog is running", "the dog runs"] for k in cands}
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        score_ray(cands, refs, "bleu-4", batch_size=10, out_dir=tmp_path / "a")
        shards = sorted(p.name for p in (tmp_path / "a").iterdir())
        with pytest.raises(InputError, match=r"holds the shards of another job .*--overwrite"):
            score_ray({k: v + " fast" for k, v in cands.items()}, refs, "bleu-4", batch_size=10, out_dir=tmp_path / "a")
        assert sorted(p.name for p in (tmp_path / "a").iterdir()) == shards  # nothing deleted
        score_ray({k: v + " fast" for k, v in cands.items()}, refs, "bleu-4", batch_size=10,
                  out_dir=tmp_path / "a", overwrite=True)
        with pytest.raises(ResourceError, match="run again with --resume"):
            score_ray(cands, refs, "bleu-4", batch_size=10, out_dir=tmp_path / "b", _fault=(1, str(tmp_path / "m")))
    finally:
        ray.shutdown()


@pytest.mark.slow
def test_ray_driver_killed_leaves_no_process(tmp_path, shared_data):
    psutil = pytest.importorskip("psutil")
    pytest.importorskip("ray")
    if not Path("/proc/self/environ").exists():
        pytest.skip("the leftover sweep reads /proc (Linux)")
    c, r = _flickr_inputs(tmp_path, shared_data)
    capeval.score({"1": "a dog"}, {"1": ["a dog"]}, metrics="meteor")  # the session's METEOR index, built first
    env = dict(os.environ, PYTHONPATH=str(Path(capeval.__file__).parents[1]))
    proc = subprocess.Popen([sys.executable, "-m", "capeval.cli", "score", "-m", "meteor", "-c", c, "-r", r, "-q",
                             "--engine", "ray", "--shard-size", "200"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    parent = psutil.Process(proc.pid)
    deadline = time.monotonic() + 180
    tree: list = []
    while time.monotonic() < deadline and proc.poll() is None:
        tree = parent.children(recursive=True)
        names = []
        for p in tree:
            try:
                names.append(p.name())
            except psutil.Error:
                pass
        if any(n.startswith("ray::ShardWorker") for n in names) and any("Agent" in n for n in names):
            break
        time.sleep(0.2)
    else:
        pytest.fail("the Ray actors never started")
    tree = parent.children(recursive=True)
    proc.kill()
    proc.wait()
    _, alive = psutil.wait_procs(tree, timeout=30)
    alive = [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not alive, [p.name() for p in alive]
# Long captions through the whole `coco` preset: every metric bounded; SPICE's parser, whose
# time grows faster than linearly, leaves an item over max_words out with its reason
# ---------------------------------------------------------------------------


def _spice_scorer(**options):
    pytest.importorskip("spacy")
    from capeval.metrics.spice.scorer import Spice

    try:
        return Spice(**options)
    except Exception as exc:  # noqa: BLE001 - the English model is part of the spice extra
        pytest.skip(f"SPICE's parser cannot load here: {exc}")


def test_spice_leaves_an_item_over_max_words_out_with_its_reason() -> None:
    cands = {"a": "a dog runs on the grass", "b": "two people ride bikes down a long busy street", "c": "a cat"}
    refs = {"a": ["a dog running on grass"], "b": ["cyclists on a street"], "c": ["a cat sleeps on a very warm mat"]}
    whole = _spice_scorer(max_words=None).score(cands, refs)["spice"]
    capped = _spice_scorer(max_words=6).score(cands, refs)["spice"]
    # b's candidate (9 words) and c's reference (8 words) are over 6: left out, never truncated
    assert capped.skipped == ("b", "c") and dict(capped.items) == {"a": whole.items["a"]}
    assert capped.extras["errors"] == {
        "b": "candidate of 9 words is longer than spice max_words=6 (-O spice.max_words=N raises it)",
        "c": "reference of 8 words is longer than spice max_words=6 (-O spice.max_words=N raises it)"}
    assert capped.system == whole.items["a"] and "max_words:6" in str(capped.signature)
    assert "max_words:none" in str(whole.signature)


@pytest.mark.parametrize("value", ["0", "-3", "10000001"])
def test_spice_max_words_out_of_range_is_refused_before_any_work(tmp_path: Path, value: str) -> None:
    (tmp_path / "c.json").write_text(json.dumps({"a": "a dog"}))
    (tmp_path / "r.json").write_text(json.dumps({"a": ["a dog runs"]}))
    rc, out, err = _cli(["score", "-m", "spice", "-c", "c.json", "-r", "r.json", "-O", f"spice.max_words={value}",
                         "--per-item", "p.json"], tmp_path)
    _one_error_line(rc, out, err, "max_words")
    assert not (tmp_path / "p.json").exists()


def test_coco_preset_on_a_100k_word_caption_is_bounded(tmp_path: Path, peak_rss_child) -> None:
    """`capeval score -m coco` with one 100,000-word candidate: every metric scores it within
    bounded memory except SPICE, which reports it (one stderr line, ``skipped``, the reason)."""
    _spice_scorer()
    import random

    rng = random.Random(0)
    words = "a man riding horse dog the on with in red blue street grass two people".split()
    cands = {"long": " ".join(rng.choice(words) for _ in range(100_000)), "short": "a dog runs on the grass"}
    refs = {"long": ["a man riding a horse", "a person on a horse"], "short": ["a dog running on grass", "a dog"]}
    (tmp_path / "c.json").write_text(json.dumps(cands))
    (tmp_path / "r.json").write_text(json.dumps(refs))
    rc, out, err, rss = peak_rss_child(["score", "-m", "coco", "-c", "c.json", "-r", "r.json"])
    assert rc == 0, err
    assert "Traceback" not in err
    assert [line for line in err.splitlines() if "max_words" in line] == [
        "capeval: spice: item 'long': candidate of 100000 words is longer than spice max_words=10000 "
        "(-O spice.max_words=N raises it)"]
    results = {r["metric"]: r for r in json.loads(out)["results"]}
    assert results["spice"]["n"] == 1 and results["spice"]["skipped"] == ["long"]
    assert all(r["n"] == 2 and "skipped" not in r for m, r in results.items() if m != "spice")
    assert rss < 1 * GB, rss / MB


# ---------------------------------------------------------------------------
# issue 35, second round: the METEOR index (altered in place; disk full while building)
# ---------------------------------------------------------------------------


def _session_meteor_index() -> Path:
    from capeval.metrics.meteor import Meteor15

    pytest.importorskip("pycocoevalcap")
    return Meteor15().resources.index_dir  # the session's index (built once per session)


def test_meteor_index_altered_in_place_with_size_and_mtime_kept_is_detected(tmp_path: Path) -> None:
    """Bytes of an index file changed in place, its size and mtime put back: the CRC-32 check
    run at every load finds it, and the CLI rebuilds the index and gives the right score."""
    import shutil

    from capeval.metrics.meteor import resources as meteor_resources

    cache = tmp_path / "cache"
    index = cache / "meteor-1.5"
    shutil.copytree(_session_meteor_index(), index, copy_function=shutil.copy)
    sources = meteor_resources.source_paths()
    assert meteor_resources.usable(index, sources)[1] is None  # a copy is fine (its mtimes are recorded)
    target = index / "para_entries.npy"
    st = target.stat()
    with open(target, "r+b") as f:  # swap two 4 KB blocks in the middle of the paraphrase entries
        mid = st.st_size // 2
        f.seek(mid)
        a = f.read(4096)
        b = f.read(4096)
        assert a != b
        f.seek(mid)
        f.write(b + a)
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert target.stat().st_size == st.st_size and target.stat().st_mtime_ns == st.st_mtime_ns
    assert meteor_resources.index_problem(index, sources) is None  # size and mtime alone cannot tell
    res, why = meteor_resources.usable(index, sources)
    assert res is None and why == "index file para_entries.npy changed content"
    with pytest.raises(ResourceError, match="para_entries.npy changed content"):
        meteor_resources.load(index, auto_prepare=False)
    rc, out, err = _cli(["score", "-m", "meteor", "-c", CANDS, "-r", REFS, "-q"], tmp_path,
                        {"CAPEVAL_CACHE": str(cache)})
    assert rc == 0, err
    assert "Traceback" not in err and "para_entries.npy changed content" in err  # the rebuild is announced
    assert json.loads(out)["scores"]["meteor"] == 0.2805079484001792  # the README example's score
    assert meteor_resources.index_problem(index, sources, verify=True) is None


@pytest.mark.parametrize("failure", ["short write", "ENOSPC"])
def test_disk_full_while_building_the_meteor_index_is_one_line(tmp_path: Path, capsys, monkeypatch, failure) -> None:
    """The disk fills up while the index's arrays are written: one line naming the folder and
    "no space left", exit 2, no temporary folder left behind. numpy reports a full disk in
    ``tofile`` as a short write without an errno (the first case); ``write`` as ENOSPC."""
    import errno

    import numpy as np

    _session_meteor_index()  # the sources exist
    cache = tmp_path / "cache"
    monkeypatch.setenv("CAPEVAL_CACHE", str(cache))
    real_save = np.save
    calls = []

    def full_disk(file, arr, *args, **kwargs):
        calls.append(file)
        if len(calls) < 3:  # the first arrays fit
            return real_save(file, arr, *args, **kwargs)
        Path(file).write_bytes(b"\x93NUMPY" + bytes(31738))
        if failure == "ENOSPC":
            raise OSError(errno.ENOSPC, "No space left on device", str(file))
        raise OSError("89302 requested and 31744 written")

    monkeypatch.setattr(np, "save", full_disk)
    code, out, err = _cli_in(capsys, "score", "-m", "meteor", "-c", CANDS, "-r", REFS, "-q")
    notice, _, rest = err.partition("\n")  # the one-time build is announced first
    assert notice.startswith("[capeval meteor] preparing METEOR 1.5 resources"), err
    line = _one_line(code, out, rest)
    assert line == (f"capeval: error: no space left on the device of {cache} to build the METEOR 1.5 index "
                    "(about 150 MB); free some space there or point CAPEVAL_CACHE to another folder")
    assert len(calls) == 3
    assert sorted(p.name for p in cache.iterdir()) == [".meteor-1.5.lock"]  # no partial index, no temporary folder
