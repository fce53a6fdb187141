"""Every option of every subcommand, given twice, accumulates or is refused: never last-wins
(issue 47 item 1). The test walks the whole argparse tree, so an option added later is covered
without a line here."""

from __future__ import annotations

import argparse
import contextlib
import io
from typing import Any, Iterator

import pytest

from capeval.cli.main import build_parser, main
from capeval.cli.repeats import CommaList, ExtendList, StoreOnce

#: actions whose repeat means the same (flags) or adds up by argparse's own design
_FLAGS = (argparse._StoreTrueAction, argparse._StoreFalseAction, argparse._StoreConstAction, argparse._CountAction,
          argparse._HelpAction, argparse._VersionAction)
_CANDIDATE_VALUES = ("1", "0.5", "x", "a=b", "m.k=v", "a.json")


def _walk(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _walk(sub, (*path, name))


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> tuple[argparse.Namespace | None, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            return parser.parse_known_args(argv)[0], err.getvalue()
        except SystemExit:
            return None, err.getvalue()


def _positionals(parser: argparse.ArgumentParser, but: argparse.Action | None = None) -> list[str]:
    """What the parser requires besides the option under test: positionals, then required options."""
    args: list[str] = []
    for action in parser._actions:
        if action is but or isinstance(action, argparse._SubParsersAction):
            continue
        if action.option_strings:
            if action.required:
                args = [action.option_strings[0], _valid_values(parser, action, 1, check=False)[0], *args]
            continue
        if action.nargs in ("*", "?"):
            continue
        args.append(str(next(iter(action.choices))) if action.choices else "x")
    return args


def _valid_values(parser: argparse.ArgumentParser, action: argparse.Action, n: int, check: bool = True) -> list[str]:
    """``n`` values the option accepts on its own (distinct where the option allows): a value is
    bad when argparse names this very option in its error (``argument --x/-y: ...``)."""
    pool = [str(c) for c in action.choices] if action.choices else list(_CANDIDATE_VALUES)
    opt = action.option_strings[0]
    own = f"argument {'/'.join(action.option_strings)}:"
    good = []
    for value in pool:
        ns, err = _parse(parser, [opt, value, *(_positionals(parser, but=action) if check else [])])
        if ns is not None or own not in err:
            good.append(value)
    assert good, f"no value found that {opt} accepts"
    return (good * n)[:n] if len(good) < n else good[:n]


def _options() -> list[Any]:
    cases = []
    for path, parser in _walk(build_parser(), ("capeval",)):
        for action in parser._actions:
            if action.option_strings and not isinstance(action, _FLAGS):
                cases.append(pytest.param(parser, action, id=f"{' '.join(path)} {action.option_strings[0]}"))
    return cases


def test_the_tree_is_walked() -> None:
    names = {p.id for p in _options()}
    assert {"capeval score --metrics", "capeval bench --metrics", "capeval compare --candidates",
            "capeval score --option", "capeval train pacs --set"} <= names
    assert len(names) > 90


@pytest.mark.parametrize("parser, action", _options())
def test_repeated_option_accumulates_or_is_refused(parser: argparse.ArgumentParser, action: argparse.Action) -> None:
    assert type(action) in (StoreOnce, ExtendList, CommaList, argparse._AppendAction, argparse._ExtendAction), (
        f"{action.option_strings}: {type(action).__name__} has no repeat rule (cli/repeats.py)")
    opt = action.option_strings[-1]
    first, second = _valid_values(parser, action, 2)
    ns, err = _parse(parser, [opt, first, opt, second, *_positionals(parser, but=action)])
    if isinstance(action, StoreOnce):
        assert ns is None and "given more than once" in err and action.option_strings[0] in err, err
        return
    assert ns is not None, err
    got = getattr(ns, action.dest)
    if isinstance(action, CommaList):
        assert got == f"{first},{second}"
    elif isinstance(action, ExtendList):
        assert list(got) == [first, second]  # the default replaced, both uses kept
    else:  # append: argparse's own accumulation
        assert list(got)[-2:] == [first, second]


def test_comma_list_replaces_its_default_then_adds_up() -> None:
    parser = build_parser()
    assert parser.parse_args(["score"]).metrics == "coco"
    assert parser.parse_args(["score", "-m", "bleu-4"]).metrics == "bleu-4"
    assert parser.parse_args(["score", "-m", "bleu-4", "-m", "rouge-l,cider-d"]).metrics == "bleu-4,rouge-l,cider-d"
    # one parser parsed twice: the second parse starts afresh
    assert parser.parse_args(["score", "-m", "meteor"]).metrics == "meteor"


def test_score_with_two_metric_options_scores_both(tmp_path, capsys) -> None:
    from pathlib import Path

    examples = Path(__file__).resolve().parents[1] / "examples"
    rc = main(["score", "-m", "bleu-4", "-m", "rouge-l", "-c", str(examples / "candidates.json"),
               "-r", str(examples / "references.json"), "-q"])
    import json

    assert rc == 0
    assert sorted(json.loads(capsys.readouterr().out)["scores"]) == ["bleu-4", "rouge-l"]
