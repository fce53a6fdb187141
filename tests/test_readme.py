"""The README's first two commands are the documented entry points; CI must run the second."""

from __future__ import annotations

import doctest
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```bash\n(.*?)```", text, re.S)
    assert block, "README must start with a bash block of the two set-up commands"
    lines = [l for l in block.group(1).splitlines() if l.strip()]
    assert len(lines) == 2
    return lines


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert _readme_commands()[1] in ci.splitlines()


def test_ci_installs_the_built_wheel():
    """.ci/run builds the sdist and wheel and runs the README's first job from the installed wheel."""
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert ".ci/wheel-check" in ci
    assert ci.index(".ci/wheel-check") < ci.index(_readme_commands()[1])


def test_pip_check_complains_only_of_the_no_deps_packages():
    """After the README's test install, `pip check` names only the packages its second half installs
    with --no-deps (docs/install.md says why each), and only requirements the docs name."""
    out = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True).stdout
    no_deps = re.search(r"--no-deps (.*?) &&", _readme_commands()[1]).group(1).split()
    names = {spec.split("==")[0].lower() for spec in no_deps}
    install = (ROOT / "docs" / "install.md").read_text(encoding="utf-8")
    for line in out.splitlines():
        if line.startswith("No broken requirements"):
            continue
        match = (re.match(r"(\S+) \S+ requires (\S+), which is not installed", line)
                 or re.match(r"(\S+) \S+ has requirement ([A-Za-z0-9_.-]+)\W.*, but you have ", line))
        assert match, line
        package, missing = match.group(1).lower().replace("_", "-"), match.group(2).rstrip(",").lower()
        assert package in names, line
        assert f"`{missing}`" in install, f"docs/install.md does not say why {missing} is left out: {line}"


def test_readme_main_job_runs(tmp_path):
    main = _readme_commands()[0]
    job = main.split("&&", 1)[1].strip()
    assert job.startswith("capeval score")
    args = job.split()[1:]
    out = subprocess.run(
        [sys.executable, "-m", "capeval.cli", *args, "--quiet", "--per-item", str(tmp_path / "p.json")],
        cwd=ROOT, capture_output=True, text=True,
    )
    assert out.returncode == 0, out.stderr
    payload = json.loads(out.stdout)
    assert set(payload["scores"]) == {"bleu-1", "bleu-2", "bleu-3", "bleu-4", "meteor", "rouge-l", "cider-d", "spice"}
    per_item = json.loads((tmp_path / "p.json").read_text())
    assert set(per_item["cider-d"]) == {"img1", "img2", "img3", "img4"}


def test_package_docstring_examples():
    import capeval

    failures, _ = doctest.testmod(capeval)
    assert failures == 0


def test_docs_python_example_runs():
    """The Python example (moved from the README to docs/usage.md) runs as written."""
    text = (ROOT / "docs" / "usage.md").read_text(encoding="utf-8")
    block = re.search(r"## Scoring from Python\n\n```python\n(.*?)```", text, re.S)
    assert block
    namespace: dict = {}
    exec(compile(block.group(1), "docs/usage.md", "exec"), namespace)
    assert set(namespace["report"]) == {"bleu-1", "bleu-2", "bleu-3", "bleu-4", "meteor", "rouge-l", "cider-d", "spice"}


def test_readme_metric_table_names_every_registered_metric():
    """The README's metric table has one row per registered metric, its description and a docs link."""
    from capeval import registry

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `([^`]+)` \| (.*) \|$", text, re.M))
    assert set(rows) == set(registry.metrics())
    for name, spec in registry.metrics().items():
        description, link = rows[name].rsplit(" | ", 1)
        assert description == spec.description.replace("|", "\\|"), name
        page = re.fullmatch(r"\[[^]]+\]\((docs/[^)]+\.md)\)", link)
        assert page and (ROOT / page.group(1)).is_file(), (name, link)


def test_readme_stays_short():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 120
