"""Releases (docs/operations/releases.md): one version, tfk8s.release.VERSION, that the wheel, the
component package, the CLI and the stacks' outputs and contracts all say; each recorded release
(releases.toml) is the version its commit carries, with its entry in CHANGELOG.md."""

from __future__ import annotations

import importlib.metadata
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.version import Version
from tfk8s import release
from tfk8s.release import VERSION

import releases

ROOT = Path(__file__).resolve().parents[2]
RELEASES = releases.recorded()
CHANGELOG = (ROOT / "CHANGELOG.md").read_text()
# Semantic versioning, with `-dev.0` for main between two releases (the next release's version).
DEV = "-dev.0"
SEMVER = re.compile(r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-dev\.0)?")
# Keep a Changelog's kinds of change, and ours for what a breaking release asks of its users.
KINDS = ("Added", "Changed", "Deprecated", "Removed", "Fixed", "Security", "Migration")


def sections() -> list[tuple[str, str]]:
    """CHANGELOG.md's releases, newest first: (heading, body)."""
    parts = re.split(r"^## (.+)$", CHANGELOG, flags=re.MULTILINE)
    return list(zip(parts[1::2], parts[2::2], strict=True))


def test_the_version_is_semantic_and_the_one_every_artefact_says() -> None:
    assert SEMVER.fullmatch(VERSION), VERSION
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "tfk8s.release.VERSION"}
    # The installed wheel's metadata (make venv installs it from pyproject.toml): PEP 440's spelling.
    assert Version(importlib.metadata.version("tfk8s")) == Version(VERSION)
    schema = json.loads((ROOT / "package" / "schema.json").read_text())
    assert schema["version"] == VERSION  # the component package's (hack/package_args.py writes it)


def test_tfk8s_version_prints_it() -> None:
    done = subprocess.run([sys.executable, "-m", "tfk8s.cli", "--version"], capture_output=True, text=True, cwd=ROOT / "infra")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"tfk8s {VERSION}"


@pytest.mark.parametrize("release", RELEASES, ids=[r["version"] for r in RELEASES])
def test_each_recorded_release_is_the_version_its_commit_carries(release: dict[str, str]) -> None:
    assert set(release) == {"version", "commit", "date"}, release
    assert SEMVER.fullmatch(release["version"]) and not release["version"].endswith(DEV), release
    assert re.fullmatch(r"[0-9a-f]{40}", release["commit"]), release
    shown = subprocess.run(
        ["git", "show", f"{release['commit']}:infra/tfk8s/release.py"], cwd=ROOT, capture_output=True, text=True
    )
    assert shown.returncode == 0, f"{release['commit']} is not in this clone's history: {shown.stderr}"
    assert f'VERSION = "{release["version"]}"' in shown.stdout
    # Reachable from here: a release is cut from main, which this clone's history contains.
    ancestor = subprocess.run(["git", "merge-base", "--is-ancestor", release["commit"], "HEAD"], cwd=ROOT)
    assert ancestor.returncode == 0, f"{release['version']}: {release['commit']} is not an ancestor of HEAD"


def test_releases_are_recorded_in_order_and_this_version_comes_after_them() -> None:
    versions = [Version(r["version"]) for r in RELEASES]
    assert versions == sorted(versions) and len(set(versions)) == len(versions)
    assert [r["date"] for r in RELEASES] == sorted(r["date"] for r in RELEASES)
    if VERSION.endswith(DEV):  # main between releases: the next one's version, not yet recorded
        assert all(Version(VERSION.removesuffix(DEV)) > v for v in versions)
    else:  # the commit a release is cut from: the newest, or not yet recorded
        assert all(Version(VERSION) >= v for v in versions)


def test_the_changelog_has_an_entry_per_release_newest_first_in_keep_a_changelog_shape() -> None:
    entries = sections()
    headings = [heading for heading, _ in entries]
    assert headings[0] == "Unreleased", "CHANGELOG.md starts with an Unreleased section for main's changes"
    released = [re.fullmatch(r"(\S+) - (\d{4}-\d{2}-\d{2})", heading) for heading in headings[1:]]
    assert all(released), headings
    listed = [(m.group(1), m.group(2)) for m in released if m]
    assert [Version(v) for v, _ in listed] == sorted((Version(v) for v, _ in listed), reverse=True)
    recorded = {(r["version"], r["date"]) for r in RELEASES}
    assert recorded <= set(listed), f"recorded releases without their entry: {recorded - set(listed)}"
    if not VERSION.endswith(DEV):
        assert VERSION in {v for v, _ in listed}, f"{VERSION} has no entry"
    for heading, body in entries:
        kinds = re.findall(r"^### (.+)$", body, flags=re.MULTILINE)
        assert set(kinds) <= set(KINDS), (heading, kinds)
        assert kinds == [k for k in KINDS if k in kinds], (heading, kinds)  # in the usual order


def test_a_release_that_removes_or_changes_something_says_how_to_migrate() -> None:
    for heading, body in sections():
        kinds = set(re.findall(r"^### (.+)$", body, flags=re.MULTILINE))
        if heading != "Unreleased" and kinds & {"Changed", "Removed"}:
            assert "Migration" in kinds, f"{heading}: a change or removal without its migration notes"


@pytest.mark.parametrize(
    ("a", "b", "apart"),
    [
        ("0.3.0", "0.3.1", 0),
        ("0.3.0", "0.4.0-dev.0", 1),
        ("0.4.0-dev.0", "0.2.0", 2),
        ("0.9.2", "1.0.0", 1),
        ("1.2.0", "1.9.3", 0),
        ("1.0.0", "3.0.0", 2),
    ],
)
def test_release_lines_are_minors_before_1_0_and_majors_after(a: str, b: str, apart: int) -> None:
    assert release.lines_apart(a, b) == release.lines_apart(b, a) == apart


def test_facts_of_no_release_are_read_as_the_unrecorded_0_2(monkeypatch: pytest.MonkeyPatch) -> None:
    window = {"what": "facts", "upgrade_first": "the tenant"}
    monkeypatch.setattr(release, "VERSION", "0.3.0")
    assert release.outside_window("experiment", None, **window) is None
    monkeypatch.setattr(release, "VERSION", "0.4.0-dev.0")
    assert "published before tfk8s 0.3.0 (an unrecorded release), 2 release lines before" in str(
        release.outside_window("experiment", None, **window)
    )


def test_a_version_that_is_no_release_is_named() -> None:
    with pytest.raises(ValueError, match=r"'0\.3' is not a tfk8s release"):
        release.line("0.3")
