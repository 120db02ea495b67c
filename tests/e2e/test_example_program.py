"""examples/training-cluster for real: a Pulumi program of its own, with tfk8s installed from the
wheel this checkout builds into the example's own virtualenv, `pulumi up` with the plain CLI
against the throwaway e2e cluster, then `pulumi destroy`. No tfk8s stack file, no platform or
tenant stack: the program declares its namespace, its volumes and one tfk8s.TrainingCluster.
(tests/unit/test_example_under_mocks.py checks what it declares under mocks.)"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from drivers import Cli, Kube

import toolenv

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "training-cluster"
STACK = "example"
NAMESPACE = "tfk8s-example"


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory, project: Path, kube: Kube) -> Iterator[Cli]:
    """A copy of the example with tfk8s pip-installed from the wheel into its `venv` (the
    dependencies come from the project's virtualenv: a path entry, not the index), its own state
    backend and passphrase, deployed to the e2e cluster; destroyed afterwards."""
    work = tmp_path_factory.mktemp("example")
    shutil.copytree(EXAMPLE, work, dirs_exist_ok=True)
    wheels = tmp_path_factory.mktemp("wheel")
    python = sys.executable
    # As `make wheel` builds it (the virtualenv's setuptools: no index asked).
    build = [python, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels)]
    subprocess.run(build, check=True)
    (wheel,) = wheels.glob("tfk8s-*.whl")
    venv_python = toolenv.linked_venv(work / "venv")
    subprocess.run([python, "-m", "pip", "--python", str(venv_python), "install", "-q", "--no-deps", str(wheel)], check=True)
    (work / "state").mkdir()
    env = {
        **os.environ,  # the e2e environment (`project`): the toolchain's pulumi on PATH, its plugins
        "PULUMI_BACKEND_URL": f"file://{work / 'state'}",
        "PULUMI_CONFIG_PASSPHRASE": secrets.token_urlsafe(24),
        "KUBECONFIG": str(kube.kubeconfig),
    }
    cli = Cli(work, env=env)
    cli("stack", "init", STACK)
    cli("config", "set", "--stack", STACK, "hostPathRoot", str(tmp_path_factory.mktemp("volumes")))
    try:
        yield cli
    finally:
        cli("destroy", "--stack", STACK, "--yes", "--skip-preview", check=False)


def test_the_example_program_deploys_a_training_cluster_whose_tasks_run(example: Cli, kube: Kube) -> None:
    done = example("up", "--stack", STACK, "--yes", "--skip-preview", check=False)
    assert done.returncode == 0, f"pulumi up exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    outputs = example.outputs(STACK)
    assert outputs["namespace"] == NAMESPACE
    assert outputs["clusterSpec"] == {
        "ps": [f"{STACK}-mnist-ps-0:2222"],
        "worker": [f"{STACK}-mnist-worker-{i}.{STACK}-mnist-worker:2222" for i in range(2)],
    }
    # What the program declared is there, as Kubernetes runs it: the PS available, the workers' pods up.
    services = {s["metadata"]["name"] for s in kube.get("services", NAMESPACE)}
    assert {f"{STACK}-mnist-ps-0", f"{STACK}-mnist-worker"} <= services
    (deployment,) = kube.get("deployments", NAMESPACE)
    assert deployment["status"].get("availableReplicas") == 1
    job = kube.get("jobs", NAMESPACE, f"{STACK}-mnist-worker")
    assert job["spec"]["completions"] == 2
    assert outputs["runUid"] == job["metadata"]["uid"]
