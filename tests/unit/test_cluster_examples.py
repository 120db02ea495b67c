"""The example stacks for clusters of one's own (examples/clusters/<kind>/, docs/clusters/<kind>.md):
each file valid for the schema `pulumi up` applies and for `tfk8s doctor --stack`, each platform
and its tenant run under Pulumi's mocks, declaring what that cluster needs (its CSI class, its
identities' bindings)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml
from mocked_program import ROOT, after, facts_for, run_program
from tfk8s.doctor.target import load
from tfk8s.settings.stack_file import stack_values

EXAMPLES = ROOT / "examples" / "clusters"
KINDS = {
    "eks": ("efs.csi.aws.com", {"groups": ["tfk8s-alice"]}),
    "gke": ("filestore.csi.storage.gke.io", {"groups": ["ml-alice@example.com"], "users": ["alice@example.com"]}),
    "kubeadm": ("cephfs.csi.ceph.com", {"groups": ["oidc:ml-alice"]}),
}
SC = "kubernetes:storage.k8s.io/v1:StorageClass"
ROLE_BINDING = "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding"


def raw(path: Path) -> dict[str, Any]:
    return stack_values(yaml.safe_load(path.read_text())["config"])


def files(kind: str) -> tuple[Path, Path]:
    platform = next((EXAMPLES / kind).glob("Pulumi.platform-*.yaml"))
    return platform, EXAMPLES / kind / "Pulumi.tenant-alice.yaml"


def test_every_kind_of_cluster_has_its_example_and_its_guide() -> None:
    assert sorted(p.name for p in EXAMPLES.iterdir() if p.is_dir()) == sorted(KINDS)
    for kind in KINDS:
        guide = ROOT / "docs" / "clusters" / f"{kind}.md"
        assert guide.is_file() and f"examples/clusters/{kind}/" in guide.read_text()


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_platform_is_what_the_doctor_checks_and_declares_the_clusters_class(kind: str) -> None:
    platform_file, _ = files(kind)
    target = load(str(platform_file), ROOT)  # the doctor's reading: the program's schema
    provisioner, _ = KINDS[kind]
    assert target.settings.storage.csi is not None and target.settings.storage.csi.provisioner == provisioner

    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        d = run_program(raw(platform_file), stack=platform_file.stem.removeprefix("Pulumi."))

        def check() -> None:
            classes = {r.inputs["metadata"]["name"]: r.inputs for r in d.mocks.of_type(SC)}
            assert {c["provisioner"] for c in classes.values()} == {provisioner}
            assert target.settings.storage.class_name in classes

        return after(d, check)

    run()


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_tenant_binds_the_identities_of_that_clusters_authenticator(kind: str) -> None:
    platform_file, tenant_file = files(kind)
    _, identities = KINDS[kind]
    tenant = raw(tenant_file)
    assert tenant["platformStack"] == platform_file.stem.removeprefix("Pulumi.")

    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        d = run_program(tenant, platform=facts_for(raw(platform_file)), stack="tenant-alice")

        def check() -> None:
            subjects = {
                (s["kind"], s["name"])
                for r in d.mocks.of_type(ROLE_BINDING)
                for s in r.inputs.get("subjects") or []
                if s["kind"] != "ServiceAccount"
            }
            wanted = {("Group", g) for g in identities.get("groups", [])} | {("User", u) for u in identities.get("users", [])}
            assert wanted <= subjects, subjects

        return after(d, check)

    run()
