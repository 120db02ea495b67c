"""The modules pytest's path makes importable by a bare name (pyproject.toml's `pythonpath`, and
each test folder, which pytest puts first for its own modules) are unambiguous: each name is one
file, shadows neither the standard library nor an installed distribution, and is not another
name with its underscores moved (`real_node` beside `realnode` was both the tests' drivers and the
lab's node)."""

from __future__ import annotations

import importlib.metadata
import pkgutil
import sys
import tomllib
from collections import defaultdict

from mocked_program import ROOT

# Modules pytest itself finds in every folder, or Python runs: never imported by their bare name.
PER_FOLDER = {"conftest", "__main__"}
# The project's own packages, installed (editable) from the folders on the path.
OURS = {"tfk8s", "tfk8s_gitops", "tfk8s_train"}


def on_the_path() -> dict[str, list[str]]:
    """Each bare module name -> the folders it is found in."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    folders = [ROOT / p for p in config["tool"]["pytest"]["ini_options"]["pythonpath"]]
    folders += sorted({test.parent for test in (ROOT / "tests").rglob("test_*.py") if not (test.parent / "__init__.py").exists()})
    found: dict[str, list[str]] = defaultdict(list)
    for folder in folders:
        for module in pkgutil.iter_modules([str(folder)]):
            if module.name not in PER_FOLDER:
                found[module.name].append(folder.relative_to(ROOT).as_posix())
    return found


def test_each_bare_name_is_one_module_of_ours_alone() -> None:
    found = on_the_path()
    assert len(found) > 50  # the test reads the folders it means to
    twice = {name: folders for name, folders in found.items() if len(folders) > 1}
    assert not twice, f"one name, several modules: {twice}"
    stdlib = sorted(set(found) & set(sys.stdlib_module_names))
    assert not stdlib, f"modules that shadow the standard library: {stdlib}"
    installed = importlib.metadata.packages_distributions()
    shadowing = sorted(name for name in set(found) - OURS if name in installed)
    assert not shadowing, f"modules that shadow an installed distribution: {[(n, installed[n]) for n in shadowing]}"


def test_no_two_bare_names_differ_only_by_underscores() -> None:
    spelled: dict[str, list[str]] = defaultdict(list)
    for name in on_the_path():
        spelled[name.replace("_", "")].append(name)
    alike = sorted(names for names in spelled.values() if len(names) > 1)
    assert not alike, f"names a reader takes for one another: {alike}"
