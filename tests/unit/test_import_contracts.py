"""The import contracts (pyproject.toml, `make lint`) hold today, and would catch the next drift:
each forbidden import below, added on purpose to a copy of infra/, breaks the contract it names."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT = Path(sys.executable).parent / "lint-imports"

# (module file under infra/, the line added to it, the contract it breaks)
DRIFTS = [
    ("tfk8s/errors.py", "import pulumi", "The stack files' settings, the pure builders and the errors touch no Pulumi"),
    ("tfk8s/kube/client.py", "import pulumi", "The Kubernetes client touches no Pulumi"),
    ("tfk8s/kube/secrets.py", "from tfk8s.kube import objects", "The Kubernetes layer"),
    (
        "tfk8s/specs/labels.py",
        "from tfk8s.stack_kinds import progress",
        "The program's layers: each imports only the layers below it",
    ),
    ("tfk8s/kube/client.py", "from tfk8s.checks import access", "The program's layers: each imports only the layers below it"),
    ("tfk8s/checks/quota.py", "from tfk8s.checks import access", "Each check stands alone"),
    ("tfk8s/components/user_node.py", "from tfk8s.components import guard", "The platform's components are independent"),
    (
        "tfk8s/components/user_node.py",
        "from tfk8s.checks import user_node",
        "The program's layers: each imports only the layers below it",
    ),
    ("tfk8s/components/queued_cluster.py", "from tfk8s.components import user_env", "An experiment's components never reach"),
    ("tfk8s_gitops/plan.py", "from tfk8s.checks import context", "GitOps runs the program through the pulumi CLI"),
    ("tfk8s_gitops/plan.py", "from tfk8s.components import training_cluster", "GitOps runs the program through the pulumi CLI"),
    ("tfk8s_gitops/operator.py", "from tfk8s.stack_kinds import config", "GitOps runs the program through the pulumi CLI"),
    ("tfk8s/doctor/reads.py", "from tfk8s.doctor import probes", "The doctor's layers"),
    ("tfk8s/doctor/network_probe.py", "from tfk8s.doctor import probes", "The doctor's layers"),
    (
        "tfk8s/components/training_cluster.py",
        "from tfk8s.components import namespace_bounds",
        "An experiment's components never reach",
    ),
    ("tfk8s/stack_kinds/progress.py", "from tfk8s.stack_kinds import experiment", "The stacks' layers"),
    ("tfk8s/stack_kinds/platform.py", "from tfk8s.stack_kinds import tenant", "The stacks' layers"),
    ("tfk8s/cli/render.py", "from tfk8s.cli import main", "The command's layers"),
]


def lint(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT), "--config", str(root / "pyproject.toml"), "--no-cache"],
        cwd=root,
        env={"PYTHONPATH": str(root / "infra"), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """infra/'s packages and pyproject.toml, the contracts' whole input."""
    root = tmp_path_factory.mktemp("contracts")
    shutil.copy(ROOT / "pyproject.toml", root)
    for package in ("tfk8s", "tfk8s_gitops"):
        shutil.copytree(ROOT / "infra" / package, root / "infra" / package, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def test_the_contracts_hold() -> None:
    done = lint(ROOT)
    assert done.returncode == 0 and "Broken contracts" not in done.stdout, done.stdout + done.stderr


@pytest.mark.parametrize(("module", "line", "contract"), DRIFTS, ids=[f"{m}:{line}" for m, line, _ in DRIFTS])
def test_a_forbidden_import_breaks_its_contract(checkout: Path, module: str, line: str, contract: str) -> None:
    path = checkout / "infra" / module
    kept = path.read_text()
    path.write_text(kept + f"\n{line}  # added on purpose\n")
    try:
        done = lint(checkout)
    finally:
        path.write_text(kept)
    assert done.returncode != 0, done.stdout
    broken = done.stdout.split("Broken contracts", 1)[-1]
    assert contract in broken, done.stdout  # the report's section of each broken contract is headed by its name
    assert line.split()[1] in broken, done.stdout  # and names the module imported
