"""The check of a saved run (``capeval bench --out``) before :mod:`capeval.bench.report` shows
it: every field the report shows has the type it is shown as, else a one-line
:class:`~capeval.errors.InputError` naming the field."""

from __future__ import annotations

from typing import Any, Mapping

from capeval.errors import InputError, shown


def _is_number(v: Any) -> bool:
    """An int or float that formats as one (a bool is no number; an int beyond float's range
    would raise OverflowError in every format)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    try:
        float(v)
    except OverflowError:
        return False
    return True


def _where_bad(where: str, expected: str, value: Any) -> InputError:
    return InputError(f"{where}: expected {expected}, got {shown(value, 60)}")


def _field(obj: Mapping[str, Any], key: str, where: str, kind: str, *, optional: bool = False,
           null: bool = False) -> Any:
    """``obj[key]`` when it is of ``kind`` (``str``, ``number``, ``int``), else a one-line error
    naming ``where.key``; ``optional``: the key may be missing; ``null``: the value may be null."""
    if key not in obj:
        if optional:
            return None
        raise InputError(f"{where}: no {key!r}")
    value = obj[key]
    if value is None and null:
        return None
    ok = {"str": isinstance(value, str), "number": _is_number(value),
          "int": isinstance(value, int) and not isinstance(value, bool)}[kind]
    if not ok:
        text = {"str": "a string", "number": "a number", "int": "an integer"}[kind]
        raise _where_bad(f"{where}.{key}", text + (" or null" if null else ""), value)
    return value


def _obj(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise _where_bad(where, "an object", value)
    return value


def _arr(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise _where_bad(where, "a list", value)
    return value


def check_saved(data: Any) -> None:
    """A saved run (``capeval bench --out``) holds what :func:`render_html` shows, with the types
    it shows, or a one-line :class:`~capeval.errors.InputError` naming the field (``results[3].n:
    expected an integer, got '<b>'``). What the report does not show (``files``, ``settings``,
    ``published``) is not looked at; ``config`` and loader ``info`` are shown as escaped text
    whatever their types."""
    data = _obj(data, "the run")
    for i, r in enumerate(_arr(data.get("results"), "results")):
        where = f"results[{i}]"
        r = _obj(r, where)
        for key in ("benchmark", "metric", "statistic", "metric_signature", "benchmark_signature"):
            _field(r, key, where, "str")
        _field(r, "value", where, "number", null=True)
        _field(r, "n", where, "int")
        for key in ("ci_low", "ci_high"):
            _field(r, key, where, "number", null=True)
    for i, c in enumerate(_arr(data.get("comparisons", []), "comparisons")):
        where = f"comparisons[{i}]"
        c = _obj(c, where)
        for key in ("benchmark", "statistic", "metric_a", "metric_b"):
            _field(c, key, where, "str")
        for key in ("delta", "ci_low", "ci_high", "p_value"):
            _field(c, key, where, "number", null=True)
        _field(c, "n_resamples", where, "int", optional=True, null=True)
    _obj(data.get("config", {}), "config")
    for name, meta in _obj(data.get("benchmarks"), "benchmarks").items():
        where = f"benchmarks[{shown(name, 40)}]"
        meta = _obj(meta, where)
        for key in ("title", "protocol", "citation", "signature"):
            _field(meta, key, where, "str")
        _field(meta, "scale", where, "str", optional=True)
        for metric, by_setting in _obj(meta.get("explanations", {}), f"{where}.explanations").items():
            for setting, rows in _obj(by_setting, f"{where}.explanations[{shown(metric, 40)}]").items():
                at = f"{where}.explanations[{shown(metric, 40)}][{shown(setting, 40)}]"
                for k, row in enumerate(_arr(rows, at)):
                    row = _obj(row, f"{at}[{k}]")
                    for key in ("id", "json", "png"):
                        _field(row, key, f"{at}[{k}]", "str")
                    _field(row, "score", f"{at}[{k}]", "number", null=True)
    for i, p in enumerate(_arr(data.get("plots", []), "plots")):
        where = f"plots[{i}]"
        p = _obj(p, where)
        for key in ("benchmark", "metric", "human_label"):
            _field(p, key, where, "str")
        levels = _arr(p.get("human_levels"), f"{where}.human_levels")
        edges = _arr(p.get("metric_edges"), f"{where}.metric_edges")
        counts = _arr(p.get("counts"), f"{where}.counts")
        if len(edges) < 2 or len(counts) != len(levels):
            raise InputError(f"{where}: {len(counts)} rows of counts for {len(levels)} human levels and "
                             f"{len(edges)} metric edges (expected one row per level and at least 2 edges)")
        for k, level in enumerate(levels):
            if not isinstance(level, str):
                raise _where_bad(f"{where}.human_levels[{k}]", "a string", level)
        for k, edge in enumerate(edges):
            if not _is_number(edge):
                raise _where_bad(f"{where}.metric_edges[{k}]", "a number", edge)
        for k, row in enumerate(counts):
            if not isinstance(row, list) or len(row) != len(edges) - 1:
                raise _where_bad(f"{where}.counts[{k}]", f"a list of {len(edges) - 1} counts", row)
            for j, c in enumerate(row):
                if isinstance(c, bool) or not isinstance(c, int) or c < 0:
                    raise _where_bad(f"{where}.counts[{k}][{j}]", "a count (an integer >= 0)", c)
