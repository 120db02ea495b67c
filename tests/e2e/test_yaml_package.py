"""examples/yaml-training-cluster for real, as the Pulumi YAML page (docs/guide/package.md) says to
run it, its block extracted from the Markdown: a Pulumi YAML program adds tfk8s's component package
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
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from command_blocks import block_after, run_block
from drivers import CLUSTER, Cli, Kube
from package_checkout import ROOT, package_checkout
from tfk8s.release import VERSION

import toolenv
from toolenv import langhost_processes

EXAMPLE = "yaml-training-cluster"
STACK = "alice-mnist"
NAMESPACE = "tfk8s-alice"
EXPERIMENT = "yaml"  # the example's `experiment` property
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


def alices_environment(checkout: Path, env: dict[str, str]) -> dict[str, str]:
    """What `eval "$(hack/env.sh --tenant alice)"` makes of `env` in `checkout`: the environment the
    page's block ran its `pulumi` commands in (her state, passphrase and kubeconfig)."""
    script = 'eval "$(hack/env.sh --tenant alice)" && env -0'
    done = subprocess.run(["bash", "-c", script], cwd=checkout, env=env, capture_output=True, text=True, check=True)
    return dict(entry.split("=", 1) for entry in done.stdout.split("\0") if "=" in entry)


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory, kube: Kube, tenants: dict[str, str]) -> Iterator[Cli]:
    """The Pulumi YAML page's block (docs/guide/package.md), run as written in a fresh shell in a
    throwaway checkout, as alice after `make up`: the YAML host, her certificate and environment,
    `package add`, `stack init`, `pulumi up`, and `stack output ready` printing true. The shell
    starts from the team's environment (the session's), which env.sh --tenant must replace; no
    package index (pip finds the provider's dependencies installed). The tests then drive her
    stack in the environment the block made. Destroyed afterwards whatever the tests did."""
    toolenv.build("yaml-host")  # what the block's first command builds, outside its timeout
    block = block_after(ROOT / "docs" / "guide" / "package.md", "Pulumi YAML", containing="pulumi package add")
    checkout = package_checkout(tmp_path_factory.mktemp("checkout") / "tfk8s", examples=(EXAMPLE,))
    (checkout / "hack").symlink_to(ROOT / "hack", target_is_directory=True)
    program = checkout / "examples" / EXAMPLE
    without_packages(program / "Pulumi.yaml")
    team = {k: v for k, v in os.environ.items() if not k.startswith(("MAKE", "MFLAGS"))}
    env = {**team, "TFK8S_CLUSTER_NAME": CLUSTER, "PIP_NO_INDEX": "1", "PULUMI_SKIP_CONFIRMATIONS": "true"}
    done = run_block(block, checkout, env)
    alice = alices_environment(checkout, env)
    cli = Cli(program, env=alice)
    try:
        said = f"stdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}"
        assert done.returncode == 0, f"the Pulumi YAML page's block failed:\n{said}"
        assert done.stdout.split()[-1] == "true", said  # `pulumi stack output ready`
        assert alice["PULUMI_BACKEND_URL"] != os.environ["PULUMI_BACKEND_URL"]  # her state, not the team's
        yield cli
    finally:
        cli("destroy", "--stack", STACK, "--yes", "--skip-preview", check=False)
        left = langhost_processes(alice["PULUMI_BACKEND_URL"], plugins=[checkout / "package"])
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
    if kind in PLATFORM_KINDS:  # one CRD of the kind per platform on the cluster: the session's has the object
        groups = [c["spec"] for c in kube.get("customresourcedefinitions") if c["spec"]["names"]["kind"] == kind]
        found = [
            o
            for g in groups
            for o in kube.get(f"{g['names']['plural']}.{g['group']}", NAMESPACE)
            if o["metadata"]["name"] == want["metadata"]["name"]
        ]
        assert len(found) == 1, (kind, want["metadata"]["name"], [g["group"] for g in groups])
        return found[0]
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


def test_the_pages_up_declared_a_ready_cluster_as_alice_with_the_golden_objects(example: Cli, kube: Kube) -> None:
    # What the page's `pulumi up` declared is what its program says: a preview after it changes nothing.
    example("preview", "--stack", STACK, "--diff", "--expect-no-changes")
    state = json.loads(example("stack", "export", "--stack", STACK).stdout)
    assert "tfk8s:index:TrainingCluster" in [r["type"] for r in state["deployment"]["resources"]]

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
    # The user's to fix, not a bug: the message alone, none of the provider's traceback (issue 58).
    assert "Traceback" not in text and "Unexpected <class" not in text and 'File "' not in text, text
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
