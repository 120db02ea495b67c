"""tfk8s's refusals are one family in one module (tfk8s.errors), worded by one formatter."""

from __future__ import annotations

import ast
from pathlib import Path

import pulumi
import pytest
from tfk8s import errors

INFRA = Path(__file__).resolve().parents[2] / "infra"
SOURCES = sorted(p for p in INFRA.rglob("*.py") if p != INFRA / "tfk8s" / "errors.py")


def test_every_refusal_is_a_run_error_the_cli_shows_without_a_traceback() -> None:
    family = [value for value in vars(errors).values() if isinstance(value, type) and issubclass(value, errors.Refusal)]
    assert len(family) == 9 and all(issubclass(error, pulumi.RunError) for error in family)
    assert issubclass(errors.ConfigError, ValueError)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(INFRA)))
def test_no_other_module_defines_a_run_error_or_words_a_refusal_itself(path: Path) -> None:
    tree = ast.parse(path.read_text())
    bases = [ast.unparse(base) for node in ast.walk(tree) if isinstance(node, ast.ClassDef) for base in node.bases]
    assert not [b for b in bases if b.endswith("RunError")], "define it in tfk8s.errors, as a Refusal"
    texts = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    assert not [t for t in texts if errors.NOTHING_CHANGED in t and "Refused" not in t], "word it with tfk8s.errors"


def test_the_formats() -> None:
    assert errors.refusing(["a", "b"]) == "refusing: nothing was changed:\n  - a\n  - b"
    assert errors.refusing(["a"], "to adopt objects tfk8s does not own") == (
        "refusing to adopt objects tfk8s does not own; nothing was changed:\n  - a"
    )
    assert errors.unchanged("tfk8s:namespace: not yours") == "tfk8s:namespace: not yours; nothing was changed"
    assert str(errors.ConfigError(["tfk8s:x: is required"])) == "invalid tfk8s configuration:\n  - tfk8s:x: is required"
