"""A throwaway kwok cluster and an isolated Pulumi project copy for the end-to-end tests.

The cluster (`tfk8s-e2e`, or TFK8S_E2E_CLUSTER to run two sessions side by side; under
pytest-xdist each worker's own, `tfk8s-e2e-gw0`, ...: drivers.per_worker) is separate from the one
`make up` uses, and is deleted when the session ends, also when a test fails. Stack
state and config live in a temporary directory, so tests that change config never touch stacks/.
Every Pulumi command is the real CLI with tfk8s's own language host, in the environment
`hack/env.sh` (`make env`) prints for users.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
import queueing_env
import upgrade_env
from drivers import CLUSTER, Cli, Kube

import toolenv


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/e2e" in str(item.fspath):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def kube() -> Iterator[Kube]:
    with toolenv.throwaway_cluster(CLUSTER) as kubeconfig:
        yield Kube(kubeconfig, cluster=CLUSTER)


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


@pytest.fixture(scope="session")
def cli(project: Path) -> Cli:
    return Cli(project)


PLATFORM = "platform-dev"


@pytest.fixture(scope="session")
def host_volumes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the local backend's hostPath volumes live: on this machine (kwok's nodes are simulated)."""
    return tmp_path_factory.mktemp("volumes")


def deployed(cli: Cli, stack: str) -> None:
    """`stack` up and ready: deployed if it is not (never yet, or destroyed by a module before:
    test_stack_model ends by destroying the platform and its tenants, and no module may depend on
    running before it)."""
    if cli.outputs(stack).get("ready") is not True:
        cli("up", "--stack", stack, "--yes", "--skip-preview")
        assert cli.outputs(stack)["ready"] is True, cli.outputs(stack)


@pytest.fixture(scope="session")
def configured_platform(cli: Cli, host_volumes: Path) -> str:
    """The project copy's platform-dev stack, configured once (not deployed: see `platform`), with the
    pull requests' preview identity (test_preview_identity.py tries it; every module's tenants bind it)."""
    cli("stack", "select", "--create", PLATFORM)
    cli("config", "set", "--stack", PLATFORM, "--path", "tfk8s:platform.storage.local.hostPathRoot", str(host_volumes))
    cli("config", "set", "--stack", PLATFORM, "--path", "tfk8s:platform.gitops.previewIdentity", "true")
    return PLATFORM


@pytest.fixture(scope="module")
def platform(cli: Cli, configured_platform: str) -> str:
    """platform-dev, deployed for the module: once in the session, again if a module destroyed it."""
    deployed(cli, configured_platform)
    return configured_platform


TENANTS = {"alice": "tenant-alice", "bob": "tenant-bob", "dora": "tenant-dora"}


@pytest.fixture(scope="session")
def configured_tenants(cli: Cli, configured_platform: str) -> dict[str, str]:
    """user -> tenant stack on the session's platform: alice and bob from the repository's stack
    files, and dora, added as a platform team adds a user (a new tenant stack, typed in with
    `config set`)."""
    cli.init_tenant(TENANTS["dora"], platform=configured_platform, user="dora")
    for stack in TENANTS.values():
        cli("stack", "select", "--create", stack)
    return TENANTS


@pytest.fixture(scope="module")
def tenants(cli: Cli, platform: str, configured_tenants: dict[str, str]) -> dict[str, str]:
    """The tenant stacks, each deployed for the module (in turn), like `platform`."""
    for stack in configured_tenants.values():
        deployed(cli, stack)
    return configured_tenants


@pytest.fixture(scope="session")
def queue_kube() -> Iterator[Kube]:
    """The queueing tests' own cluster, with Kueue and JobSet (tests/e2e/queueing_env.py): started
    once, for the first module that asks, and deleted at the session's end."""
    with toolenv.throwaway_cluster(queueing_env.CLUSTER, queueing=True) as kubeconfig:
        yield Kube(kubeconfig, cluster=queueing_env.CLUSTER)


@pytest.fixture(scope="session")
def queue_cli(tmp_path_factory: pytest.TempPathFactory, queue_kube: Kube) -> Cli:
    """The queueing platform and tenants alice and bob on it, up (tests/e2e/queueing_env.py)."""
    cli = queueing_env.project(tmp_path_factory.mktemp("queueing"), queue_kube.kubeconfig)
    queueing_env.queueing_platform(cli, tmp_path_factory.mktemp("queueing-volumes"))
    cli("up", "--stack", queueing_env.PLATFORM, "--yes", "--skip-preview")
    for stack in queueing_env.TENANTS.values():
        queueing_env.queueing_tenant(cli, stack)
        cli("up", "--stack", stack, "--yes", "--skip-preview")
    for stack in (queueing_env.PLATFORM, *queueing_env.TENANTS.values()):
        assert cli.outputs(stack)["ready"] is True, cli.outputs(stack)
    return cli


@pytest.fixture(scope="module")
def previous(tmp_path_factory: pytest.TempPathFactory) -> upgrade_env.Release:
    """The release before this tree, extracted, with its virtualenv (tests/e2e/upgrade_env.py)."""
    return upgrade_env.previous_release(tmp_path_factory)


@pytest.fixture(scope="module")
def upgrade_team(tmp_path_factory: pytest.TempPathFactory, previous: upgrade_env.Release, kube: Kube) -> Cli:
    """A team's project on the previous release, on the module's `kube` (an upgrade test's own cluster)."""
    return upgrade_env.team_project(tmp_path_factory.mktemp("team"), previous, kube.kubeconfig)
