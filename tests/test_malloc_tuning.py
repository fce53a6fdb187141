"""The ``capeval`` program's glibc malloc settings (capeval/malloc_tuning.py): set by the program
only, never over the user's own settings, never in a process that imports capeval."""

from __future__ import annotations

import importlib
import platform
import subprocess
import sys

import pytest

from capeval import malloc_tuning

cli_main = importlib.import_module("capeval.cli.main")  # the module (capeval.cli's `main` is the function)


@pytest.mark.parametrize("environ, chose", [
    ({}, False),
    ({"GLIBC_TUNABLES": "glibc.pthread.rseq=0"}, False),  # tunables, but none of malloc's
    ({"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=0"}, True),
    ({"GLIBC_TUNABLES": "glibc.pthread.rseq=0:glibc.malloc.arena_max=2"}, True),
    ({"MALLOC_TRIM_THRESHOLD_": "0"}, True),
    ({"MALLOC_MMAP_THRESHOLD_": "131072"}, True),
    ({"MALLOC_ARENA_MAX": "1"}, True),
])
def test_user_settings_are_recognised(environ, chose):
    assert malloc_tuning.user_chose(environ) is chose


def test_the_users_settings_are_left_alone(monkeypatch):
    def no_libc(*args, **kwargs):
        raise AssertionError("mallopt must not be looked up when the user chose malloc settings")

    import ctypes

    monkeypatch.setattr(ctypes, "CDLL", no_libc)
    assert malloc_tuning.tune_for_program({"GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=65536"}) is False
    assert malloc_tuning.tune_for_program({"MALLOC_TRIM_THRESHOLD_": "0"}) is False


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt")
def test_mallopt_accepts_the_settings():
    # in a child: the settings are process-wide, this test process keeps its own
    code = ("from capeval.malloc_tuning import tune_for_program; "
            "import sys; sys.exit(0 if tune_for_program({}) else 1)")
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0


def test_only_the_program_tunes(monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(malloc_tuning, "tune_for_program", lambda *a: calls.append(a) or True)
    # an embedding caller (argv given): its process is left as it is
    assert cli_main.main(["list"]) == 0
    assert calls == []
    # run as the program (argv None: the command line)
    monkeypatch.setattr(sys, "argv", ["capeval", "list"])
    assert cli_main.main() == 0
    assert calls == [()]
    capsys.readouterr()
