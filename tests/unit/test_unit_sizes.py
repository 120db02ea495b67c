"""No unit of infra/ longer than a screen (issue 58): a module at most 350 lines, a function or
method at most 60. The units grew back past both once, unseen, while a feature landed
(`tfk8s_gitops/pipeline.py` 376, `checks/context.py` 355, the GitOps command's parser 62): this
names the next one, with its length, so it is split along its seam before it lands."""

from __future__ import annotations

import ast
from pathlib import Path

INFRA = Path(__file__).resolve().parents[2] / "infra"
MODULE_LINES = 350
FUNCTION_LINES = 60


def _modules() -> list[Path]:
    return sorted(INFRA.rglob("*.py"))


def test_infra_has_the_modules_it_is_checked_on() -> None:
    names = {path.relative_to(INFRA).as_posix() for path in _modules()}
    assert {"tfk8s/program.py", "tfk8s/checks/context.py", "tfk8s_gitops/pipeline.py"} <= names


def test_no_module_of_infra_is_longer_than_350_lines() -> None:
    long = {
        path.relative_to(INFRA).as_posix(): lines
        for path in _modules()
        if (lines := len(path.read_text().splitlines())) > MODULE_LINES
    }
    assert not long, f"modules over {MODULE_LINES} lines: split each along a seam it has: {long}"


def test_no_function_of_infra_is_longer_than_a_screen() -> None:
    long = {}
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                assert node.end_lineno is not None
                if (lines := node.end_lineno - node.lineno + 1) > FUNCTION_LINES:
                    long[f"{path.relative_to(INFRA).as_posix()}:{node.lineno} {node.name}"] = lines
    assert not long, f"functions over {FUNCTION_LINES} lines: split each into its steps: {long}"
