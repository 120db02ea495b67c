"""A throwaway kwok cluster and an isolated Pulumi project copy for the end-to-end tests.

The cluster (`tfk8s-e2e`) is separate from the one `make up` uses, and is deleted when the
session ends, also when a test fails. Stack state and config live in a temporary directory, so
tests that change config never touch stacks/. Every Pulumi command is the real CLI with tfk8s's
own language host, in the environment `hack/env.sh` (`make env`) prints for users.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import toolenv

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = "tfk8s-e2e"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/e2e" in str(item.fspath):
            item.add_marker(pytest.mark.e2e)


class Kube:
    """kubectl against the e2e cluster only, answers parsed from JSON."""

    def __init__(self, kubeconfig: Path) -> None:
        self.kubeconfig = kubeconfig
        self.binary = toolenv.KUBECTL

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
    with toolenv.throwaway_cluster(CLUSTER) as kubeconfig:
        yield Kube(kubeconfig)


@pytest.fixture(scope="session")
def project(tmp_path_factory: pytest.TempPathFactory, kube: Kube) -> Path:
    """A copy of Pulumi.yaml and stacks/, with its own state backend, pointing at the e2e cluster.

    The process environment becomes what `eval "$(make env)"` gives a user, with this copy's
    backend, the e2e cluster and a passphrase of its own, so the Automation API-driven tests and
    the plain-CLI tests run the same `pulumi` and language host.
    """
    work = toolenv.project_copy(tmp_path_factory.mktemp("project"))
    # As a user whose shell already has these set before `eval "$(make env)"` (env.sh keeps them).
    os.environ.update(
        {
            "PULUMI_BACKEND_URL": f"file://{work / 'state'}",
            "KUBECONFIG": str(kube.kubeconfig),
            "PULUMI_CONFIG_PASSPHRASE": secrets.token_urlsafe(24),
        }
    )
    os.environ.pop("PULUMI_CONFIG_PASSPHRASE_FILE", None)
    os.environ.update(toolenv.exported())
    return work


@dataclass
class Cli:
    """The plain `pulumi` CLI in a project copy, as a user types it (in `env`, default: this process's)."""

    cwd: Path
    env: dict[str, str] | None = None

    def __call__(self, *args: str, check: bool = True, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["pulumi", *args, "--non-interactive", "--color", "never"],
            cwd=self.cwd,
            capture_output=True,
            text=True,
            env=env or self.env or dict(os.environ),
        )
        if check and done.returncode != 0:
            raise AssertionError(f"pulumi {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
        return done

    def outputs(self, stack: str, *, show_secrets: bool = False) -> dict[str, Any]:
        flags = ["--show-secrets"] if show_secrets else []
        return json.loads(self("stack", "output", "--stack", stack, "--json", *flags).stdout)


@pytest.fixture(scope="session")
def cli(project: Path) -> Cli:
    return Cli(project)


PLATFORM = "platform-dev"


@pytest.fixture(scope="session")
def host_volumes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the local backend's hostPath volumes live: on this machine (kwok's nodes are simulated)."""
    return tmp_path_factory.mktemp("volumes")


@pytest.fixture(scope="session")
def platform(cli: Cli, host_volumes: Path) -> str:
    """The project copy's platform-dev stack, deployed once for the experiments of the later modules
    (users alice and bob from the stack file, and dora, added as a platform team would)."""
    cli("stack", "select", "--create", PLATFORM)
    cli("config", "set", "--stack", PLATFORM, "--path", "tfk8s:users[2].name", "dora")
    cli("config", "set", "--stack", PLATFORM, "--path", "tfk8s:platform.storage.local.hostPathRoot", str(host_volumes))
    cli("up", "--stack", PLATFORM, "--yes", "--skip-preview")
    assert cli.outputs(PLATFORM)["ready"] is True
    return PLATFORM
