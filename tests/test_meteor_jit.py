"""METEOR's compiled resolution (numba, the ``fast`` extra), built ahead of time and through
numba's JIT, against the Python one and the reference implementation, item by item, and the
option that chooses it."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import warnings

import pytest

import capeval
from capeval.errors import CapevalError
from capeval.metrics.meteor import Meteor15, fast_align, jit_align, kernel_build, pycocoevalcap_fields
from capeval.metrics.meteor.fast_match import chain_bound, match, mirrored, transposed
from capeval.metrics.meteor.normalize import java_trim

from _reference import require_module, unavailable
from test_speed_paths import _caption


@pytest.fixture(scope="module")
def meteor() -> Meteor15:
    require_module("pycocoevalcap", "pycocoevalcap==1.2 holds the METEOR 1.5 resources (test extra)")
    require_module("numba", "numba compiles METEOR's beam search (the fast extra)")
    if not (shutil.which("cc") or shutil.which("gcc")):
        unavailable("no C compiler: numba.pycc cannot build the kernel ahead of time")
    assert jit_align.load()
    assert jit_align.kind == "built", kernel_build.failure()  # built into the session's cache
    return Meteor15()


@pytest.fixture(params=["built", "jit"])
def kernel(request, meteor: Meteor15, monkeypatch) -> str:
    """Each test using it runs with the kernel built ahead of time, then with numba's JIT."""
    monkeypatch.setattr(jit_align, "_kernel", None)
    monkeypatch.setattr(jit_align, "kind", None)
    assert (jit_align.load(build=False) if request.param == "built" else jit_align.load_jit())
    assert jit_align.kind == request.param
    return request.param


def _pairs(meteor: Meteor15, seed: int, n: int) -> tuple[dict, list[tuple[str, str]]]:
    rng = random.Random(seed)
    texts = [meteor.normalize(java_trim(pycocoevalcap_fields(_caption(rng), ["r"])[0])) for _ in range(n)]
    sents = meteor.fast_sentences(texts)
    pairs = [(texts[k], texts[rng.randrange(len(texts))]) for k in range(len(texts))]
    pairs += [(t, t) for t in texts[:20]]  # identical sentences: the exact module only
    # short pairs, the ones the kernel takes: one-word captions, repeats, shared words
    short = [t for t in texts if sents[t].n <= 20]
    pairs += [(rng.choice(short), rng.choice(short)) for _ in range(6 * n)]
    # few distinct words, many of them: beams far over the beam size of 40
    crowded = [" ".join(rng.choice(["a", "the", "dog", "dogs", "man", "men", "run"]) for _ in range(rng.randint(8, 31)))
               for _ in range(60)]
    sents.update(meteor.fast_sentences(crowded))
    pairs += [(rng.choice(crowded), rng.choice(crowded)) for _ in range(200)]
    return sents, pairs


def test_compiled_resolution_equals_the_python_one_and_the_reference(meteor: Meteor15, kernel: str) -> None:
    sents, pairs = _pairs(meteor, 36, 300)
    taken = 0
    for a, b in pairs:
        m = match(sents[a], sents[b])
        want = fast_align.finish(m)
        assert jit_align.finish(m) == want, (a, b)
        reverse = match(sents[b], sents[a])
        assert jit_align.finish(transposed(reverse)) == want, (a, b)
        # the mirrored form: the kernel transposes the reverse candidates itself, and the
        # chain bound takes the reverse pair's chains
        assert jit_align.finish(mirrored(reverse)) == want, (a, b)
        assert chain_bound(mirrored(reverse)) == chain_bound(transposed(reverse)) == chain_bound(m), (a, b)
        taken += bool(m[1][4]) and sents[a].n + sents[b].n <= jit_align.MAX_WORDS
    assert taken > 800  # many pairs went through the kernel (the others: no match, or too long)
    for a, b in pairs[::7]:
        ref = meteor._pair_stats(meteor.sentence(a), meteor.sentence(b))
        assert fast_align.to_stats(jit_align.finish(match(sents[a], sents[b]))).to_string() == ref.to_string()


def test_compiled_and_python_runs_give_the_same_items(meteor: Meteor15, kernel: str) -> None:
    rng = random.Random(5)
    hyps = [_caption(rng) for _ in range(400)]
    refs = [[_caption(rng) for _ in range(rng.randint(1, 5))] for _ in hyps]
    fast = Meteor15(compiled=True).best_many(hyps, refs)
    slow = Meteor15(compiled=False).best_many(hyps, refs)
    assert fast == slow
    cands = {str(k): h or "x" for k, h in enumerate(hyps)}
    refd = {str(k): [r or "y" for r in rs] for k, rs in enumerate(refs)}
    on = capeval.score(cands, refd, metrics="meteor", options={"meteor": {"compiled": True}})["meteor"]
    off = capeval.score(cands, refd, metrics="meteor", options={"meteor": {"compiled": False}})["meteor"]
    assert dict(on.items) == dict(off.items) and on.system == off.system


def test_the_option_is_checked_and_a_missing_numba_is_one_line(meteor: Meteor15, monkeypatch, tmp_path) -> None:
    with pytest.raises(CapevalError, match="compiled must be true, false or null"):
        Meteor15(compiled="yes")  # type: ignore[arg-type]
    small = Meteor15()
    monkeypatch.setattr(jit_align, "_kernel", None)
    monkeypatch.setattr(kernel_build, "folder", lambda: tmp_path / "kernels")  # nothing built there
    assert not small.use_compiled(10)  # automatic: a small job builds nothing, stays in Python
    assert small._finish is fast_align.finish and not (tmp_path / "kernels").exists()
    monkeypatch.undo()
    monkeypatch.setattr(jit_align, "_kernel", None)
    assert small.use_compiled(10) and small._finish is jit_align.finish  # already built: any job
    assert jit_align.kind == "built"
    monkeypatch.setattr(jit_align, "_kernel", None)
    monkeypatch.setattr(kernel_build, "folder", lambda: tmp_path / "kernels")
    monkeypatch.setitem(sys.modules, "numba", None)  # numba not installed
    monkeypatch.delitem(sys.modules, "capeval.metrics.meteor.jit_kernel", raising=False)
    assert not jit_align.load()
    assert not Meteor15().use_compiled(10**6)  # automatic: Python, same results
    with pytest.raises(CapevalError, match=r"compiled=true needs numba: pip install 'capeval\[fast\]'") as e:
        Meteor15(compiled=True)  # before any work
    assert "\n" not in str(e.value)


def test_the_built_kernel_loads_without_numba(meteor: Meteor15) -> None:
    """What a job loads: an extension module, with neither numba nor LLVM in the process."""
    code = ("import sys\nfrom capeval.metrics.meteor import jit_align\n"
            "assert jit_align.load(build=False), 'not loaded'\n"
            "assert not {'numba', 'llvmlite'} & set(sys.modules), 'numba imported'\nprint(jit_align.kind)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ))
    assert out.returncode == 0 and out.stdout.strip() == "built", out.stderr


def test_a_failed_build_falls_back_to_the_jit_once_warned(meteor: Meteor15, monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(jit_align, "_kernel", None)
    monkeypatch.setattr(kernel_build, "folder", lambda: tmp_path)
    monkeypatch.setenv("CC", "false")  # the C compiler setuptools calls fails
    with pytest.warns(RuntimeWarning, match=r"building the compiled kernel ahead of time failed \(.+\); numba's JIT"):
        assert jit_align.load()
    assert jit_align.kind == "jit"
    reason = kernel_build.failure()
    assert reason and not list(tmp_path.glob("meteor_kernel_*.so")) and not list(tmp_path.glob(".build-*"))
    monkeypatch.setattr(jit_align, "_kernel", None)
    monkeypatch.delenv("CC")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert jit_align.load() and jit_align.kind == "jit"  # not tried again, no second warning
    assert kernel_build.failure() == reason


@pytest.mark.parametrize("metrics", ["meteor", "meteor,cider-d"])  # without and with a corpus pass
def test_forked_workers_inherit_the_compiled_kernel(meteor: Meteor15, metrics: str) -> None:
    """The text pipeline loads the kernel in the parent (before the scoring pass's workers
    fork, during the corpus pass when there is one); per-item scores equal the Python run's."""
    rng = random.Random(9)
    cands = {f"i{k}": _caption(rng) or "x" for k in range(600)}
    refs = {k: [_caption(rng) or "y" for _ in range(rng.randint(1, 4))] for k in cands}
    runs = {}
    for compiled in (True, False):
        opts = {"meteor": {"compiled": compiled, "workers": 2}}
        if "cider-d" in metrics:
            opts["cider-d"] = {"workers": 2}
        runs[compiled] = capeval.score(cands, refs, metrics=metrics, options=opts)
    for name in runs[True].scores:
        assert dict(runs[True][name].items) == dict(runs[False][name].items), name
        assert runs[True][name].system == runs[False][name].system


def test_an_unusable_cache_folder_means_the_jit(meteor: Meteor15, monkeypatch, tmp_path) -> None:
    """No place to build in (the cache is a file): the JIT, no error, nothing written."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x", encoding="utf-8")
    monkeypatch.setattr(jit_align, "_kernel", None)
    monkeypatch.setattr(kernel_build, "folder", lambda: blocker / "kernels")
    assert jit_align.load() and jit_align.kind == "jit"
    assert kernel_build.state() == {"path": str(kernel_build.built_path()), "built": False, "build_failed": None}
