"""A Pulumi YAML program's training cluster across an upgrade, for real (issue 55, point 4: "the
component package from Pulumi YAML"): on a kwok cluster of its own, the previous release's code
brings up platform-dev and alice's tenant, and a YAML program (examples/yaml-training-cluster of
that release) adds that release's component package and declares its TrainingCluster. Then the
platform and the tenant are upgraded with this tree, and the program moves to this tree's package
as a YAML user does: `pulumi package add` of the new package, `preview`, `up`.

Checked: no preview deletes or replaces anything stateful; what must keep its identity does (the
tenant's namespace, claims, volumes, token Secret; the StorageClass; the CRDs and Tenants); the
program's lock now names this release; the cluster's Job is the same object unless the preview
showed it replaced (a new run: the trainer changed); the cluster is ready again afterwards.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from drivers import Cli, Kube, per_worker, wait_until
from package_checkout import package_checkout
from tfk8s.release import VERSION
from upgrade_env import (
    DESTRUCTIVE,
    THIS_TREE,
    Release,
    assert_kept,
    destructive,
    destructive_steps,
    kept,
    kind_in,
    preview_steps,
    run_release,
    uids,
)

import toolenv
from toolenv import langhost_processes

PLATFORM, TENANT, STACK = "platform-dev", "tenant-alice", "alice-mnist"
NAMESPACE = "tfk8s-alice"
EXAMPLE = "yaml-training-cluster"
JOB = "yaml-mnist-worker"  # the example's experiment `yaml`, cluster `mnist`
KEPT = kept(NAMESPACE)
READY_WITHIN = 60.0


@pytest.fixture(scope="module")
def kube() -> Iterator[Kube]:
    name = per_worker("tfk8s-e2e-upgrade-yaml")
    with toolenv.throwaway_cluster(name) as kubeconfig:
        yield Kube(kubeconfig, cluster=name)


def the_program(work: Path, release: Release, upgrade_team: Cli) -> Cli:
    """The release's YAML example as a team's own project at `work`: before `package add` (no
    `packages:` entry), run in the team's environment (its state and passphrase, the cluster's
    admin kubeconfig), with no package index (the provider's virtualenv finds what it needs)."""
    shutil.copytree(release.tree / "examples" / EXAMPLE, work)
    document = yaml.safe_load((work / "Pulumi.yaml").read_text())
    document.pop("packages", None)
    (work / "Pulumi.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    return Cli(work, env={**(upgrade_team.env or {}), "PIP_NO_INDEX": "1"})


def job_uid(kube: Kube) -> str:
    (job,) = [j for j in kube.get("jobs", NAMESPACE) if j["metadata"]["name"].startswith(JOB)]
    return str(job["metadata"]["uid"])


def ready(program: Cli) -> bool:
    program("up", "--stack", STACK, "--refresh", "--yes", "--skip-preview")
    return program.outputs(STACK)["ready"] is True


def test_a_yaml_programs_cluster_keeps_every_stateful_object_across_an_upgrade(
    upgrade_team: Cli, kube: Kube, previous: Release, tmp_path_factory: pytest.TempPathFactory
) -> None:
    toolenv.build("yaml-host")
    for stack in (PLATFORM, TENANT):
        upgrade_team("stack", "init", stack)
        upgrade_team("up", "--stack", stack, "--yes", "--skip-preview")
    # The previous release's package, as a checkout of it is: its provider's virtualenv made there.
    toolenv.linked_venv(previous.tree / "package" / "venv")
    program = the_program(tmp_path_factory.mktemp("yaml") / EXAMPLE, previous, upgrade_team)
    program("package", "add", str(previous.tree / "package"), flags=False)
    assert (program.cwd / "sdks" / "tfk8s" / f"tfk8s-{previous.version}.yaml").exists()
    program("stack", "init", STACK)
    program("up", "--stack", STACK, "--yes", "--skip-preview")
    wait_until(lambda: ready(program), "the YAML program's cluster ready", READY_WITHIN)
    before, job_before = uids(kube, KEPT), job_uid(kube)

    run_release(upgrade_team, THIS_TREE)
    for stack in (PLATFORM, TENANT):
        assert destructive_steps(upgrade_team, stack) == [], f"{stack}: the upgrade's preview deletes or replaces"
        upgrade_team("up", "--stack", stack, "--yes", "--skip-preview")
    # The program moves to this tree's package: a checkout of it (its provider's virtualenv made).
    checkout = package_checkout(tmp_path_factory.mktemp("checkout") / "tfk8s")
    program("package", "add", str(checkout / "package"), flags=False)
    assert (program.cwd / "sdks" / "tfk8s" / f"tfk8s-{VERSION}.yaml").exists()
    steps = preview_steps(program, STACK)
    print(f"[upgrade] {STACK}: " + ", ".join(sorted(f"{op} {kind_in(urn)}" for op, urn in steps)), flush=True)
    assert destructive(steps) == [], f"{STACK}: the upgrade's preview deletes or replaces"
    program("up", "--stack", STACK, "--yes", "--skip-preview")

    after = uids(kube, KEPT)
    assert_kept(before, after, "the YAML program's upgrade")
    replaced = any(op in DESTRUCTIVE and kind_in(urn) == "Job" for op, urn in steps)
    assert (job_uid(kube) != job_before) == replaced, "the run was replaced, or not, unlike its preview said"
    wait_until(lambda: ready(program), "the YAML program's cluster ready after the upgrade", READY_WITHIN)
    backend = (upgrade_team.env or {})["PULUMI_BACKEND_URL"]
    left = langhost_processes(backend, plugins=[previous.tree / "package", checkout / "package"])
    assert not left, f"a language host or a provider outlived the CLI: {left}"
