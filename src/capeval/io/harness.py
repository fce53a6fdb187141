"""``capeval score --from HARNESS FILE``: a run an evaluation harness already made, scored by capeval.

``lmms-eval`` (or ``lmms-eval:TASK`` for a renamed file): a ``--log_samples`` file,
:mod:`capeval.io.harness_lmms`; ``vlmevalkit``: a prediction file, :mod:`capeval.io.harness_vlmeval`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from capeval.errors import InputError, UnknownNameError
from capeval.io.captions import CaptionFile

HARNESSES = ("lmms-eval", "vlmevalkit")


def read_harness(harness: str, path: str | Path) -> tuple[str, dict[str, str], dict[str, list[str]] | None]:
    """``(what was read, {id: candidate}, {id: references} or None)`` of a harness's file.

    ``harness``: ``lmms-eval``, ``lmms-eval:TASK`` or ``vlmevalkit``; anything else is an error
    naming the known ones."""
    name, _, task = harness.partition(":")
    name = name.strip().lower()
    path = Path(path)
    if name == "lmms-eval":
        from capeval.io.harness_lmms import LMMS_EVAL_VERSION, read_samples

        task, candidates, references = read_samples(path, task.strip() or None)
        return f"lmms-eval {LMMS_EVAL_VERSION} samples of {task}", candidates, references
    if name == "vlmevalkit" and not task:
        from capeval.io.harness_vlmeval import VLMEVALKIT_COMMIT, read_predictions

        candidates, references = read_predictions(path)
        return f"VLMEvalKit {VLMEVALKIT_COMMIT[:7]} predictions", candidates, references
    raise UnknownNameError(f"--from {harness!r}: unknown harness (known: lmms-eval, lmms-eval:TASK, vlmevalkit)")


def check_from(args: Any) -> None:
    """``capeval score --from HARNESS FILE``: both given, and none of ``-c``, ``-r``, ``--items``,
    ``--compare`` beside them (those carry inputs of their own), before any work."""
    if not args.from_harness:
        raise InputError(f"{args.harness_file}: a file is scored with --from HARNESS (lmms-eval, lmms-eval:TASK or "
                         "vlmevalkit); other inputs come with -c/-r or --items")
    if not args.harness_file:
        raise InputError(f"--from {args.from_harness}: name the harness's file after it (--from HARNESS FILE)")
    for flag, value in (("-c", args.candidates), ("-r", args.references), ("--items", args.items),
                        ("--compare", args.compare)):
        if value:
            raise InputError(f"--from reads the candidates and references from {args.harness_file}; {flag} cannot "
                             "be given with it")
    resolved = Path(args.harness_file).resolve()
    for flag in ("out", "per_item", "per_item_extras", "html"):
        value = getattr(args, flag, None)
        if value and Path(value).resolve() == resolved:
            raise InputError(f"--{flag.replace('_', '-')} {value} is the --from file; it would be overwritten")


def harness_files(args: Any) -> list[CaptionFile]:
    """The candidates (and references, when the harness's file has them) of ``--from HARNESS
    FILE``, as the caption files of ``-c``/``-r`` would be (:func:`check_from` checked the options)."""
    path = Path(args.harness_file)
    what, candidates, references = read_harness(args.from_harness, path)
    files = [CaptionFile(path, "candidates", candidates, what, len(candidates), len(candidates))]
    if references is not None:
        files.append(CaptionFile(path, "references", references, what, len(references),
                                 sum(map(len, references.values()))))
    return files
