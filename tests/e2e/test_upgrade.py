"""An upgrade from the previous release to this tree, for real (issue 55, point 4), on a kwok cluster
of its own: the previous release's code (the commit releases.toml records, extracted with `git
archive`) brings up a platform, two tenants and an experiment of each replication shape; then this
tree upgrades them in the documented order (docs/operations/releases.md): the platform, alice and her
experiment, bob's experiment while his tenant is still on the previous release (inside the window),
then bob. Each `preview` comes first and must show no replacement or deletion of anything stateful;
afterwards every namespace, claim, volume, token Secret, StorageClass, CRD and Tenant has the uid it
had, and every stack is ready and says this release. Then a contract outside the window (bob's,
edited to say an old release) is refused by an experiment's preview, naming both releases. Last,
the way back: the previous release's code again, in the same order, with the same checks.

The team's project is one directory whose `infra` (Pulumi.yaml's main) and `.venv` lead to the
previous release's, then to this tree's: as a team's repository moves to a new tfk8s, its stack files
and state staying where they are. Not here yet: experiments training on the real node with
checkpoints, the queued and the Pulumi YAML shapes, and a toolchain that changed between releases
(see the fixture `previous`).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from drivers import CLUSTER, Cli, Kube
from tfk8s.release import STATEFUL_KINDS, VERSION

import releases
import toolenv

ROOT = Path(__file__).resolve().parents[2]
PLATFORM, ALICE, BOB = "platform-dev", "tenant-alice", "tenant-bob"
ALICE_RUN, BOB_RUN = "alice-between", "bob-in-graph"
# Steps of `pulumi preview --json` that delete what they touch (Pulumi's OpType). They may not touch
# STATEFUL_KINDS; a run's Job or trainer ConfigMap may be replaced by a release that changes
# them, which its preview then shows as a new run.
DESTRUCTIVE = {"delete", "replace", "create-replacement", "delete-replaced", "discard", "remove-pending-replace"}
# What holds data or identity, and must keep its uid across the upgrade (kind, namespace or None).
KEPT = [
    ("namespace", None),
    ("persistentvolumeclaims", "tfk8s-alice"),
    ("persistentvolumeclaims", "tfk8s-bob"),
    ("persistentvolumes", None),
    ("secrets", "tfk8s-alice"),
    ("secrets", "tfk8s-bob"),
    ("storageclasses", None),
    ("customresourcedefinitions", None),
]


@pytest.fixture(scope="module")
def previous(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], Path, Path]:
    """The previous release, its tree, and the virtualenv its program runs in."""
    release = releases.previous()
    tree = tmp_path_factory.mktemp(f"tfk8s-{release['version']}")
    archive = subprocess.run(["git", "archive", release["commit"]], cwd=ROOT, check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    # Its toolchain: the same pins are the same binaries (hack/tools.sh caches by version). A release
    # with other pins needs its own CLI and provider, which this test does not build yet.
    assert (tree / "hack" / "versions.sh").read_text() == (ROOT / "hack" / "versions.sh").read_text(), (
        f"{release['version']} pins another toolchain (hack/versions.sh): building it is not implemented"
    )
    # Its virtualenv: its own requirements; where they are this tree's, this interpreter's packages
    # (no index), its own tfk8s found first, from its infra/ (the program's directory).
    venv = tmp_path_factory.mktemp("previous-venv") / "venv"
    python = toolenv.linked_venv(venv)
    if (tree / "requirements.txt").read_text() != (ROOT / "requirements.txt").read_text():
        subprocess.run([str(python), "-m", "pip", "install", "-q", "-r", str(tree / "requirements.txt")], check=True)
    return release, tree, venv


@pytest.fixture(scope="module")
def kube() -> Iterator[Kube]:
    with toolenv.throwaway_cluster(f"{CLUSTER}-upgrade") as kubeconfig:
        yield Kube(kubeconfig)


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory, previous: tuple[dict[str, str], Path, Path], kube: Kube) -> Cli:
    """The team's project on the previous release: its Pulumi.yaml and stack files, state of its own."""
    _, old, venv = previous
    work = tmp_path_factory.mktemp("team")
    shutil.copy(old / "Pulumi.yaml", work / "Pulumi.yaml")
    shutil.copytree(old / "stacks", work / "stacks")
    (work / "infra").symlink_to(old / "infra")
    (work / ".venv").symlink_to(venv)
    (work / "state").mkdir()
    mine = {
        "PULUMI_BACKEND_URL": f"file://{work / 'state'}",
        "KUBECONFIG": str(kube.kubeconfig),
        "PULUMI_CONFIG_PASSPHRASE": secrets.token_urlsafe(16),
    }
    env = {k: v for k, v in os.environ.items() if k != "PULUMI_CONFIG_PASSPHRASE_FILE"} | mine
    return Cli(work, env=env | toolenv.exported(mine, tree=old))


def run_release(team: Cli, tree: Path, venv: Path) -> None:
    """The team's project runs the program of `tree` in `venv` from now on: its stack files and state stay."""
    for linked, target in (("infra", tree / "infra"), (".venv", venv)):
        (team.cwd / linked).unlink()
        (team.cwd / linked).symlink_to(target)


def uids(kube: Kube) -> dict[str, str]:
    found = {}
    for kind, namespace in KEPT:
        for item in kube.get(kind, namespace) if namespace else kube.get(kind):
            meta = item["metadata"]
            found[f"{kind}/{meta.get('namespace', '')}/{meta['name']}"] = meta["uid"]
    # The platform's Tenant registrations, of its own group (tfk8s.components.guard).
    crds = [key.rsplit("/", 1)[1] for key in found if key.startswith("customresourcedefinitions/")]
    for crd in (name for name in crds if name.startswith("tenants.")):
        for item in kube.get(crd):
            found[f"{crd}//{item['metadata']['name']}"] = item["metadata"]["uid"]
    return found


def destructive_steps(team: Cli, stack: str) -> list[str]:
    """What `preview` of `stack` would delete or replace, as `op urn` lines."""
    done = team("preview", "--stack", stack, "--json", flags=False, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    steps = json.loads(done.stdout).get("steps", [])
    return [f"{s['op']} {s['urn']}" for s in steps if s["op"] in DESTRUCTIVE and kind_in(s["urn"]) in STATEFUL_KINDS]


def kind_in(urn: str) -> str:
    """The Kubernetes kind of a URN (`...::parent$kubernetes:core/v1:Namespace::name` -> Namespace)."""
    return urn.split("::")[-2].rsplit(":", 1)[-1]


def test_an_upgrade_in_order_keeps_every_stateful_object_and_every_stack_ready(
    team: Cli, kube: Kube, previous: tuple[dict[str, str], Path, Path]
) -> None:
    release = previous[0]
    team("stack", "init", PLATFORM)
    team("up", "--stack", PLATFORM, "--yes", "--skip-preview")
    for tenant in (ALICE, BOB):
        team("stack", "init", tenant)
        team("up", "--stack", tenant, "--yes", "--skip-preview")
    team.init_experiment(ALICE_RUN, tenant=ALICE, settings={"tfk8s:clusters[0].name": "mnist"})
    team.init_experiment(
        BOB_RUN,
        tenant=BOB,
        settings={
            "tfk8s:clusters[0].name": "mnist",
            "tfk8s:clusters[0].replication": "in-graph",
            "tfk8s:clusters[0].inGraphClient": "chief",
        },
    )
    for run in (ALICE_RUN, BOB_RUN):
        team("up", "--stack", run, "--yes", "--skip-preview")
    stacks = (PLATFORM, ALICE, BOB, ALICE_RUN, BOB_RUN)
    for stack in stacks:
        outputs = team.outputs(stack)
        said = outputs.get("tfk8sVersion", release["version"])  # releases before 0.3.0 did not say
        assert outputs["ready"] is True and said == release["version"], (stack, outputs)
    before = uids(kube)
    assert any(k.startswith("persistentvolumeclaims/tfk8s-bob/") for k in before), before

    run_release(team, ROOT, ROOT / ".venv")
    # The documented order, bob's experiment before his tenant: a stack reads facts one line apart.
    for stack in (PLATFORM, ALICE, ALICE_RUN, BOB_RUN, BOB):
        assert destructive_steps(team, stack) == [], f"{stack}: the upgrade's preview deletes or replaces"
        team("up", "--stack", stack, "--yes", "--skip-preview")
    after = uids(kube)
    assert {k: after.get(k) for k in before} == before, "an object of the previous release lost its identity"
    for stack in stacks:
        outputs = team.outputs(stack)
        assert outputs["ready"] is True and outputs["tfk8sVersion"] == VERSION, (stack, outputs)
    (contract,) = [c for c in kube.get("configmaps", "tfk8s-bob") if c["metadata"]["name"] == "tfk8s-contract"]
    assert json.loads(contract["data"]["tenant.json"])["release"] == VERSION


def test_an_experiment_refuses_a_contract_outside_the_window_and_changes_nothing(team: Cli, kube: Kube) -> None:
    """Bob's contract edited (as the platform team could) to say a release two lines before this one."""
    (contract,) = [c for c in kube.get("configmaps", "tfk8s-bob") if c["metadata"]["name"] == "tfk8s-contract"]
    tenant = json.loads(contract["data"]["tenant.json"])
    major, minor = (int(part) for part in VERSION.split(".")[:2])
    old = f"{major}.{max(minor - 2, 0)}.0" if minor >= 2 else "0.0.1"
    patch = {"data": {"tenant.json": json.dumps({**tenant, "release": old})}}
    kube.run("patch", "configmap", "tfk8s-contract", "-n", "tfk8s-bob", "--type", "merge", "-p", json.dumps(patch))
    before = uids(kube)
    try:
        done = team("preview", "--stack", BOB_RUN, check=False)
    finally:  # bob's contract as his tenant stack wrote it, for the test after this one
        restored = json.dumps({"data": contract["data"]})
        kube.run("patch", "configmap", "tfk8s-contract", "-n", "tfk8s-bob", "--type", "merge", "-p", restored)
    assert done.returncode != 0
    said = done.stdout + done.stderr
    assert f"published by tfk8s {old}" in said and f"this experiment's tfk8s {VERSION}" in said, said[-2000:]
    assert "Upgrade in order: the tenant stack of 'tfk8s-bob'" in said, said[-2000:]
    assert uids(kube) == before


def test_going_back_a_release_in_order_keeps_every_stateful_object_and_every_stack_ready(
    team: Cli, kube: Kube, previous: tuple[dict[str, str], Path, Path]
) -> None:
    """docs/operations/releases.md "Going back": the previous release's code again, stack by stack,
    in the upgrade's order (the platform, each tenant, then its experiments): a reader of 0.3.x
    refuses facts with keys it does not know, so each stack goes back after what it reads. Each
    preview deletes or replaces nothing stateful; afterwards every object has the uid it had, and
    every stack is ready and says the previous release."""
    release, tree, venv = previous
    before = uids(kube)
    run_release(team, tree, venv)
    for stack in (PLATFORM, ALICE, BOB, ALICE_RUN, BOB_RUN):
        assert destructive_steps(team, stack) == [], f"{stack}: going back, the preview deletes or replaces"
        team("up", "--stack", stack, "--yes", "--skip-preview")
    after = uids(kube)
    assert {k: after.get(k) for k in before} == before, "an object lost its identity going back"
    for stack in (PLATFORM, ALICE, BOB, ALICE_RUN, BOB_RUN):
        outputs = team.outputs(stack)
        assert outputs["ready"] is True and outputs.get("tfk8sVersion") == release["version"], (stack, outputs)
