"""examples/yaml-training-cluster for real: a Pulumi YAML program adds tfk8s's component package
with `pulumi package add`, then `pulumi up` declares a tfk8s:index:TrainingCluster in tenant alice's
namespace with alice's own credentials, through the Pulumi YAML language host and our Python host
running the package's provider. Its outputs report readiness from live status, its live objects
are the golden manifests tests/unit/test_package.py keeps for the same properties, and `destroy`
leaves nothing of it behind.

The program and the package run from a throwaway checkout (lab/package_checkout.py): `package add`
edits Pulumi.yaml and writes sdks/, and the provider's virtualenv is the test's own.
"""

from __future__ import annotations

import json
import os
import re
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from drivers import Cli, Kube, user_kube
from package_checkout import ROOT, package_checkout
from tfk8s.release import VERSION

import toolenv
from toolenv import langhost_processes

EXAMPLE = "yaml-training-cluster"
STACK = "alice-mnist"
NAMESPACE = "tfk8s-alice"
EXPERIMENT = "yaml"  # the example's `experiment` property
GROUP = "tfk8s-users"
GOLDEN = ROOT / "tests" / "unit" / "golden" / "package" / f"{EXAMPLE}.jsonl"
# Kinds whose API group is the platform's own (tfk8s.components.guard.platform_group): the golden
# file has the unit tests' platform's group.
PLATFORM_KINDS = {"Layout"}
UID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def without_packages(program: Path) -> None:
    """The example as a user starts it before adding the package: no `packages:` entry."""
    document = yaml.safe_load(program.read_text())
    assert document.pop("packages") == {"tfk8s": "../../package"}
    program.write_text(yaml.safe_dump(document, sort_keys=False))


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory, kube: Kube, tenants: dict[str, str]) -> Iterator[Cli]:
    """The example in a throwaway checkout, as alice runs it: her kubeconfig, a state backend and
    passphrase of her own, and no package index (pip finds the provider's dependencies installed).
    Destroyed afterwards whatever the tests did."""
    toolenv.build("yaml-host")  # the Pulumi YAML language host, beside the CLI
    checkout = package_checkout(tmp_path_factory.mktemp("checkout") / "tfk8s", examples=(EXAMPLE,))
    program = checkout / "examples" / EXAMPLE
    without_packages(program / "Pulumi.yaml")
    state = tmp_path_factory.mktemp("yaml-state")
    alice = user_kube(kube, "alice", [GROUP])
    env = {
        **os.environ,  # the e2e environment: the toolchain's pulumi on PATH, its plugins
        "PULUMI_BACKEND_URL": f"file://{state}",
        "PULUMI_CONFIG_PASSPHRASE": secrets.token_urlsafe(24),
        "KUBECONFIG": str(alice.kubeconfig),
        "PIP_NO_INDEX": "1",
    }
    cli = Cli(program, env=env)
    cli("package", "add", "../../package")
    cli("stack", "init", STACK)
    try:
        yield cli
    finally:
        cli("destroy", "--stack", STACK, "--yes", "--skip-preview", check=False)
        left = langhost_processes(env["PULUMI_BACKEND_URL"], plugins=[checkout / "package"])
        assert not left, f"the host or the provider outlived the CLI: {left}"


def golden_objects() -> list[tuple[str, dict[str, Any]]]:
    """(Pulumi's logical name, the object) of each Kubernetes object of the golden file: what the
    package's cluster declares under mocks. Not the PS Deployment's patch: it adds the run's Job
    as the Deployment's owner, a uid no golden file can hold."""
    rows = [json.loads(line) for line in GOLDEN.read_text().splitlines()]
    return [(row["name"], row["inputs"]) for row in rows if row["type"].startswith("kubernetes:") and "Patch" not in row["type"]]


def live_object(kube: Kube, logical: str, want: dict[str, Any]) -> dict[str, Any]:
    """The live object `want` declared: by its name, or for an object Pulumi names (`<logical>-<random>`),
    the one object of its kind so named."""
    kind = want["kind"]
    if "name" in want["metadata"]:
        return kube.get(kind, NAMESPACE, want["metadata"]["name"])
    (found,) = [o for o in kube.get(kind, NAMESPACE) if o["metadata"]["name"].startswith(f"{logical}-")]
    return found


def mismatches(want: Any, live: Any, where: str = "") -> list[str]:
    """Where `live` differs from `want`: every key `want` sets, with its value (the API server adds
    defaults beside them, which are not differences). Strings that are digests of long values in
    the golden file (tests/unit/test_golden_manifests.py `_digest`) are compared by presence, and
    what the mocks made up by its shape."""
    if isinstance(want, dict):
        if not isinstance(live, dict):
            return [f"{where}: {live!r} is not a mapping"]
        return [m for key, value in want.items() for m in mismatches(value, live.get(key), f"{where}.{key}")]
    if want == [] and live is None:  # the API server keeps no empty list
        return []
    if isinstance(want, list):
        if not isinstance(live, list) or len(live) != len(want):
            return [f"{where}: {live!r} is not {len(want)} items"]
        return [m for i, (w, v) in enumerate(zip(want, live, strict=True)) for m in mismatches(w, v, f"{where}[{i}]")]
    if isinstance(want, str) and want.startswith("sha256:") and " chars)" in want:
        return [] if live else [f"{where}: missing"]
    # What the unit tests' mocks make up where the API server or Pulumi decides (tests/unit/mocks.py):
    # an auto-name's random suffix, an object's uid.
    if isinstance(want, str) and want.endswith("-auto"):
        named = isinstance(live, str) and re.fullmatch(re.escape(want.removesuffix("auto")) + "[0-9a-f]{8}", live)
        return [] if named else [f"{where}: {live!r} is not a name Pulumi made of {want.removesuffix('-auto')!r}"]
    if isinstance(want, str) and want.endswith("-uid"):
        return [] if isinstance(live, str) and UID.fullmatch(live) else [f"{where}: {live!r} is not a uid"]
    return [] if want == live else [f"{where}: {live!r}, not {want!r}"]


def test_package_add_records_the_package_and_its_lock(example: Cli) -> None:
    program = yaml.safe_load((example.cwd / "Pulumi.yaml").read_text())
    assert program["packages"] == {"tfk8s": "../../package"}
    lock = yaml.safe_load((example.cwd / "sdks" / "tfk8s" / f"tfk8s-{VERSION}.yaml").read_text())
    assert lock["name"] == "tfk8s" and lock["version"] == VERSION


def test_up_declares_a_ready_cluster_as_alice_with_the_golden_objects(example: Cli, kube: Kube) -> None:
    preview = example("preview", "--stack", STACK, "--diff")
    assert "tfk8s:index:TrainingCluster" in preview.stdout, preview.stdout
    done = example("up", "--stack", STACK, "--yes", "--skip-preview", check=False)
    assert done.returncode == 0, f"pulumi up exited {done.returncode}:\n{done.stdout}\n{done.stderr}"

    outputs = example.outputs(STACK)
    assert outputs["ready"] is True, outputs["readiness"]
    assert outputs["readiness"]["phase"] == "Running", outputs["readiness"]
    assert outputs["clusterSpec"] == {
        "ps": [f"{EXPERIMENT}-mnist-ps-0:2222"],
        "worker": [f"{EXPERIMENT}-mnist-worker-{i}.{EXPERIMENT}-mnist-worker:2222" for i in range(2)],
    }

    problems: list[str] = []
    for logical, want in golden_objects():
        live = live_object(kube, logical, want)
        kind, name = want["kind"], live["metadata"]["name"]
        # Alice's stack owns it: the YAML project's stack, in her state.
        owner = live["metadata"]["annotations"]["tfk8s.io/owner"]
        assert owner.startswith(f"organization/{EXAMPLE}/{STACK}@"), owner
        if kind in PLATFORM_KINDS:
            want = {k: v for k, v in want.items() if k != "apiVersion"}
        problems += mismatches(want, live, f"{kind}/{name}")
    assert problems == [], "\n".join(problems)


def test_alice_cannot_declare_the_cluster_in_bobs_namespace(example: Cli, kube: Kube) -> None:
    """The package checks what the experiment program checks, with the caller's own credentials:
    alice's kubeconfig reaches her namespace alone, so a cluster in bob's is refused before any
    resource is declared, naming her identity and what she lacks."""
    stack = "yaml-in-bob"
    example("stack", "init", stack)
    example("config", "set", "--stack", stack, "namespace", "tfk8s-bob")
    done = example("up", "--stack", stack, "--yes", "--skip-preview", check=False)
    text = done.stdout + done.stderr
    assert done.returncode != 0
    assert "namespace: user 'alice'" in text and "may not read the tenant contract in namespace 'tfk8s-bob'" in text, text
    assert "tfk8s:namespace" not in text  # keyed as the property, not as a stack file's key
    state = json.loads(example("stack", "export", "--stack", stack).stdout)
    declared = [r["type"] for r in state["deployment"].get("resources") or []]
    assert [t for t in declared if not t.startswith(("pulumi:pulumi:Stack", "pulumi:providers:"))] == [], declared
    assert kube.get("jobs", "tfk8s-bob") == []
    example("stack", "rm", "--stack", stack, "--yes", "--force")


def test_destroy_leaves_nothing_of_the_cluster(example: Cli, kube: Kube) -> None:
    example("destroy", "--stack", STACK, "--yes", "--skip-preview")
    left = [
        f"{obj['kind']}/{obj['metadata']['name']}"
        for kind in ("deployments", "jobs", "services", "configmaps", "networkpolicies", "serviceaccounts", "roles")
        for obj in kube.get(kind, NAMESPACE)
        if obj["metadata"].get("labels", {}).get("tfk8s.io/experiment") == EXPERIMENT
    ]
    assert left == []
