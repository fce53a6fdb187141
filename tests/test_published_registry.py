"""The published-values registry against the papers' text: every stored number is re-read
from ../shared/papers at its table, row and column (so a typo in values.csv fails here).

The parser below is written for this test (it is not the extraction script's): a row is the
line of the table's block that starts with the row's label (after the HTML bold/underline
tags the PDF conversion left), followed by its citation, if any, and then by cells;
``offset`` moves from that line (PAC-S++ prints its own row's numbers on the line above the
label); the cells are the printed numbers and ``-`` of that line, deltas ``(+2.8)`` and
citations ``[12]`` left out.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from capeval import registry
from capeval.bench import published as pub

PAPERS = Path(__file__).resolve().parents[1].parent / "shared" / "papers"
_CLEAN = re.compile(r"</?[bu]>")
_CELL = re.compile(r"^(?:-|\.?-?\d+(?:\.\d+)?\.?|\.\d+\.\d+)$")


@pytest.fixture(scope="module")
def texts() -> dict[str, list[str]]:
    if not PAPERS.is_dir():
        pytest.skip(f"paper texts not found at {PAPERS}")
    return {p.name: p.read_text(encoding="utf-8").splitlines() for p in PAPERS.glob("*.txt")}


def _block(texts: dict[str, list[str]], paper: str, table: str) -> list[str]:
    t = pub.tables()[(paper, table)]
    lines = texts[t["file"]]
    starts = [i for i, line in enumerate(lines) if t["start"] in line]
    assert starts, f"{paper} table {table}: start {t['start']!r} not in {t['file']}"
    end = next(k for k in range(starts[0] + 1, len(lines)) if t["end"] in lines[k])
    return lines[starts[0]:end]


def _row(block: list[str], label: str) -> int:
    hits = []
    for k, line in enumerate(block):
        clean = " ".join(_CLEAN.sub("", line).split())  # tabs and no-break spaces of the PDF text
        if not clean.startswith(label):
            continue
        rest = re.sub(r"^\s*\[\d+\]", "", clean[len(label):])
        if rest == "" or re.match(r"^\s+(-|\.?\d|\([+±-])", rest):
            hits.append(k)
    assert len(hits) == 1, f"row {label!r}: {len(hits)} matching lines"
    return hits[0]


def _numbers(line: str, label: str) -> list[str]:
    clean = " ".join(_CLEAN.sub("", line).split())
    if label and clean.startswith(label):
        clean = clean[len(label):]
    toks = [t for t in clean.split() if not re.match(r"^\[\d+\]$|^\(", t)]
    return [t for t in toks if _CELL.match(t)]


def _as_float(tok: str) -> float:
    tok = tok.rstrip(".")
    if tok.count(".") == 2:  # ".51.5": a stray typesetting dot before the number
        tok = tok[1:]
    return float(tok)


def _text_cells() -> list[pub.Cell]:
    return [c for c in pub.cells() if not c.upstream and not c.outputs]


def test_every_stored_value_is_printed_at_its_row_and_column(texts) -> None:
    bad = []
    for c in _text_cells():
        block = _block(texts, c.paper, c.table)
        k = _row(block, c.row) + c.offset
        line = block[k]
        cells = _numbers(line, c.row if c.offset == 0 else "")
        if c.col >= len(cells) or cells[c.col] == "-" or _as_float(cells[c.col]) != c.value:
            bad.append(f"{c.paper} T{c.table} {c.row!r}{c.offset:+d} col {c.col}: stored {c.value}, "
                       f"paper line {line.strip()[:90]!r}")
    assert not bad, "\n".join(bad[:20])


def test_no_printed_number_of_a_stored_row_is_left_out(texts) -> None:
    """Every number on a stored line is stored (a row typed with a column too few fails)."""
    stored = defaultdict(set)
    for c in _text_cells():
        stored[(c.paper, c.table, c.row, c.offset)].add(c.col)
    for (paper, table, row, offset), cols in stored.items():
        block = _block(texts, paper, table)
        cells = _numbers(block[_row(block, row) + offset], row if offset == 0 else "")
        printed = {i for i, t in enumerate(cells) if t != "-"}
        assert cols == printed, f"{paper} T{table} {row!r}: stored columns {sorted(cols)}, printed {sorted(printed)}"


def test_registry_shape_and_names() -> None:
    cells = pub.cells()
    assert {c.paper for c in cells} == set(pub.PAPERS)
    keys = Counter((c.paper, c.table, c.benchmark, c.metric, c.variant, c.statistic, c.options) for c in cells)
    assert max(keys.values()) == 1, [k for k, n in keys.items() if n > 1][:5]
    benches = {"flickr8k-expert", "flickr8k-cf", "composite", "pascal-50s", "foil", "thumb", "vatex-eval",
               "activitynet-foil", "polaris", "nebula", "detailcaps", "caparena", "caparena-auto",
               "amber", "longcap-arena", *(f"vdc-{d}" for d in ("camera", "short", "background", "main_object",
                                                                "detailed")), "dream-1k", "capability"}
    assert {c.benchmark for c in cells} <= benches
    # capeval's names where capeval has the metric (the paper's "ROUGE" is rouge-l, "CIDEr" cider-d)
    assert {"bleu-1", "bleu-4", "rouge-l", "meteor", "cider-d", "spice", "clip-s", "pac-s++", "hice-s",
            "bridge"} <= {c.metric for c in cells}
    assert not {"rouge", "cider", "bert-s", "refclip-s"} & {c.metric for c in cells}
    known = set(registry.metrics())
    assert any(c.metric not in known for c in cells)  # e.g. leic, tiger: kept, marked not runnable


def test_published_lookup_prefers_the_metrics_own_paper() -> None:
    assert pub.published("flickr8k-expert", "hice-s", "kendall_tau_c") == (56.4, "Zeng et al. 2024 (HICEScore), Table 1")
    assert pub.published("pascal-50s", "ref-pac-s", "accuracy_mean")[0] == 84.8  # the PAC-S poster's, not BRIDGE's 84.7
    assert pub.published("thumb", "visce2", "pearson_total")[0] == 39.0  # ".39" x100
    assert pub.published("flickr8k-expert", "pac-s++", "kendall_tau_b")[0] == 54.1  # Table 1, not Table 8 (ViT-L/14)
    assert pub.PUBLISHED[("foil", "ref-hice-s", "accuracy_1ref")][0] == 96.4
    assert pub.published("flickr8k-expert", "no-such-metric", "kendall_tau_b") is None


# --- the values of papers not in ../shared/papers, read from a repository file ---------------------

_UPSTREAM = re.compile(r"^github:(?P<repo>[\w.-]+/[\w.-]+)@(?P<commit>[0-9a-f]{40}):(?P<path>\S+)$")


def _mirror(repo: str) -> Path | None:
    """A local git mirror of ``repo``: ``$CAPEVAL_UPSTREAM_MIRRORS/<owner>+<name>/repo`` or the
    ``.mirror`` folder beside or above the checkout; None when there is none."""
    roots = [Path(os.environ["CAPEVAL_UPSTREAM_MIRRORS"])] if os.environ.get("CAPEVAL_UPSTREAM_MIRRORS") else []
    here = Path(__file__).resolve().parents[1]
    roots += [here.parent / ".mirror", here.parent.parent / ".mirror"]
    for root in roots:
        git_dir = root / repo.replace("/", "+") / "repo"
        if git_dir.is_dir():
            return git_dir
    return None


def _markdown_cell(text: str, key: str) -> str:
    """``md:<first header cell>/<row label>/<column>``: the cell of the Markdown table whose header
    starts with that cell, in the row labelled so (bold stripped), ``column`` counted after the label."""
    header, label, col = key[3:].rsplit("/", 2)
    lines = text.splitlines()
    top = [k for k, line in enumerate(lines) if line.startswith(f"| {header} |")]
    assert len(top) == 1, f"{key}: {len(top)} tables with that header"
    k = top[0] + 2
    while k < len(lines) and lines[k].startswith("|"):
        cells = [c.strip() for c in lines[k].strip().strip("|").split("|")]
        if cells[0].strip("*") == label:
            return cells[1 + int(col)].strip("$").replace("e^", "e")
        k += 1
    raise AssertionError(f"{key}: no row {label!r}")


def _html_cell(text: str, key: str) -> str:
    """``html:<id>``: the text of the element with that id, tags and spaces removed."""
    m = re.search(rf'<td[^>]*\bid="{re.escape(key[5:])}"[^>]*>(.*?)</td>', text, re.S)
    assert m, f"{key}: no such cell"
    return re.sub(r"\s+", "", re.sub(r"<[^>]+>", "", m[1]))


def _file_value(text: str, key: str) -> tuple[float, str | None]:
    """The number at ``key`` in a file's text and, for the kit's JSON files, the ``source`` they name."""
    if key.startswith("md:"):
        return float(_markdown_cell(text, key)), None
    if key.startswith("html:"):
        return float(_html_cell(text, key)), None
    data = value = json.loads(text)
    for part in key.split("."):
        value = value[part]
    return float(value), data["source"]


def test_upstream_values_are_those_of_their_repository_file() -> None:
    """Every upstream.csv value equals the number at its key in the named file at the named commit,
    and the paper/table a kit file names is the stored note (so a typo or a wrong attribution fails);
    repositories without a local mirror are listed and skipped."""
    ups = [c for c in pub.cells() if c.upstream]
    assert {c.benchmark for c in ups} == {"polaris", "nebula", "detailcaps", "caparena", "caparena-auto",
                                          "longcap-arena"}
    assert all(_UPSTREAM.match(c.upstream) for c in ups)
    bad, missing, checked = [], set(), 0
    for c in ups:
        m = _UPSTREAM.match(c.upstream)
        git_dir = _mirror(m["repo"])
        if git_dir is None:
            missing.add(m["repo"])
            continue
        text = subprocess.run(["git", "--git-dir", str(git_dir), "show", f"{m['commit']}:{m['path']}"],
                              check=True, capture_output=True, text=True).stdout
        value, source = _file_value(text, c.key)
        checked += 1
        if value != c.value or (source is not None and source != c.note):
            bad.append(f"{c.upstream} {c.key}: stored {c.value} / {c.note!r}, file {value} / {source!r}")
    assert not bad, "\n".join(bad)
    if not checked:
        pytest.skip(f"no local mirror of {', '.join(sorted(missing))} (set CAPEVAL_UPSTREAM_MIRRORS): upstream.csv not re-read")


def test_markdown_and_html_keys_read_the_printed_cell() -> None:
    """The two file readers above on small tables in the layouts they parse (the CAPTURE README's
    Markdown table with ``$...$`` cells and ``2.6e^7``; the arXiv HTML cells with bold spans)."""
    md = ("| Caption metric | PCC | 1-R2 |\n| --- | --- | --- |\n| **BLEU** | $0.2608$ | $54.75$ |\n"
          "| **CIDEr** | $0.1148$ | $2.6e^7$ |\n")
    assert _file_value(md, "md:Caption metric/CIDEr/1") == (2.6e7, None)
    assert _file_value(md, "md:Caption metric/BLEU/0") == (0.2608, None)
    html = ('<td class="x" id="S4.T2.1.1.7.9" style="p">0. 231</td>\n'
            '<td class="x" id="S4.T2.1.1.21.3" style="p"><span class="b" id="S4.T2.1.1.21.3.1">0.628</span></td>')
    assert _file_value(html, "html:S4.T2.1.1.7.9") == (0.231, None)
    assert _file_value(html, "html:S4.T2.1.1.21.3") == (0.628, None)
    with pytest.raises(AssertionError):
        _file_value(md, "md:Caption metric/METEOR/0")


def test_upstream_attribution_and_protocol() -> None:
    """The paper of each upstream cell is the one its note names; Nebula cells say which test scores."""
    names = {"polos": ("Polos",), "deneb": ("DENEB",), "pearl": ("arXiv:2512.21582",), "expert": ("EXPERT",),
             "capture": ("CAPTURE README",), "caparena": ("arXiv 2503.12329v1",), "vela": ("VELA",)}
    for c in (c for c in pub.cells() if c.upstream):
        assert any(n in c.note for n in names[c.paper]) and (f"Table {c.table}" in c.note or c.table == "readme"), c
        if c.benchmark == "nebula" and c.paper != "expert":
            assert c.bench_options()["scores"] in ("original", "corrected"), c
    assert pub.published("polaris", "polos", "kendall_tau_c")[0] == 57.8
    assert "CaptionEvalKit" in pub.published("polaris", "polos", "kendall_tau_c")[1]


def test_visce2_comparison_tables_win_over_table_1() -> None:
    """VisCE2's Table 1 prints its own row again (THumB w/ human R .07) where the comparison Table 2
    prints .06: the paper column shows Table 2's; both are stored and Table 1's row is runnable."""
    assert pub.published("thumb", "visce2", "pearson_R") == (6.0, "Maeda et al. 2024 (VisCE2), Table 2")
    t1 = [c for c in pub.cells() if (c.paper, c.table, c.metric) == ("visce2", "1", "visce2")]
    assert len(t1) == 9 and all(c.main for c in t1)
    assert {c.variant for c in pub.cells() if (c.paper, c.table) == ("visce2", "4")} == {"LLaVA-v1.5", "GPT-4V"}


def test_detailed_caption_papers() -> None:
    """The CAPTURE README's consistency cells (averages over DetailCaps-100 and -4870: not comparable
    with one release) and CapArena's agreement cells, in bench units (x100; 1-R^2 raw)."""
    cap = {(c.metric, c.statistic): c for c in pub.select(["capture"])}
    assert len(cap) == 28 and {c.benchmark for c in cap.values()} == {"detailcaps"}
    assert cap[("capture", "pcc")].x100 == 50.91 and cap[("bleu-4", "kendall_tau_b")].x100 == 18.66
    assert cap[("cider-d", "one_minus_r2")].x100 == 2.6e7 and cap[("capture", "sample_tau")].x100 == 60.18
    assert all("DetailCaps-100" in c.not_comparable for c in cap.values())
    arena = pub.select(["caparena"], "2")
    assert pub.published("caparena", "meteor", "agreement") == (57.6, "Cheng et al. 2025 (CapArena, arXiv 2503.12329v1), "
                                                              "Table 2 (as transcribed in " + arena[0].upstream + ")")
    assert pub.published("caparena", "cider-d", "spearman_models")[0] == -27.9
    assert pub.published("caparena", "capture", "kendall_models")[0] == 53.8
    assert {c.statistic for c in arena} == {"agreement", "agreement_level_1", "agreement_level_2", "agreement_level_3",
                                            "agreement_level_4", "spearman_models", "kendall_models"}
    assert not any(c.main for c in arena if c.variant.startswith("Long-CLIP"))
