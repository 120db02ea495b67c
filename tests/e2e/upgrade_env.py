"""What the upgrade tests share (issue 55, point 4): the previous recorded release's code and
virtualenv, a team's project that runs one release's program and then another's over the same stack
files and state, and the checks every upgrade makes (what a preview deletes or replaces, the uids of
what must keep its identity).

The team's project is one directory whose `infra` (Pulumi.yaml's main) and `.venv` lead to the
previous release's, then to this tree's: as a team's repository moves to a new tfk8s, its stack files
and state staying where they are.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest
from drivers import Cli, Kube, cli_of_its_own
from tfk8s.release import STATEFUL_KINDS

import releases
import toolenv

ROOT = Path(__file__).resolve().parents[2]
# Steps of `pulumi preview --json` that delete what they touch (Pulumi's OpType). They may not touch
# STATEFUL_KINDS; a run's Job, JobSet or trainer ConfigMap may be replaced by a release that changes
# them, which its preview then shows as a new run.
DESTRUCTIVE = {"delete", "replace", "create-replacement", "delete-replaced", "discard", "remove-pending-replace"}


@dataclass(frozen=True)
class Release:
    """A recorded release: its version, its tree (`git archive` of its commit) and its virtualenv."""

    version: str
    tree: Path
    venv: Path


def previous_release(tmp_path_factory: pytest.TempPathFactory) -> Release:
    """The release before this tree (releases.toml), extracted, with the virtualenv its program runs in."""
    release = releases.previous()
    tree = tmp_path_factory.mktemp(f"tfk8s-{release['version']}")
    archive = subprocess.run(["git", "archive", release["commit"]], cwd=ROOT, check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    # Its toolchain: the same pins are the same binaries (hack/tools.sh caches by version). A release
    # with other pins needs its own CLI and provider, which these tests do not build yet.
    assert (tree / "hack" / "versions.sh").read_text() == (ROOT / "hack" / "versions.sh").read_text(), (
        f"{release['version']} pins another toolchain (hack/versions.sh): building it is not implemented"
    )
    # Its virtualenv: its own requirements; where they are this tree's, this interpreter's packages
    # (no index), its own tfk8s found first, from its infra/ (the program's directory).
    venv = tmp_path_factory.mktemp("previous-venv") / "venv"
    python = toolenv.linked_venv(venv)
    if (tree / "requirements.txt").read_text() != (ROOT / "requirements.txt").read_text():
        subprocess.run([str(python), "-m", "pip", "install", "-q", "-r", str(tree / "requirements.txt")], check=True)
    return Release(release["version"], tree, venv)


THIS_TREE = Release("", ROOT, ROOT / ".venv")


def team_project(work: Path, release: Release, kubeconfig: Path) -> Cli:
    """The team's project at `work` on `release`: its Pulumi.yaml and stack files, state and a
    passphrase of its own, at `kubeconfig`."""
    shutil.copy(release.tree / "Pulumi.yaml", work / "Pulumi.yaml")
    shutil.copytree(release.tree / "stacks", work / "stacks")
    (work / "infra").symlink_to(release.tree / "infra")
    (work / ".venv").symlink_to(release.venv)
    (work / "state").mkdir()
    return cli_of_its_own(work, kubeconfig, tree=release.tree)


def run_release(team: Cli, release: Release) -> None:
    """The team's project runs the program of `release` from now on: its stack files and state stay."""
    for linked, target in (("infra", release.tree / "infra"), (".venv", release.venv)):
        (team.cwd / linked).unlink()
        (team.cwd / linked).symlink_to(target)


def preview_steps(team: Cli, stack: str) -> list[tuple[str, str]]:
    """Every step `preview` of `stack` shows but `same`, as (op, urn)."""
    done = team("preview", "--stack", stack, "--json", flags=False, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    return [(s["op"], s["urn"]) for s in json.loads(done.stdout).get("steps", []) if s["op"] != "same"]


def destructive(steps: Iterable[tuple[str, str]]) -> list[str]:
    """The steps that would delete or replace something stateful, as `op urn` lines."""
    return [f"{op} {urn}" for op, urn in steps if op in DESTRUCTIVE and kind_in(urn) in STATEFUL_KINDS]


def destructive_steps(team: Cli, stack: str) -> list[str]:
    """What `preview` of `stack` would delete or replace of what is stateful, as `op urn` lines."""
    return destructive(preview_steps(team, stack))


def kind_in(urn: str) -> str:
    """The Kubernetes kind of a URN (`...::parent$kubernetes:core/v1:Namespace::name` -> Namespace)."""
    return urn.split("::")[-2].rsplit(":", 1)[-1]


def kept(*namespaces: str) -> list[tuple[str, str | None]]:
    """What holds data or identity, and must keep its uid across an upgrade, as (kind, namespace or
    None): the namespaces, the tenants' volume claims and Secrets (the Jupyter token) in
    `namespaces`, the volumes, StorageClasses and CRDs."""
    return [
        ("namespace", None),
        *((kind, namespace) for kind in ("persistentvolumeclaims", "secrets") for namespace in namespaces),
        ("persistentvolumes", None),
        ("storageclasses", None),
        ("customresourcedefinitions", None),
    ]


def uids(kube: Kube, kept: Iterable[tuple[str, str | None]]) -> dict[str, str]:
    """`kind/namespace/name` -> uid of every object of the (kind, namespace or None) in `kept`, and
    of the platform's Tenant registrations (of its own group, tfk8s.components.guard)."""
    found = {}
    for kind, namespace in kept:
        for item in kube.get(kind, namespace) if namespace else kube.get(kind):
            meta = item["metadata"]
            found[f"{kind}/{meta.get('namespace', '')}/{meta['name']}"] = meta["uid"]
    crds = [key.rsplit("/", 1)[1] for key in found if key.startswith("customresourcedefinitions/")]
    for crd in (name for name in crds if name.startswith("tenants.")):
        for item in kube.get(crd):
            found[f"{crd}//{item['metadata']['name']}"] = item["metadata"]["uid"]
    return found


def assert_kept(before: dict[str, str], after: dict[str, str], stage: str) -> None:
    """Every object of `before` (`uids`) has the same uid in `after`; says how many of each kind
    kept theirs through `stage` (the upgrade, the way back)."""
    lost = {key: (uid, after.get(key)) for key, uid in before.items() if after.get(key) != uid}
    assert not lost, f"{stage}: objects lost their identity (uid before, after): {lost}"
    kinds = Counter(key.split("/", 1)[0] for key in before)
    said = ", ".join(f"{count} {kind}" for kind, count in sorted(kinds.items()))
    print(f"[upgrade] {stage}: {len(before)} objects kept their uid ({said})", flush=True)
