"""The docs site stays true to the code: the configuration reference is what the models say, every
page is reachable from the navigation, and the code cites docs pages, not README headings."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
# A README heading cited by name: the word, then the heading in quotes (not "the README's flow").
CITATION = re.compile(r"README,? [\"'][A-Z`]")


def test_the_configuration_reference_is_what_the_models_say() -> None:
    """docs/reference/<kind>.md is generated from infra/tfk8s/settings/ (`make docs-reference`)."""
    check = subprocess.run([sys.executable, str(ROOT / "hack" / "docs_reference.py"), "--check"], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


@pytest.mark.parametrize("kind", ["platform", "tenant", "experiment"])
def test_every_key_in_the_reference_says_what_it_is_for(kind: str) -> None:
    """A key without a docstring would be an empty cell: document it in its model."""
    rows = [line for line in (DOCS / "reference" / f"{kind}.md").read_text().splitlines() if line.startswith("| `")]
    assert rows
    empty = [row.split("|")[1].strip() for row in rows if row.rstrip().endswith("|  |")]
    assert not empty, f"undocumented keys: {empty}"


def _nav_pages(nav: list[object]) -> list[str]:
    pages: list[str] = []
    for item in nav:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        pages += _nav_pages(value) if isinstance(value, list) else [str(value)]
    return pages


def test_every_docs_page_is_in_the_navigation() -> None:
    """A reader finds each topic from the nav: no page is only reachable by a link, or not at all."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    in_nav = set(_nav_pages(config["nav"]))
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert pages - in_nav == set(), "pages missing from mkdocs.yml's nav"
    assert in_nav - pages == set(), "nav entries without a page"


def test_the_readme_quick_start_is_what_ci_runs() -> None:
    """CI (.ci/run) runs the README's two commands exactly; the README keeps them in its quick start."""
    readme = (ROOT / "README.md").read_text()
    quick_start = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", quick_start, re.S)
    assert block, "the quick start has no sh block"
    commands = [line.split("#", 1)[0].strip() for line in block.group(1).splitlines() if line.strip()]
    assert commands == ["make up", "make test"]
    ci = (ROOT / ".ci" / "run").read_text()
    # Each of .ci/run's stages is one `stage "NAME" COMMAND` line, in the order they run.
    run = re.findall(r'^stage "[^"]+" (make [a-z-]+)$', ci, re.M)
    quick_start_and_down = ["make up", "make test", "make down"]
    assert [command for command in run if command in quick_start_and_down] == quick_start_and_down


def test_code_cites_docs_pages_not_readme_headings() -> None:
    """The README is a door; what the code refers to lives on a docs page (docs/<page>.md "Heading")."""
    files = [ROOT / "Makefile", ROOT / "Pulumi.yaml"]
    for folder in ("infra", "training", "hack", "lab", "tests", "bench", "policies", "stacks", ".github"):
        files += [
            p for p in (ROOT / folder).rglob("*") if p.suffix in {".py", ".sh", ".go", ".yaml", ".yml"} and ".venv" not in p.parts
        ]
    cited = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in files
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if CITATION.search(line)
    ]
    assert not cited, cited


def test_make_help_lists_every_target_but_the_internal_guard() -> None:
    """The docs say `make help` lists every target you would type: each has its `##` line."""
    targets = re.findall(r"^([a-z][a-z-]*):", (ROOT / "Makefile").read_text(), flags=re.MULTILINE)
    listed = subprocess.run(["make", "-s", "-C", str(ROOT), "help"], capture_output=True, text=True, check=True).stdout
    shown = {line.split("\t", 1)[0] for line in listed.splitlines()}
    assert set(targets) - shown == {"fleet-base"}  # apply-fleet's check of BASE, never typed


def test_the_tests_page_counts_every_golden_case() -> None:
    sys.path.insert(0, str(ROOT / "tests" / "unit"))
    from test_golden_manifests import CASES

    assert f"Kubernetes 1.25 and 1.34; {len(CASES)} cases)" in (ROOT / "docs" / "tests.md").read_text()


@pytest.mark.parametrize(("stack", "where"), [("dev", "demo"), ("alice-own", ".")])
def test_make_status_finds_the_stack_file_where_it_is(tmp_path: Path, stack: str, where: str) -> None:
    """The repository's stacks run from the demo copy; a user's own stack from the checkout."""
    demo = tmp_path / "demo"
    (demo / "stacks").mkdir(parents=True)
    (demo / "stacks" / "Pulumi.dev.yaml").write_text("config: {}\n")
    shown = subprocess.run(
        ["make", "-s", "-n", "-C", str(ROOT), "status", f"STACK={stack}", f"DEMO={demo}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    cwd = str(demo) if where == "demo" else "."
    assert f"status --stack {stack} --cwd {cwd} " in shown + " ", shown
