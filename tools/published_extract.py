"""One-off extraction of src/capeval/data/published/values.csv from the paper texts.

Reads ../shared/papers (the specs below say where each table is and what its columns and rows
mean) and writes every printed number as one CSV row. The CSV is the reviewed artefact; this
script only saved the typing. tests/test_published_registry.py re-reads the papers with its
own parser and checks every stored value at its row and column.
Run: python tools/published_extract.py ../shared/papers > src/capeval/data/published/values.csv
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

from published_specs import (
    TABLES,
    block_lines,
    cells_of,
    find_row,
    is_main,
    vertical_cells,
    video_names,
)

FIELDS = ["paper", "table", "benchmark", "metric", "variant", "statistic", "value", "scale",
          "row", "offset", "col", "main", "protocol"]


def main(papers: Path) -> None:
    with open(Path(__file__).resolve().parents[1] / "src/capeval/data/published/tables.csv", "w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["paper", "table", "file", "start", "end", "caption"])
        for t in TABLES:
            w.writerow([t.paper, t.table, t.file, t.start, t.end, t.caption])
    out = csv.DictWriter(sys.stdout, FIELDS, lineterminator="\n")
    out.writeheader()
    for t in TABLES:
        lines = block_lines((papers / t.file).read_text(encoding="utf-8"), t.start, t.end)
        for anchor, offset, metric, variant, protocol in t.rows:
            cells = cells_of(find_row(lines, anchor, offset))
            cols = t.columns
            for col, cell in enumerate(cells):
                if cell is None or col >= len(cols) or cols[col] is None:
                    continue
                bench, stat, *scale = cols[col]
                name, stat = video_names(bench, metric, stat)
                out.writerow(_record(t, bench, stat, scale, name, variant, cell, anchor, offset, col, protocol))
        for anchor, metric, variant, protocol in t.vertical:
            # one cell per line: the column is the cell's position, the stored col its place on its line (0)
            for (bench, stat, *scale), (offset, cell) in zip(t.columns, vertical_cells(lines, anchor, len(t.columns))):
                name, stat = video_names(bench, metric, stat)
                out.writerow(_record(t, bench, stat, scale, name, variant, cell, anchor, offset, 0, protocol))


def _record(t, bench, stat, scale, name, variant, cell, anchor, offset, col, protocol) -> dict:
    return {"paper": t.paper, "table": t.table, "benchmark": bench, "metric": name, "variant": variant,
            "statistic": stat, "value": cell, "scale": f"{scale[0] if scale else t.scale:g}", "row": anchor,
            "offset": offset, "col": col, "main": int(is_main(t.paper, t.table, variant)),
            "protocol": protocol or t.protocol}


if __name__ == "__main__":
    main(Path(sys.argv[1]))
