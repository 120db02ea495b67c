"""A throwaway checkout of tfk8s's component package for the tests that run it through the CLI
(tests/langhost/test_tfk8s_package.py, tests/e2e/test_yaml_package.py): what `package add` and
`pulumi up` touch is a copy, so the checkout stays clean and tests never share a plugin virtualenv.

The copy has the layout package/__main__.py relies on (tfk8s runs from the checkout it sits in):
`package/` and `examples/` copied, `infra/` and `training/` linked to this checkout's, and the
requirements the plugin's requirements.txt includes. The plugin's `venv` is made as the e2e
tests make an example's: a virtualenv whose site-packages lead to this interpreter's (a path
entry), so the CLI's `pip install -r requirements.txt` finds everything installed; with
PIP_NO_INDEX it would fail rather than reach the network.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import toolenv

ROOT = Path(__file__).resolve().parents[1]


def package_checkout(where: Path, examples: tuple[str, ...] = ()) -> Path:
    """A checkout at `where` with the package (its venv made) and the named examples; returns it."""
    where.mkdir(parents=True, exist_ok=True)
    shutil.copytree(ROOT / "package", where / "package", ignore=shutil.ignore_patterns("venv", "__pycache__"))
    for example in examples:
        shutil.copytree(ROOT / "examples" / example, where / "examples" / example)
    for linked in ("infra", "training"):
        (where / linked).symlink_to(ROOT / linked, target_is_directory=True)
    shutil.copy(ROOT / "requirements.txt", where / "requirements.txt")
    toolenv.linked_venv(where / "package" / "venv")
    return where
