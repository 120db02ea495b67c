"""A throwaway kwok cluster and an isolated Pulumi project copy for the end-to-end tests.

The cluster (`tfk8s-e2e`) is separate from the one `make up` uses, and is deleted when the
session ends, also when a test fails. Stack state and config live in a temporary directory, so
tests that change config never touch stacks/.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = "tfk8s-e2e"


def _cache() -> Path:
    return Path(os.environ.get("TFK8S_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tfk8s")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/e2e" in str(item.fspath):
            item.add_marker(pytest.mark.e2e)


class Kube:
    """kubectl against the e2e cluster only, answers parsed from JSON."""

    def __init__(self, kubeconfig: Path) -> None:
        self.kubeconfig = kubeconfig
        self.binary = str(_cache() / "bin" / "kubectl")

    def run(self, *args: str) -> str:
        return subprocess.run(
            [self.binary, "--kubeconfig", str(self.kubeconfig), *args], check=True, capture_output=True, text=True
        ).stdout

    def get(self, kind: str, namespace: str | None = None, name: str | None = None) -> Any:
        scope = ["-n", namespace] if namespace else (["-A"] if name is None else [])
        items = json.loads(self.run("get", kind, *([name] if name else []), *scope, "-o", "json"))
        return items if name else items["items"]


@pytest.fixture(scope="session")
def kube() -> Iterator[Kube]:
    env = {**os.environ, "TFK8S_CLUSTER_NAME": CLUSTER}
    subprocess.run([str(ROOT / "hack" / "cluster.sh"), "start"], check=True, env=env)
    kubeconfig = Path(
        subprocess.run(
            [str(ROOT / "hack" / "cluster.sh"), "kubeconfig"], check=True, env=env, capture_output=True, text=True
        ).stdout.strip()
    )
    try:
        yield Kube(kubeconfig)
    finally:
        subprocess.run([str(ROOT / "hack" / "cluster.sh"), "stop"], check=False, env=env)


@pytest.fixture(scope="session")
def project(tmp_path_factory: pytest.TempPathFactory, kube: Kube) -> Path:
    """A copy of Pulumi.yaml and stacks/, with its own state backend, pointing at the e2e cluster."""
    work = tmp_path_factory.mktemp("project")
    shutil.copy(ROOT / "Pulumi.yaml", work / "Pulumi.yaml")
    shutil.copytree(ROOT / "stacks", work / "stacks")
    (work / "infra").symlink_to(ROOT / "infra")  # Pulumi.yaml's `main` must exist
    (work / "state").mkdir()
    os.environ["PULUMI_BACKEND_URL"] = f"file://{work / 'state'}"
    os.environ["KUBECONFIG"] = str(kube.kubeconfig)
    return work
