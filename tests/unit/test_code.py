"""The trainer package each kind of pod gets holds every module those pods can import.

Pods get a copy of tfk8s_train without the modules they never import (tfk8s.specs.code.NOT_SHIPPED).
A module missing from a copy fails only in a running pod, so the copies are checked here against
what their entry points import, statically, lazy imports inside functions included.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from mocked_program import ROOT
from tfk8s.errors import MissingPrerequisite
from tfk8s.settings.experiment import DEFAULT_TRAINER, LAUNCHER_PACKAGE
from tfk8s.specs import code
from tfk8s.specs.code import NOT_SHIPPED, PackageUse, launcher_bundle
from tfk8s.specs.pods import LAUNCH_MODULE

PACKAGE = ROOT / LAUNCHER_PACKAGE
NAME = PACKAGE.name  # tfk8s_train


def imported(source: str) -> set[str]:
    """Files of the package that `source` imports, anywhere in it (`from tfk8s_train.x import y`,
    `from tfk8s_train import x`, `import tfk8s_train.x`)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == NAME:
                names = [alias.name for alias in node.names]
            elif node.module.startswith(f"{NAME}."):
                names = [node.module.split(".")[1]]
        elif isinstance(node, ast.Import):
            names = [alias.name.split(".")[1] for alias in node.names if alias.name.startswith(f"{NAME}.")]
        found |= {f"{name}.py" for name in names if (PACKAGE / f"{name}.py").exists()}
    return found | {"__init__.py"}


def closure(entries: set[str]) -> set[str]:
    needed, todo = set(), set(entries)
    while todo:
        module = todo.pop()
        needed.add(module)
        todo |= imported((PACKAGE / module).read_text()) - needed
    return needed


def notebook_source(path: Path) -> str:
    notebook = json.loads(path.read_text())
    return "\n".join("".join(cell["source"]) for cell in notebook["cells"] if cell["cell_type"] == "code")


def module_run_by(command: tuple[str, ...]) -> str:
    """`python -m tfk8s_train[.x] ...` -> the file Python runs."""
    assert command[:2] == ("python", "-m"), command
    dotted = command[2].split(".")
    return f"{dotted[1]}.py" if len(dotted) > 1 else "__main__.py"


def entry_points(use: PackageUse) -> set[str]:
    """What the pods of `use` run or import first."""
    launcher = module_run_by(("python", "-m", LAUNCH_MODULE))
    trainer = module_run_by(DEFAULT_TRAINER)
    if use == "experiment":
        return {launcher, trainer, "train.py"}  # train.py: `python -m tfk8s_train.train`, a documented command
    notebook = imported(notebook_source(ROOT / "training" / "master_client.ipynb"))
    return {launcher, trainer, "token_gate.py"} | notebook


@pytest.mark.parametrize("use", ["experiment", "tenant"])
def test_each_copy_of_the_package_holds_what_its_pods_import(use: PackageUse) -> None:
    shipped = set(launcher_bundle(ROOT, use).files)
    needed = closure(entry_points(use))
    assert needed <= shipped, f"{use} pods import {sorted(needed - shipped)}, which tfk8s.specs.code.NOT_SHIPPED leaves out"
    assert not shipped & NOT_SHIPPED[use]
    # Lazy imports count: the launcher imports kube_retire inside a function.
    assert "kube_retire.py" in needed


def test_the_experiments_copy_leaves_out_what_only_the_tenant_and_the_host_use() -> None:
    experiment = set(launcher_bundle(ROOT, "experiment").files)
    tenant = set(launcher_bundle(ROOT, "tenant").files)
    everything = {path.name for path in PACKAGE.glob("*.py")}
    assert tenant == everything - {"cluster.py", "runner.py"}
    gate = {"token_gate.py", "gate_session.py", "gate_limits.py", "gate_routes.py", "run_status.py", "log_tree.py"}
    assert experiment == tenant - gate - {"layouts.py"}
    # Were a left-out module imported by an experiment pod, the test above would fail: the closure sees it.
    assert "layouts.py" in closure({"layouts.py"}) and "launch.py" in closure({"layouts.py"})


def test_a_missing_trainer_package_is_a_missing_prerequisite_naming_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    """A program that imports tfk8s as a library, where the trainer package is not installed: the
    project's own error (shown alone, not as a bug), naming the fix."""
    monkeypatch.setattr(code.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(MissingPrerequisite, match=r"tfk8s_train package is not installed beside tfk8s.*: pip install tfk8s"):
        code.installed_launcher_bundle()
