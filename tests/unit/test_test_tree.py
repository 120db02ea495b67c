"""The test tree as pytest collects it from the repository's root (`make test`, CI)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_two_test_modules_share_a_basename() -> None:
    # The test directories are no packages: pytest imports each module by its basename, and a
    # second module of the same name stops the whole collection ("import file mismatch"). Running
    # one directory at a time never shows it; CI, which collects them all, did (2026-11-27).
    found: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        found[path.name].append(str(path.relative_to(TESTS)))
    assert {name: paths for name, paths in found.items() if len(paths) > 1} == {}
