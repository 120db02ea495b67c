"""The releases recorded in releases.toml (docs/operations/releases.md), for the workshop: the
upgrade test (tests/e2e/test_upgrade.py) and bench (bench/upgrade.py) start from the newest one
before this tree, and tests/unit/test_releases.py checks every entry against the history."""

from __future__ import annotations

import tomllib
from pathlib import Path

from tfk8s.release import VERSION

ROOT = Path(__file__).resolve().parents[1]


def recorded() -> list[dict[str, str]]:
    """Every release releases.toml records, oldest first, each with its version, commit and date."""
    releases: list[dict[str, str]] = tomllib.loads((ROOT / "releases.toml").read_text()).get("release", [])
    return releases


def previous() -> dict[str, str]:
    """The newest recorded release other than this tree's version: what an upgrade starts from."""
    older = [release for release in recorded() if release["version"] != VERSION]
    if not older:
        raise LookupError("releases.toml records no release before this one: nothing to upgrade from")
    return older[-1]
