"""Issue 46, items 4 and 1 (HICE-S part): compiled code in the cache is verified before it is
imported (METEOR's kernel), and ids used as file names by HICE-S ``--explain`` stay in their
folder with a capped length.

The kernel tests build the real module once (a module-scoped fixture, about 10 s) and copy it
into each test's own kernels folder; the hostile module is a tiny C extension compiled here
whose loading (its ELF constructor, before any Python code) writes a marker file."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import sysconfig
import warnings
from pathlib import Path

import numpy as np
import pytest

from capeval.metrics.meteor import jit_align, kernel_build

from _reference import require_module, unavailable

ROOT = Path(__file__).resolve().parents[1]

_MARKER_C = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdio.h>
static void mark(const char *how) { FILE *f = fopen(MARKER, "a"); if (f) { fputs(how, f); fclose(f); } }
__attribute__((constructor)) static void on_load(void) { mark("dlopen\n"); }
static PyObject *finish_kernel(PyObject *self, PyObject *args) { mark("called\n"); Py_RETURN_NONE; }
static PyMethodDef methods[] = {{"finish_kernel", finish_kernel, METH_VARARGS, ""}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, NAME, NULL, -1, methods};
PyMODINIT_FUNC INIT(void) { mark("init\n"); return PyModule_Create(&def); }
"""


def _compiler() -> str:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        unavailable("no C compiler: numba.pycc cannot build the kernel ahead of time")
    return cc


def _marker_module(folder: Path, name: str, marker: Path) -> Path:
    """A C extension named ``name`` whose loading writes ``marker`` (in its ELF constructor,
    i.e. at dlopen, before Python looks for its init function)."""
    src = folder / "marker.c"
    src.write_text(_MARKER_C, encoding="utf-8")
    out = folder / f"{name}-marker.so"
    cmd = [_compiler(), "-shared", "-fPIC", f"-I{sysconfig.get_paths()['include']}", f'-DMARKER="{marker}"',
           f'-DNAME="{name}"', f"-DINIT=PyInit_{name}", "-o", str(out), str(src)]
    if sys.platform == "darwin":
        cmd[1:1] = ["-undefined", "dynamic_lookup"]
    subprocess.run(cmd, check=True, capture_output=True)
    return out


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """A folder with the real module and its sha256 record, built once for this file."""
    require_module("numba", "numba compiles METEOR's beam search (the fast extra)")
    _compiler()
    where = tmp_path_factory.mktemp("kernel-base") / "kernels"
    reason = kernel_build.build(where)
    assert reason is None, reason
    assert kernel_build.check(where) == ("ok", None)
    return where


@pytest.fixture
def kernels(base: Path, tmp_path: Path, monkeypatch) -> Path:
    """This test's kernels folder (a copy of ``base``), with no kernel loaded in the process."""
    where = tmp_path / "kernels"
    where.mkdir(mode=0o755)
    for f in base.iterdir():
        if f.is_file():
            shutil.copy2(f, where / f.name)
    monkeypatch.setattr(kernel_build, "folder", lambda: where)
    monkeypatch.setattr(jit_align, "_kernel", None)
    monkeypatch.setattr(jit_align, "kind", None)
    return where


@pytest.fixture
def fake_build(base: Path, monkeypatch) -> list[int]:
    """``kernel_build.build`` that copies ``base``'s module in (as the child does: module, then
    record) instead of compiling again; the list counts its calls."""
    calls: list[int] = []

    def build(where: Path | None = None) -> str | None:
        calls.append(1)
        where = Path(where or kernel_build.folder())
        name = kernel_build.built_path(base).name
        shutil.copy2(base / name, where / f".{name}.new")
        try:
            os.replace(where / f".{name}.new", where / name)
        except OSError as exc:
            kernel_build.note_failure(str(exc), where)
            return str(exc)
        shutil.copy2(kernel_build.digest_path(base), kernel_build.digest_path(where))
        return None

    monkeypatch.setattr(kernel_build, "build", build)
    return calls


def _record(where: Path) -> None:
    """A matching sha256 record for whatever is at the module's path now (the attacker's best)."""
    import hashlib

    path = kernel_build.built_path(where)
    kernel_build.digest_path(where).write_text(
        f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {path.name}\n", encoding="ascii")


def _load(build: bool) -> tuple[bool, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ok = jit_align.load(build=build)
    return ok, [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]


def _kernel_works() -> None:
    """The loaded kernel gives the Python code's statistics."""
    from capeval.metrics.meteor import fast_align
    from capeval.metrics.meteor.fast_match import match

    from test_meteor_jit import _caption  # noqa: F401  (the module's helpers import cleanly)

    meteor = _meteor()
    sents = meteor.fast_sentences(["a dog runs on the grass", "the dog is running on green grass"])
    m = match(sents["a dog runs on the grass"], sents["the dog is running on green grass"])
    assert jit_align.finish(m) == fast_align.finish(m)


_METEOR = []


def _meteor():
    require_module("pycocoevalcap", "pycocoevalcap==1.2 holds the METEOR 1.5 resources (test extra)")
    if not _METEOR:
        from capeval.metrics.meteor import Meteor15

        _METEOR.append(Meteor15())
    return _METEOR[0]


# ------------------------------------------------------------------ a swapped module


def test_a_swapped_module_is_never_imported_and_is_built_again(kernels: Path, tmp_path: Path) -> None:
    """The real build runs again (once); the swapped module's code never runs."""
    marker = tmp_path / "marker"
    path = kernel_build.built_path(kernels)
    shutil.copy(_marker_module(tmp_path, kernel_build.module_name(), marker), path)  # the record stays the real one
    ok, said = _load(build=True)
    assert not marker.exists(), marker.read_text()
    assert ok and jit_align.kind == "built"
    assert len(said) == 1 and "\n" not in said[0], said
    assert f"the compiled kernel {path} was not imported: its sha256 differs" in said[0]
    assert said[0].endswith("it was built again"), said[0]
    assert kernel_build.check(kernels) == ("ok", None)
    _kernel_works()
    # the next run loads it without a word
    jit_align._kernel = None
    assert _load(build=False) == (True, [])


def test_a_swapped_module_in_a_small_job_is_removed_and_python_is_used(kernels: Path, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    path = kernel_build.built_path(kernels)
    shutil.copy(_marker_module(tmp_path, kernel_build.module_name(), marker), path)
    ok, said = _load(build=False)
    assert not ok and jit_align.kind is None and not marker.exists()
    assert len(said) == 1 and "was not imported: its sha256 differs" in said[0]
    assert "it was removed; the Python code is used until a large job builds it again" in said[0]
    assert not path.exists() and not kernel_build.digest_path(kernels).exists()
    assert _load(build=False) == (False, [])  # said once: now it is simply not built


def test_a_module_of_another_name_with_the_real_record_is_never_opened(kernels: Path, tmp_path: Path,
                                                                       fake_build: list[int]) -> None:
    marker = tmp_path / "marker"
    shutil.copy(_marker_module(tmp_path, "some_other_module", marker), kernel_build.built_path(kernels))
    ok, said = _load(build=True)
    assert ok and jit_align.kind == "built" and fake_build == [1] and not marker.exists()
    assert len(said) == 1 and "its sha256 differs" in said[0]


def test_another_module_with_a_matching_record_is_refused_before_any_job_uses_it(kernels: Path, tmp_path: Path,
                                                                               fake_build: list[int]) -> None:
    """Whoever can write both the module and its record in a folder only the user can write
    is the user: that module is loaded (the record cannot tell), but one that is not the
    kernel is caught by a probe at load time, not by a traceback at the job's first pair."""
    marker = tmp_path / "marker"
    shutil.copy(_marker_module(tmp_path, kernel_build.module_name(), marker), kernel_build.built_path(kernels))
    _record(kernels)
    ok, said = _load(build=True)
    assert ok and jit_align.kind == "built" and fake_build == [1]
    assert len(said) == 1 and "was not used: it does not load or work as the kernel" in said[0], said
    assert said[0].endswith("it was built again")
    _kernel_works()


def _text(path: Path, base: Path) -> bool:
    path.write_text("import os; os.system('touch /tmp/pwned')\n", encoding="utf-8")
    return True


def _empty(path: Path, base: Path) -> bool:
    path.write_bytes(b"")
    return True


def _truncated(path: Path, base: Path) -> bool:
    # a cut module: dlopen of such a file dies of SIGBUS (exit 135) instead of raising
    path.write_bytes(kernel_build.built_path(base).read_bytes()[:5000])
    return True


def _other_extension(path: Path, base: Path) -> bool:
    """Another extension module (the standard library's), renamed."""
    import glob

    found = sorted(glob.glob(os.path.join(sysconfig.get_config_var("DESTSHARED") or "", "_bisect*.so")))
    if not found:
        pytest.skip("no _bisect extension module to copy")
    shutil.copy(found[0], path)
    return True


def _folder(path: Path, base: Path) -> bool:
    path.mkdir()
    (path / "x").write_text("x", encoding="utf-8")
    return False


def _link_to_real(path: Path, base: Path) -> bool:
    path.symlink_to(kernel_build.built_path(base))  # the right bytes, through a link
    return False


def _link_to_zero(path: Path, base: Path) -> bool:
    path.symlink_to("/dev/zero")  # endless: never read
    return False


def _fifo(path: Path, base: Path) -> bool:
    os.mkfifo(path)  # opening it would block for ever
    return False


def _world_writable(path: Path, base: Path) -> bool:
    shutil.copy2(kernel_build.built_path(base), path)
    os.chmod(path, 0o757)  # the right bytes, but anyone may change them
    return False


def _huge(path: Path, base: Path) -> bool:
    with open(path, "wb") as f:  # sparse: nothing is written, nothing is read
        f.truncate(kernel_build.MAX_MODULE_BYTES + 1)
    return False


_MAKERS = [_text, _empty, _truncated, _other_extension, _folder, _link_to_real, _link_to_zero, _fifo, _world_writable,
           _huge]
# with the real module's record, and (for the files a record can be written for) with a matching one
_CASES = [(m, False) for m in _MAKERS] + [(m, True) for m in (_text, _empty, _truncated, _other_extension)]


@pytest.mark.parametrize("make,recorded", _CASES,
                         ids=[f"{m.__name__[1:]}-{'matching' if r else 'real'}-record" for m, r in _CASES])
def test_a_module_with_the_wrong_contents_is_built_again_never_a_traceback(
        kernels: Path, base: Path, make, recorded: bool, fake_build: list[int]) -> None:
    """With the real module's record, or with one that matches the hostile file: never a
    traceback, never a crash, the kernel built again and loaded."""
    path = kernel_build.built_path(kernels)
    os.unlink(path)
    make(path, base)
    if recorded:
        _record(kernels)
    status, why = kernel_build.check(kernels)
    # a matching record passes the digest: what loads or not is then up to the import, except
    # for a cut ELF file (checked before: the loader would die of SIGBUS, as before the fix)
    assert status == ("ok" if recorded and make is not _truncated else "bad"), why
    ok, said = _load(build=True)
    assert len(said) == 1 and "\n" not in said[0], said
    verb = "used" if recorded and make is not _truncated else "imported"  # (matching record: loaded, probed)
    assert said[0].startswith(f"METEOR: the compiled kernel {path} was not {verb}: "), said[0]
    assert fake_build == [1]
    if make is _folder:  # cannot be removed: the build's replace fails, and says so; the JIT then
        assert "building it again failed" in said[0] and ok and jit_align.kind == "jit"
        assert path.is_dir()
        return
    assert said[0].endswith("it was built again"), said[0]
    assert ok and jit_align.kind == "built"
    assert kernel_build.check(kernels) == ("ok", None)
    _kernel_works()


@pytest.mark.parametrize("case", ["missing", "link", "other-name", "garbage", "huge", "uppercase-ok"])
def test_a_bad_sha256_record_means_no_import(kernels: Path, tmp_path: Path, case: str) -> None:
    record = kernel_build.digest_path(kernels)
    good = record.read_text(encoding="ascii")
    if case == "missing":
        record.unlink()
    elif case == "link":
        shutil.copy(record, tmp_path / "elsewhere")
        record.unlink()
        record.symlink_to(tmp_path / "elsewhere")
    elif case == "other-name":
        record.write_text(good.split()[0] + "  other.so\n", encoding="ascii")
    elif case == "garbage":
        record.write_bytes(b"\xff" * 100)
    elif case == "huge":
        record.write_text(good.strip() + " " + "x" * 10_000_000, encoding="ascii")
    else:
        record.write_text(good.split()[0].upper() + "  " + good.split()[1] + "\n", encoding="ascii")
    status, why = kernel_build.check(kernels)
    if case == "uppercase-ok":
        assert status == "ok"
    else:
        assert status == "bad" and "there is no sha256 record" in why


# ------------------------------------------------------------------ folders others can write


@pytest.mark.parametrize("mode", [0o777, 0o757, 0o703])
def test_a_folder_writable_by_others_is_refused_with_one_line(kernels: Path, tmp_path: Path, mode: int,
                                                              fake_build: list[int]) -> None:
    """Even a module whose record matches is not imported, and nothing is built there."""
    marker = tmp_path / "marker"
    shutil.copy(_marker_module(tmp_path, kernel_build.module_name(), marker), kernel_build.built_path(kernels))
    _record(kernels)
    os.chmod(kernels, mode)
    before = sorted(p.name for p in kernels.iterdir())
    ok, said = _load(build=False)
    assert not ok and jit_align.kind is None and not marker.exists()
    assert said == [f"METEOR: {kernels} is writable by others (mode {mode:04o}), so compiled code in it is not "
                    f"imported; run chmod go-w {kernels}; the Python code is used (same results)"]
    ok, said = _load(build=True)
    assert not marker.exists() and fake_build == [] and sorted(p.name for p in kernels.iterdir()) == before
    assert len(said) == 1 and said[0].endswith(f"run chmod go-w {kernels}; numba's JIT is used instead (same results)")
    assert ok and jit_align.kind == "jit"
    os.chmod(kernels, 0o755)  # the fix the line names
    jit_align._kernel = None
    assert kernel_build.check(kernels) == ("ok", None)  # the matching record: ours now (the user's call)
    marker.unlink(missing_ok=True)


def test_a_parent_up_to_the_cache_root_writable_by_others_is_refused(tmp_path: Path, monkeypatch, base: Path) -> None:
    """$CAPEVAL_CACHE itself writable by others: whoever can write it can rename kernels/ away."""
    root = tmp_path / "cache"
    (root / "kernels").mkdir(parents=True, mode=0o755)
    for f in base.iterdir():
        shutil.copy2(f, root / "kernels" / f.name)
    monkeypatch.setenv("CAPEVAL_CACHE", str(root))
    monkeypatch.setattr(jit_align, "_kernel", None)
    assert kernel_build.check() == ("ok", None)
    os.chmod(root, 0o777)
    status, why = kernel_build.check()
    assert status == "unsafe" and why == (f"{root} is writable by others (mode 0777), so compiled code in it is not "
                                          f"imported; run chmod go-w {root}")
    os.chmod(root, 0o755)
    os.chmod(tmp_path, 0o777)  # above the cache root: not ours to judge
    try:
        assert kernel_build.check() == ("ok", None)
    finally:
        os.chmod(tmp_path, 0o700)


def test_a_group_writable_folder_is_refused_unless_the_group_is_yours_alone(kernels: Path) -> None:
    os.chmod(kernels, 0o775)
    private = kernel_build._private_group(os.stat(kernels).st_gid)
    assert kernel_build.check(kernels)[0] == ("ok" if private else "unsafe")
    if os.geteuid() != 0:
        return  # only root can give the folder to a group of others
    os.chown(kernels, -1, 54321)  # a group that is not the user's private one
    status, why = kernel_build.check(kernels)
    assert status == "unsafe" and why.startswith(f"{kernels} is writable by its group (mode 0775)")
    assert why.endswith(f"run chmod go-w {kernels}")


def test_a_folder_or_module_of_another_user_is_refused(kernels: Path, fake_build: list[int]) -> None:
    if os.geteuid() != 0:
        pytest.skip("only root can give a file to another user")
    module = kernel_build.built_path(kernels)
    os.chown(module, 54321, 54321)
    status, why = kernel_build.check(kernels)
    assert status == "bad" and why == "it is owned by another user (uid 54321)"
    os.chown(module, 0, 0)
    os.chown(kernels, 54321, -1)
    status, why = kernel_build.check(kernels)
    assert status == "unsafe" and why == (f"{kernels} is owned by another user (uid 54321), so compiled code in it "
                                          "is not imported; set CAPEVAL_CACHE to a folder of yours")


def test_the_build_leaves_a_module_and_folder_that_pass_under_a_loose_umask(tmp_path: Path, base: Path) -> None:
    """umask 002 (Debian/Ubuntu user-private groups) or 000: the kernels folder and the module
    are made 0755 all the same, so a fresh build is never refused at the next run."""
    old = os.umask(0o000)
    try:
        where = tmp_path / "loose" / "kernels"
        (tmp_path / "loose").mkdir(mode=0o700)
        assert kernel_build.build(where) is None
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(where).st_mode) == 0o755
    assert stat.S_IMODE(os.stat(kernel_build.built_path(where)).st_mode) == 0o755
    assert kernel_build.check(where) == ("ok", None)
    record = kernel_build.digest_path(where).read_text(encoding="ascii")
    out = subprocess.run(["sha256sum", "-c", kernel_build.digest_path(where).name], cwd=where, capture_output=True,
                         text=True) if shutil.which("sha256sum") else None
    assert out is None or out.returncode == 0, (record, out.stdout, out.stderr)


# ------------------------------------------------------------------ the command line


def test_score_with_a_swapped_kernel_says_one_line_and_scores_right(kernels: Path, tmp_path: Path) -> None:
    """``capeval score -m meteor`` with a swapped module: exit 0, one ``capeval: warning:`` line,
    the marker never written, the scores of a run without the kernel."""
    meteor = _meteor()
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o755)
    (cache / "meteor-1.5").symlink_to(Path(meteor.resources.index_dir) if hasattr(meteor.resources, "index_dir")
                                      else Path(os.environ["CAPEVAL_CACHE"]) / "meteor-1.5")
    shutil.copytree(kernels, cache / "kernels")
    marker = tmp_path / "marker"
    shutil.copy(_marker_module(tmp_path, kernel_build.module_name(), marker),
                kernel_build.built_path(cache / "kernels"))
    cands = tmp_path / "c.json"
    refs = tmp_path / "r.json"
    cands.write_text(json.dumps({"1": "a dog runs on the grass", "2": "two men ride bikes"}), encoding="utf-8")
    refs.write_text(json.dumps({"1": ["the dog is running on green grass"], "2": ["men are riding bicycles"]}),
                    encoding="utf-8")
    env = dict(os.environ, CAPEVAL_CACHE=str(cache), PYTHONPATH=str(ROOT / "src"), HF_HUB_OFFLINE="1")
    run = [sys.executable, "-m", "capeval.cli", "score", "-q", "-m", "meteor", "-c", str(cands), "-r", str(refs)]
    out = subprocess.run([*run, "--per-item", str(tmp_path / "on.json")], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert not marker.exists()
    lines = out.stderr.strip().splitlines()
    assert "Traceback" not in out.stderr and len(lines) == 1, out.stderr
    assert lines[0].startswith("capeval: warning: METEOR: the compiled kernel ") and "its sha256 differs" in lines[0]
    off = subprocess.run([*run, "-O", "meteor.compiled=false", "--per-item", str(tmp_path / "off.json")],
                         capture_output=True, text=True, env=env)
    assert off.returncode == 0 and off.stderr.strip() == "", off.stderr
    assert json.loads(out.stdout)["scores"] == json.loads(off.stdout)["scores"]
    on_items = json.loads((tmp_path / "on.json").read_text(encoding="utf-8"))
    assert on_items == json.loads((tmp_path / "off.json").read_text(encoding="utf-8"))
    assert not marker.exists()


def test_info_says_why_the_kernel_would_not_be_imported(kernels: Path, capsys) -> None:
    from capeval.cli.main import main

    def info() -> dict:
        assert main(["info"]) == 0
        return json.loads(capsys.readouterr().out)["meteor"]

    assert kernel_build.problem() is None and "compiled_kernel_problem" not in info()
    kernel_build.built_path(kernels).write_bytes(b"not a module")
    assert "its sha256 differs" in kernel_build.problem()
    assert "its sha256 differs" in info()["compiled_kernel_problem"]
    os.chmod(kernels, 0o777)
    assert info()["compiled_kernel_problem"].endswith(f"run chmod go-w {kernels}")
    os.chmod(kernels, 0o755)


# ------------------------------------------------------------------ numba's own cache


class _Evil:
    """Unpickling it creates the file it names (what a planted pickle could do)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


@pytest.mark.slow  # two JIT compilations (about 15 s of CPU each)
def test_numba_cache_that_others_can_write_is_not_loaded(tmp_path: Path) -> None:
    """numba's JIT cache (``cache=True``: pickles, run when loaded) is loaded only from a
    folder that only the user can write; elsewhere the JIT compiles afresh, with one warning."""
    import pickle

    require_module("numba", "numba compiles METEOR's beam search (the fast extra)")
    code = ("import warnings\nwarnings.simplefilter('always')\n"
            "from capeval.metrics.meteor import jit_align\nassert jit_align.load_jit()\n"
            "print(jit_align._kernel is not None)\n")
    numba_cache = tmp_path / "numba-cache"
    numba_cache.mkdir(mode=0o755)
    env = dict(os.environ, NUMBA_CACHE_DIR=str(numba_cache), PYTHONPATH=str(ROOT / "src"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0 and out.stdout.strip() == "True" and "Warning" not in out.stderr, out.stderr
    indexes = list(numba_cache.rglob("jit_kernel.*.nbi"))
    assert indexes  # the safe folder is used
    marker = tmp_path / "unpickled"
    for index in indexes:  # a pickle that runs code, where numba's index header is read
        index.write_bytes(pickle.dumps(_Evil(str(marker))))
    os.chmod(numba_cache, 0o777)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    os.chmod(numba_cache, 0o755)
    assert out.returncode == 0 and out.stdout.strip() == "True", out.stderr
    assert not marker.exists()  # (with the folder safe, numba would run it: as trusted as a .pyc)
    said = [line for line in out.stderr.splitlines() if "RuntimeWarning" in line]
    assert len(said) == 1, out.stderr
    assert f"{numba_cache} is writable by others (mode 0777); run chmod go-w {numba_cache}" in said[0]
    assert "numba's cache is not loaded" in said[0]


def test_numba_cache_files_that_are_not_the_users_are_not_loaded(tmp_path: Path) -> None:
    """The rule for the cache's files, without compiling: a link or a file others can write."""
    require_module("numba", "numba compiles METEOR's beam search (the fast extra)")

    class Cache:
        def __init__(self, path: str) -> None:
            self.cache_path, self.enabled = path, True

        def disable(self) -> None:
            self.enabled = False

    class Dispatcher:
        def __init__(self, cache: Cache) -> None:
            self._cache = cache

    import types

    folder = tmp_path / "c"
    folder.mkdir(mode=0o755)
    os.chmod(tmp_path, 0o755)
    module = types.ModuleType("capeval.metrics.meteor.jit_kernel")
    module.f = Dispatcher(Cache(str(folder)))
    assert jit_align.guard_numba_cache(module) is None and module.f._cache.enabled
    (folder / "jit_kernel.f-1.py311.nbi").write_bytes(b"x")
    os.chmod(folder / "jit_kernel.f-1.py311.nbi", 0o666)
    said = jit_align.guard_numba_cache(module)
    assert said and "jit_kernel.f-1.py311.nbi is writable by others (mode 0666); delete it" in said
    assert not module.f._cache.enabled
    (folder / "jit_kernel.f-1.py311.nbi").unlink()
    (folder / "jit_kernel.f-1.py311.nbi").symlink_to(tmp_path)
    module.f = Dispatcher(Cache(str(folder)))
    assert "is not a regular file" in jit_align.guard_numba_cache(module) and not module.f._cache.enabled
    os.chmod(tmp_path, 0o700)


# ------------------------------------------------------------------ HICE-S --explain file names


def _explanation(item_id: str) -> dict:
    from capeval.metrics.hice.explain import SCHEMA_VERSION

    scores = {k: 0.5 for k in ("hice-s", "g_itc", "l_itc", "precision", "recall")}
    scores.update({k: None for k in ("ref-hice-s", "g_ttc", "l_ttc", "ttc_precision", "ttc_recall")})
    return {"schema": SCHEMA_VERSION, "id": item_id, "caption": "a dog", "image": "<memory>", "image_size": [8, 8],
            "references": None, "scale": {"w": 2.5, "formula": "w*max(cos,0)"},
            "thresholds": {"incorrect_below": 0.5, "unmentioned_below": 0.5}, "scores": scores,
            "phrases": [{"index": 0, "text": "a dog", "precision": 0.6, "best_region": 0, "correct": True}],
            "phrase_fallback": False,
            "regions": [{"index": 0, "bbox": [0, 0, 8, 8], "area": 64, "quality": 1.0, "recall": 0.6,
                         "best_phrase": 0, "mentioned": True}],
            "region_fallback": False, "incorrect": [], "unmentioned": [], "signature": "hice-s|test"}


def _write(folder: Path, item_id: str) -> tuple[Path, Path]:
    from PIL import Image

    from capeval.metrics.hice.explain import write

    return write(folder, _explanation(item_id), Image.new("RGB", (8, 8)), [np.ones((8, 8), dtype=bool)])


HOSTILE_IDS = ["../../x", "../x", "/abs", "/etc/passwd", "a/../../b", "a/b", "\\..\\x", "C:\\x", ".", "..", "...",
               ".hidden", "", " ", "x" * 10_000, "é" * 5_000, "日本語のキャプション", "a\x00b", "a\nb",
               "\ud800",
               "con", "a" * 250, "a" * 251, "-rf", "~", "$HOME", "a b", "a_b"]


def test_explain_file_names_stay_in_the_folder_with_a_capped_length(tmp_path: Path) -> None:
    folder = tmp_path / "explain"
    outside = set(tmp_path.iterdir())
    stems: dict[str, str] = {}
    for item_id in HOSTILE_IDS:
        json_path, png_path = _write(folder, item_id)
        for path in (json_path, png_path):
            assert path.parent == folder and path.is_file(), (item_id, path)
            assert len(path.name.encode()) <= 255 and "/" not in path.name and not path.name.startswith(".")
        assert json.loads(json_path.read_text(encoding="utf-8"))["id"] == item_id
        assert json_path.stem not in stems.values(), (item_id, json_path.stem)  # no two ids share a file
        stems[item_id] = json_path.stem
    assert set(tmp_path.iterdir()) == outside | {folder}  # nothing written beside the folder
    assert len(list(folder.iterdir())) == 2 * len(HOSTILE_IDS)  # and no temporary file left


def test_ids_that_differ_only_in_unsafe_characters_do_not_collide(tmp_path: Path) -> None:
    ids = ["a/b", "a\\b", "a b", "a?b", "a:b", "a*b", "a_b", "a\u00a0b", "a\tb", "a\u200bb", "a/b/"]
    paths = {_write(tmp_path, i)[0] for i in ids}
    assert len(paths) == len(ids)
    long_ids = ["y" * 10_000 + "1", "y" * 10_000 + "2", "y" * 10_000 + "/"]
    assert len({_write(tmp_path, i)[0] for i in long_ids}) == 3


def test_safe_ids_keep_their_file_names(tmp_path: Path) -> None:
    """Outputs of earlier runs do not move: a safe id (up to the longest name a folder takes)
    is its own file name, and an unsafe one keeps its earlier ``<cleaned>-<sha256[:8]>``."""
    import hashlib

    from capeval.metrics.hice.explain import safe_name

    for item_id in ["COCO_val2014_000000391895", "img-1.jpg", "a_b", "A" * 250]:
        assert safe_name(item_id) == item_id
        assert _write(tmp_path, item_id)[0].name == f"{item_id}.json"
    for item_id in ["a b", "../x", ".hidden"]:
        old = f"{__import__('re').sub(r'[^A-Za-z0-9._-]', '_', item_id).strip('.') or 'item'}-" \
              f"{hashlib.sha256(item_id.encode()).hexdigest()[:8]}"
        assert safe_name(item_id) == old
    assert len(safe_name("A" * 251)) <= 250 and safe_name("A" * 251) != safe_name("A" * 252)


def test_explain_never_writes_through_a_link_in_its_folder(tmp_path: Path) -> None:
    """A link planted in the folder under an id's file name: refused in one line, the link's
    target untouched (an atomic write would otherwise replace the target)."""
    from capeval.errors import InputError

    folder = tmp_path / "explain"
    folder.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's", encoding="utf-8")
    (folder / "item1.json").symlink_to(victim)
    with pytest.raises(InputError) as e:
        _write(folder, "item1")
    assert "\n" not in str(e.value) and "item1" in str(e.value)
    assert victim.read_text(encoding="utf-8") == "the user's"
    assert not (folder / "item1.png").exists()  # both or neither
