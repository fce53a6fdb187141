"""One-off extraction of src/capeval/data/published/upstream.csv: the Polaris, Nebula and
LongCap-Arena values.

The Polos (arXiv 2402.18091) and DENEB (arXiv 2409.19255) papers are not in ../shared/papers.
Their tables' Polaris/Nebula numbers are read here from the expected-value files of the Polos
authors' own reproduction kit, github.com/YuigaWada/CaptionEvalKit-for-VLMs, at a pinned commit
(benchmarks/expected/<metric>/<benchmark>.json: ``source`` names the paper and table the numbers
were copied from, ``correlations`` holds them). The VELA paper (arXiv 2509.25818, EMNLP 2025) is
not there either: its LongCap-Arena values for VELA come from the same kit's
``benchmarks/expected/vela/longcaparena-test{a,b}-{desc,rel,flu}.json``. A file whose ``source`` names no paper table
("Polaris benchmark table, ...") is left out and listed on stderr.
tests/test_published_registry.py re-reads every stored value from the same commit's file.
The file also holds rows this tool does not write (the CAPTURE README's and CapArena's, read
by hand from other repositories): they are kept where they are; the kit's rows are replaced
in place (matched by file and key), rows the kit no longer has are dropped and new ones
appended, so a rerun on the same commit rewrites the file byte for byte.
Run: python tools/published_upstream.py /path/to/mirror/of/CaptionEvalKit-for-VLMs.git \\
     [src/capeval/data/published/upstream.csv]
"""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

UPSTREAM_CSV = Path(__file__).resolve().parents[1] / "src" / "capeval" / "data" / "published" / "upstream.csv"
REPO = "YuigaWada/CaptionEvalKit-for-VLMs"
COMMIT = "23f154b924618cc257458291434c4b44e5bf7410"

# the kit's metric directory -> capeval's name (BLEU is BLEU-4 and ROUGE is ROUGE-L: the files' score_name)
METRICS = {"bleu": "bleu-4", "cider": "cider-d", "meteor": "meteor", "rouge": "rouge-l", "spice": "spice",
           "clipscore": "clip-s", "refclipscore": "ref-clip-s", "pacscore": "pac-s", "refpacscore": "ref-pac-s",
           "polos": "polos", "expert": "expert", "vela": "vela"}

# the paper and table a file's ``source`` names (checked against the whole string, nothing guessed)
SOURCES = [
    (re.compile(r"^(Polos CVPR 2024|Wada et al\. 2024 Polos) Table 1\b"), "polos", "1"),
    (re.compile(r"^Matsuda et al\. 2024 DENEB Table 1\b"), "deneb", "1"),
    (re.compile(r"^arXiv:2512\.21582 Table 1\b"), "pearl", "1"),
    (re.compile(r"^EXPERT ACL 2025 Findings Table 2\b"), "expert", "2"),
    (re.compile(r"^Matsuda et al\. 2025 VELA Table 1\b"), "vela", "1"),
]
CAPTIONS = {("polos", "1"): "Correlation with human judgments (Polaris column)",
            ("deneb", "1"): "Correlation with human judgments (Nebula column)",
            ("pearl", "1"): "Correlation with human judgments (Nebula column, corrected test scores)",
            ("expert", "2"): "Correlation with human judgments (Polaris and Nebula columns)",
            ("vela", "1"): "Correlation with human judgments on LongCap-Arena (Test A / Test B x Desc., Rel., Flu.)"}
# the Nebula test scores the paper used: arXiv 2512.21582 reports on the corrected scores
# (the kit applies the Spica corrections before comparing with these files), DENEB on the release's
PROTOCOL = {("pearl", "nebula"): "corrected test scores (hiranohachiman/Spica)",
            ("deneb", "nebula"): "original test scores (the release's human_score)"}
# the loader options of capeval's benchmark that give that protocol (capeval reproduce passes them)
OPTIONS = {("pearl", "nebula"): "scores=corrected", ("deneb", "nebula"): "scores=original"}

FIELDS = ["paper", "table", "benchmark", "metric", "variant", "statistic", "value", "scale", "main",
          "protocol", "options", "caption", "upstream", "key", "note"]


def _git(mirror: str, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", mirror, *args], check=True, capture_output=True, text=True).stdout


# the kit's LongCap-Arena files: longcaparena-test{a,b}-{desc,rel,flu} -> capeval's loader options
LONGCAP = re.compile(r"^longcaparena-test(?P<split>[ab])-(?P<perspective>desc|rel|flu)$")


def _bench(name: str) -> tuple[str, str] | None:
    """capeval's benchmark and loader options for a kit file name, None for other benchmarks."""
    if name in ("polaris", "nebula"):
        return name, ""
    m = LONGCAP.match(name)
    return ("longcap-arena", f"split=test-{m['split']};perspective={m['perspective']}") if m else None


def main(mirror: str, target: Path = UPSTREAM_CSV) -> None:
    fresh = {_row_id(r): r for r in _kit_rows(mirror)}
    with target.open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    merged = []
    for row in rows:
        if not row["upstream"].startswith(f"github:{REPO}@"):
            merged.append(row)  # another repository's row: not this tool's
        elif _row_id(row) in fresh:
            merged.append(fresh.pop(_row_id(row)))
    merged += fresh.values()
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    with tmp.open("w", encoding="utf-8", newline="") as f:
        out = csv.DictWriter(f, FIELDS, lineterminator="\n")
        out.writeheader()
        out.writerows(merged)
    os.replace(tmp, target)


def _row_id(row: dict) -> tuple[str, str]:
    """A kit row's identity across kit commits: the file's path and the value's key."""
    return row["upstream"].split(":", 2)[2], row["key"]


def _kit_rows(mirror: str) -> list[dict]:
    """The rows the kit's expected-value files at :data:`COMMIT` give, in the files' order."""
    out: list[dict] = []
    paths = _git(mirror, "ls-tree", "-r", "--name-only", COMMIT, "benchmarks/expected").split()
    for path in paths:
        _, _, kit_metric, name = path.split("/")
        found = _bench(name.removesuffix(".json"))
        if found is None or kit_metric not in METRICS:
            continue
        bench, bench_options = found
        data = json.loads(_git(mirror, "show", f"{COMMIT}:{path}"))
        hit = next(((p, t) for rx, p, t in SOURCES if rx.match(data["source"])), None)
        if hit is None:
            print(f"left out {path}: source names no paper table ({data['source']!r})", file=sys.stderr)
            continue
        paper, table = hit
        for stat, value in sorted(data["correlations"].items()):
            out.append({"paper": paper, "table": table, "benchmark": bench, "metric": METRICS[kit_metric],
                          "variant": "", "statistic": stat, "value": value, "scale": 1, "main": 1,
                          "protocol": PROTOCOL.get((paper, bench), "mean of five runs; the released checkpoint is one"
                                                   if paper == "vela" else ""),
                          "options": OPTIONS.get((paper, bench), bench_options), "caption": CAPTIONS[(paper, table)],
                          "upstream": f"github:{REPO}@{COMMIT}:{path}", "key": f"correlations.{stat}",
                          "note": data["source"]})
    return out


if __name__ == "__main__":
    main(sys.argv[1], *(Path(a) for a in sys.argv[2:3]))
