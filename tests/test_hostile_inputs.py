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
import subprocess
import sys
from pathlib import Path

import pytest

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
