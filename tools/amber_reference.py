"""Record what AMBER's official ``inference.py`` computes, for tests/test_amber.py (run by hand, not in CI).

Runs junyangwang0410/AMBER's ``inference.py`` at commit 534babf (read from a git mirror;
nothing in it changed) with the stand-in tools of tests/_amber_cases.py on the random cases
built there (tests/_amber_official.py does the running), and writes tests/data/amber_official.json:

- ``items``: per generative response, run alone, the script's counters (hallucinated nouns,
  kept nouns, covered truth objects, truth objects, named hallu objects, hallu objects, clean
  responses, responses);
- ``corpus``: the whole response file with ``--evaluation_type a`` at thresholds 0.8 (the
  default) and 0.5: every printed figure and the raw counters.

    python tools/amber_reference.py [AMBER_GIT_DIR]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
import _amber_official  # noqa: E402


def main() -> None:
    git_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else _amber_official.MIRROR
    out = ROOT / "tests" / "data" / "amber_official.json"
    out.write_text(json.dumps(_amber_official.record(git_dir), sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
