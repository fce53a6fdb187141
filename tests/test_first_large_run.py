"""Issue 47, item 9: the first large run builds METEOR's index and kernel beside the job
(``capeval.metrics.meteor.ahead``), each once, never half.

No timings. Builds are counted across processes: a ``sitecustomize`` put first on the
children's ``PYTHONPATH`` logs every index build (``index_build._build_into``) and every
kernel compile (``kernel_child._compile_locked``) with the process that ran it, so the tests
see which process built what: the job's own processes (the CLI and its forked workers) or the
children started beside it. The rest checks what a started build hands over (the builders'
lock, the child that ``kernel_build.build`` waits for) and that an interrupted build leaves
nothing that a later job could use half-made.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import json
import os
import shutil
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

from capeval.metrics.meteor import ahead, index_build, kernel_build, kernel_child
from capeval.metrics.meteor.index_format import index_problem, source_paths, try_build_lock

from _reference import require_module, unavailable

ROOT = Path(__file__).resolve().parents[1]

#: logs each build as "<what> <pid> <ppid> <argv[0]>" to $BUILD_LOG (test-only, on PYTHONPATH)
_SITECUSTOMIZE = '''
import os, sys
_log_path = os.environ.get("BUILD_LOG")
if _log_path:
    def _logged(what, fn):
        def wrapper(*args, **kwargs):
            with open(_log_path, "a", encoding="utf-8") as f:
                f.write(f"{what} {os.getpid()} {os.getppid()} {sys.argv[0] if sys.argv else ''}\\n")
            return fn(*args, **kwargs)
        return wrapper
    import capeval.metrics.meteor.index_build as _ib
    import capeval.metrics.meteor.kernel_child as _kb
    _ib._build_into = _logged("index", _ib._build_into)
    _kb._compile_locked = _logged("kernel", _kb._compile_locked)
    if os.environ.get("JIT_MIN_ITEMS"):  # a "large" job of a few thousand items
        import capeval.metrics.meteor.jit_align as _ja
        _ja.JIT_MIN_ITEMS = int(os.environ["JIT_MIN_ITEMS"])
'''


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """The environment of a job on an empty cache, with the build log."""
    require_module("pycocoevalcap", "pycocoevalcap==1.2 holds the METEOR 1.5 resources (test extra)")
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(_SITECUSTOMIZE, encoding="utf-8")
    path = os.pathsep.join(p for p in [str(hook), str(ROOT / "src"), os.environ.get("PYTHONPATH", "")] if p)
    return {**os.environ, "PYTHONPATH": path, "CAPEVAL_CACHE": str(tmp_path / "cache"),
            "BUILD_LOG": str(tmp_path / "builds.log")}


def _builds(env: dict[str, str]) -> list[tuple[str, int, int, str]]:
    path = Path(env["BUILD_LOG"])
    if not path.exists():
        return []
    rows = [line.split(" ", 3) for line in path.read_text(encoding="utf-8").splitlines()]
    return [(what, int(pid), int(ppid), argv) for what, pid, ppid, argv in rows]


def _score(env: dict[str, str], cands: Path, refs: Path, out: Path, *options: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "capeval.cli", "score", "-m", "coco-ngram", "-c", str(cands),
                             "-r", str(refs), "-q", "--per-item", str(out), *options], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(proc: subprocess.Popen) -> tuple[str, str]:
    out, err = proc.communicate(timeout=900)
    assert proc.returncode == 0, err
    return out, err


def _large_set(tmp_path: Path) -> tuple[Path, Path]:
    """The README example's items repeated under new ids: more items than the size from which a
    job with no index builds it (no other data needed)."""
    cands = json.loads((ROOT / "examples" / "candidates.json").read_text(encoding="utf-8"))
    refs = json.loads((ROOT / "examples" / "references.json").read_text(encoding="utf-8"))
    c: dict[str, str] = {}
    r: dict[str, list[str]] = {}
    k = 0
    while len(c) <= ahead.INDEX_AHEAD_ITEMS + 50:
        for i in cands:
            c[f"{i}~{k}"], r[f"{i}~{k}"] = cands[i], refs[i]
        k += 1
    pc, pr = tmp_path / "large_cands.json", tmp_path / "large_refs.json"
    pc.write_text(json.dumps(c), encoding="utf-8")
    pr.write_text(json.dumps(r), encoding="utf-8")
    return pc, pr


def _small_then_large(env: dict[str, str], tmp_path: Path, *options: str) -> tuple[subprocess.Popen, str]:
    """The README example on the empty cache (it scans, builds nothing), then the large set
    with ``options``; (the large job's finished process, its stderr)."""
    _finish(_score(env, ROOT / "examples" / "candidates.json", ROOT / "examples" / "references.json",
                   tmp_path / "small.json"))
    assert _builds(env) == []  # the small run only scanned
    assert sorted(p.name for p in Path(env["CAPEVAL_CACHE"]).iterdir()) == [".meteor-1.5.scanned"]
    proc = _score(env, *_large_set(tmp_path), tmp_path / "first.json", *options)
    _, err = _finish(proc)
    return proc, err


def _warm_rerun_equals(env: dict[str, str], tmp_path: Path, *options: str) -> None:
    """The same large job again, now warm: no build, no notice, the same per-item file."""
    n = len(_builds(env))
    _, err = _finish(_score(env, *_large_set(tmp_path), tmp_path / "warm.json", *options))
    assert "preparing" not in err and len(_builds(env)) == n
    assert (tmp_path / "first.json").read_bytes() == (tmp_path / "warm.json").read_bytes()


def test_small_then_large_run_builds_the_index_once_beside_the_job(env: dict[str, str], tmp_path: Path) -> None:
    """After a small first run, the first large job starts the index build as a child of its
    own (announced in one line) and its workers wait for it: exactly one build, in that child."""
    proc, err = _small_then_large(env, tmp_path, "-O", "meteor.compiled=false")
    builds = _builds(env)
    assert [(what, ppid, argv) for what, _, ppid, argv in builds] == [("index", proc.pid, "-c")], builds
    notices = [line for line in err.splitlines() if "preparing METEOR 1.5 resources" in line]
    assert len(notices) == 1 and notices[0].endswith("one-time, beside the job"), err
    cache = Path(env["CAPEVAL_CACHE"])
    assert index_problem(cache / "meteor-1.5", source_paths()) is None
    assert not [p for p in cache.iterdir() if p.name.endswith(".tmp") or ".old-" in p.name]
    _warm_rerun_equals(env, tmp_path, "-O", "meteor.compiled=false")


def _compiler() -> None:
    require_module("numba", "numba compiles METEOR's beam search (the fast extra)")
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        unavailable("no C compiler: numba.pycc cannot build the kernel ahead of time")


def test_small_then_large_run_builds_index_and_kernel_together(env: dict[str, str], tmp_path: Path) -> None:
    """With numba, default options: the first large job (the kernel's size lowered to 1,000
    items for the test) starts the index's and the kernel's builds as children of its own, once
    each, scores its chunks with the Python code until the kernel is in place, and waits for the
    build at its end: the module is there, verified, and no warning. Its scores are the Python
    code's, byte for byte."""
    _compiler()
    env = {**env, "JIT_MIN_ITEMS": "1000"}
    proc, err = _small_then_large(env, tmp_path)
    builds = sorted((what, ppid, argv) for what, _, ppid, argv in _builds(env))
    assert builds == [("index", proc.pid, "-c"), ("kernel", proc.pid, "-c")], builds
    assert "warning" not in err.lower(), err
    where = Path(env["CAPEVAL_CACHE"]) / "kernels"
    assert kernel_build.check(where) == ("ok", None)
    assert not [p for p in where.iterdir() if p.name.startswith(".build-") or p.name.endswith(".failed")]
    _warm_rerun_equals(env, tmp_path)
    python = _score(env, *_large_set(tmp_path), tmp_path / "python.json", "-O", "meteor.compiled=false")
    _finish(python)
    assert (tmp_path / "python.json").read_bytes() == (tmp_path / "first.json").read_bytes()


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with the real kernel module and its record, built once for this file."""
    _compiler()
    where = tmp_path_factory.mktemp("built") / "kernels"
    assert kernel_build.build(where) is None
    return where


def test_the_kernel_is_built_without_the_typed_container_helpers(built: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The module is built without numba's typed dict/list/set C helpers (a quarter of a
    build's CPU), which it never calls; where such a module would not link (another numba),
    the child builds it again with them."""
    module = kernel_build.built_path(built)
    assert b"numba_dict_new_sized" not in module.read_bytes() and kernel_child._links(module)
    calls: list[Path] = []
    monkeypatch.setattr(kernel_child, "_links", lambda path: calls.append(path) and False)
    where = tmp_path / "kernels"
    where.mkdir(mode=0o755)
    kernel_child._compile_locked(str(where), kernel_build.module_name())
    assert len(calls) == 1  # the lean module was refused, the whole set built
    assert b"numba_dict_new_sized" in kernel_build.built_path(where).read_bytes()
    assert kernel_build.check(where) == ("ok", None)
    assert not [p for p in where.iterdir() if p.name.startswith(".build-")]


def test_chunks_pick_the_kernel_up_once_it_is_in_place_with_its_record(built: Path, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A job that did not wait for the kernel's build (compiled=None, chunks) switches to it
    only once the module and its sha256 record are both in place: a module moved in before its
    record (what the build child does) is neither loaded nor removed. Same statistics."""
    from capeval.metrics.meteor import Meteor15, fast_align, jit_align

    require_module("pycocoevalcap", "pycocoevalcap==1.2 holds the METEOR 1.5 resources (test extra)")
    where = tmp_path / "kernels"
    where.mkdir(mode=0o755)
    monkeypatch.setattr(kernel_build, "folder", lambda: where)
    monkeypatch.setattr(jit_align, "_kernel", None)
    monkeypatch.setattr(jit_align, "kind", None)
    meteor = Meteor15(tmp_path / "cache" / "meteor-1.5")  # the scan path: nothing is built here
    hyps, refs = ["a dog runs on the grass", "two men ride bikes"], [["the dog is running"], ["men on bicycles"]]
    want = meteor.score(hyps, refs, workers=1)
    meteor._kernel_later = True
    meteor.pick_up_kernel()
    assert meteor._finish is fast_align.finish and meteor._kernel_later  # nothing there yet
    module = kernel_build.built_path(where)
    shutil.copy2(kernel_build.built_path(built), module)  # moved in; its record comes next
    meteor.pick_up_kernel()
    assert meteor._finish is fast_align.finish and module.exists() and jit_align.kind is None
    shutil.copy2(kernel_build.digest_path(built), kernel_build.digest_path(where))
    meteor.pick_up_kernel()
    assert meteor._finish is jit_align.finish and not meteor._kernel_later and jit_align.kind == "built"
    assert meteor.score(hyps, refs, workers=1) == want


# -- the index child: the lock is handed over, an interrupted build leaves nothing ----------------


@pytest.fixture
def index_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    require_module("pycocoevalcap", "pycocoevalcap==1.2 holds the METEOR 1.5 resources (test extra)")
    monkeypatch.setattr(ahead, "_index", {})
    return tmp_path / "cache" / "meteor-1.5"


def test_a_started_index_build_holds_the_lock_and_a_job_waits_for_it(index_dir: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """From the moment start_index returns, the builders' lock is held (by the child), so a
    prepare() in the job waits and finds the index built: it never builds (nor reads a
    half-written index) itself."""
    assert ahead.start_index(index_dir)
    assert ahead.started(index_dir)
    with try_build_lock(index_dir) as free:
        assert not free  # handed to the child before start_index returned
    assert not ahead.start_index(index_dir)  # never a second child for one folder

    def second_build(*args, **kwargs):
        raise AssertionError("the job built the index although a child was building it")

    monkeypatch.setattr(index_build, "_build_into", second_build)
    assert index_build.prepare(index_dir) == index_dir
    assert index_problem(index_dir, source_paths()) is None
    proc, _ = ahead._index[str(index_dir)]
    ahead.reap()
    assert proc.returncode == 0 and not ahead.started(index_dir)
    with try_build_lock(index_dir) as free:
        assert free  # released with the child


def test_an_interrupted_index_build_leaves_no_half_index(index_dir: Path) -> None:
    """A job that ends (an error, Ctrl-C) while its index child builds interrupts it: no
    temporary folder, no index, a free lock; the next job builds it whole."""
    assert ahead.start_index(index_dir)
    proc, _ = ahead._index[str(index_dir)]
    ahead._at_exit()
    assert proc.returncode is not None
    folder = index_dir.parent
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp") or ".old-" in p.name]
    # interrupted before it published (the build takes seconds), or whole
    assert not index_dir.exists() or index_problem(index_dir, source_paths()) is None
    with try_build_lock(index_dir) as free:
        assert free


def test_two_large_jobs_at_once_build_the_index_once(env: dict[str, str], tmp_path: Path) -> None:
    """Two processes start an index build beside their job at the same time on one empty cache:
    one child builds, the other process sees the lock held and waits; one build in all."""
    code = textwrap.dedent("""
        import sys
        from pathlib import Path
        from capeval.metrics.meteor import ahead, index_build
        where = Path(sys.argv[1])
        ahead.start_index(where)
        index_build.prepare(where)
        ahead.reap()
    """)
    where = Path(env["CAPEVAL_CACHE"]) / "meteor-1.5"
    procs = [subprocess.Popen([sys.executable, "-c", code, str(where)], env=env, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    errs = [p.communicate(timeout=600)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errs
    assert [what for what, *_ in _builds(env)] == ["index"], _builds(env)
    assert index_problem(where, source_paths()) is None


def test_small_jobs_and_pool_workers_start_nothing(index_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[str] = []
    monkeypatch.setattr(ahead, "start_index", lambda d: started.append("index"))
    monkeypatch.setattr(ahead, "start_kernel", lambda: started.append("kernel"))
    ahead.start(index_dir, ahead.INDEX_AHEAD_ITEMS - 1, False)
    ahead.start(None, 10**6, False)  # the index is there already
    assert started == []
    monkeypatch.setattr(ahead, "_in_pool_worker", lambda: True)
    ahead.start(index_dir, 10**6, True)
    assert started == []
    monkeypatch.setattr(ahead, "_in_pool_worker", lambda: False)
    ahead.start(index_dir, 10**6, True)
    assert started == ["index", "kernel"]


# -- the kernel child: build() waits for the started one; concurrent builds take turns --------------

_FAKE_CHILD = textwrap.dedent('''
    import hashlib, os, sys, time
    src, where, name, suffix = sys.argv[1], sys.argv[2], sys.argv[3], {suffix!r}
    time.sleep(0.2)
    module = os.path.join(where, name + suffix)
    # a name of its own, as the real child's mkdtemp: two children of one folder may run at once
    part = module + ".%d.part" % os.getpid()
    with open(part, "wb") as f:
        f.write(b"not an ELF file, but hashed and recorded as the real child does")
    os.replace(part, module)
    digest = hashlib.sha256(open(module, "rb").read()).hexdigest()
    with open(os.path.join(where, name + ".sha256"), "w") as f:
        f.write(digest + "  " + name + suffix + "\\n")
''').format(suffix=importlib.machinery.EXTENSION_SUFFIXES[0])


@pytest.fixture
def kernels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    where = tmp_path / "kernels"
    monkeypatch.setattr(kernel_build, "_started", {})
    return where


def test_build_waits_for_the_started_child_instead_of_starting_another(kernels: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """start_build starts the child; the job's build() of the same folder waits for that one
    (no second launch) and finds the module and its record in place."""
    monkeypatch.setattr(kernel_build, "_CHILD", _FAKE_CHILD)
    assert kernel_build.start_build(kernels) is None
    assert kernel_build.start_build(kernels) is None and len(kernel_build._started) == 1  # not twice
    real_launch = kernel_build._launch
    launches: list[Path] = []

    def launch(where: Path):
        launches.append(where)
        return real_launch(where)

    monkeypatch.setattr(kernel_build, "_launch", launch)
    assert kernel_build.build(kernels) is None
    assert launches == [] and kernel_build._started == {}
    assert kernel_build.check(kernels) == ("ok", None)

    # a forked copy of the process that started a build cannot wait for it (not its child):
    # it starts its own instead of taking the copy's entry for a finished build
    kernel_build.discard(kernels)
    assert kernel_build.start_build(kernels) is None
    launches.clear()
    proc, err, t0, _ = kernel_build._started[str(kernels)]
    kernel_build._started[str(kernels)] = (proc, err, t0, os.getpid() + 1)
    try:
        assert kernel_build.build(kernels) is None
        assert launches == [kernels]
    finally:
        proc.wait()
        err.close()


def test_a_failed_started_build_is_reported_and_kept_once(kernels: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A started child that fails: build() gives its last stderr line, kept in .failed."""
    monkeypatch.setattr(kernel_build, "_CHILD", "import sys\nprint('RuntimeError: no compiler here', file=sys.stderr)\n"
                                                "sys.exit(1)")
    assert kernel_build.start_build(kernels) is None
    assert kernel_build.build(kernels) == "RuntimeError: no compiler here"
    assert kernel_build.failure(kernels) == "RuntimeError: no compiler here"
    assert kernel_build.check(kernels)[0] == "missing"


def test_concurrent_kernel_builds_take_turns_and_compile_once(env: dict[str, str], tmp_path: Path) -> None:
    """Two jobs' build children on one folder: while one holds the build lock the others wait;
    a child that gets the lock after a build finished finds the module and compiles nothing
    (no numba needed: it never gets that far). The module is the first build's, untouched."""
    where = tmp_path / "kernels"
    where.mkdir(mode=0o755)
    code = ("import sys\nfrom pathlib import Path\nfrom capeval.metrics.meteor import kernel_build\n"
            "r = kernel_build.build(Path(sys.argv[1]))\nprint(r)\nsys.exit(0 if r is None else 1)")
    name = kernel_build.module_name()
    with kernel_child._build_lock(where, name):  # "the first job's child", building
        procs = [subprocess.Popen([sys.executable, "-c", code, str(where)], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(2)]
        module = kernel_build.built_path(where)
        module.write_bytes(b"the first job's module")  # moved in, then its record, under the lock
        kernel_build.digest_path(where).write_text(
            f"{hashlib.sha256(module.read_bytes()).hexdigest()}  {module.name}\n", encoding="ascii")
        inode = module.stat().st_ino
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert _builds(env) == []  # no compile at all
    assert module.stat().st_ino == inode and kernel_build.check(where) == ("ok", None)
    assert not [p for p in where.iterdir() if p.name.startswith(".build-") or p.name.endswith(".failed")]


def test_kernel_building_until_the_module_and_its_record_are_in_place(kernels: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """What before_chunks asks (is a build of ours under way?) and what reap does at the end of
    the job: wait for the child; a failure kept in .failed and said in one warning."""
    monkeypatch.setattr(kernel_build, "folder", lambda: kernels)
    assert not ahead.kernel_building()  # none started
    monkeypatch.setattr(kernel_build, "_CHILD", _FAKE_CHILD)
    assert kernel_build.start_build() is None
    proc = kernel_build._started[str(kernels)][0]
    assert ahead.kernel_building() or proc.poll() is not None
    proc.wait()
    assert not ahead.kernel_building() and ahead.kernel_ready()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ahead.reap()  # a successful build: nothing to say
    assert kernel_build._started == {}

    kernel_build.discard(kernels)
    monkeypatch.setattr(kernel_build, "_CHILD", "import sys\nprint('CompileError: cc failed', file=sys.stderr)\n"
                                                "sys.exit(1)")
    assert kernel_build.start_build() is None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ahead.reap()
    said = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(said) == 1 and "(CompileError: cc failed)" in said[0] and "this job used the Python code" in said[0]
    assert kernel_build.failure(kernels) == "CompileError: cc failed" and kernel_build._started == {}
