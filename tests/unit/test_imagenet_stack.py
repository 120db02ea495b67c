"""The seed's own example (stacks/Pulumi.imagenet-platform.yaml, Pulumi.imagenet-tenant.yaml and
Pulumi.imagenet.yaml) produces exactly the expected objects."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pulumi
from mocked_program import JOB, after, env_of, facts_for, pod_spec, run_program, stack_config

PLATFORM_EXPECTED = Counter(
    {
        "kubernetes:core/v1:NodePatch": 1,
        "kubernetes:storage.k8s.io/v1:StorageClass": 2,  # the tenants' volumes (Retain), experiments' scratch (Delete)
        "kubernetes:core/v1:Secret": 1,  # Heketi admin key
        # ... in a namespace of its own: restricted, a quota of no pods, no traffic
        "kubernetes:core/v1:Namespace": 1,
        "kubernetes:core/v1:ResourceQuota": 1,
        "kubernetes:networking.k8s.io/v1:NetworkPolicy": 1,
        "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition": 2,  # the platform's Layout and Tenant kinds
        "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole": 1,  # the experimenter role tenants bind
        "tfk8s:index:UserNode": 1,
        "tfk8s:index:PlatformGuard": 1,  # CRDs and role only: 1.25 has no ValidatingAdmissionPolicy
        "tfk8s:index:SharedStorage": 1,
    }
)
TENANT_EXPECTED = Counter(
    {
        "kubernetes:ptest.layouts.tfk8s.io/v1:Tenant": 1,  # the tenant's registration, the platform's kind
        "kubernetes:core/v1:Secret": 1,  # Jupyter token
        "kubernetes:core/v1:Namespace": 1,
        "kubernetes:core/v1:ResourceQuota": 1,  # the tenant's quota
        "kubernetes:core/v1:LimitRange": 1,  # sizes containers that set no resources (a user's own pods)
        # deny by default; DNS for all; Jupyter, TensorBoard and the PS's API egress (tfk8s.specs.network_policy)
        "kubernetes:networking.k8s.io/v1:NetworkPolicy": 5,
        "kubernetes:core/v1:PersistentVolumeClaim": 2,  # the tenant's data and log volumes
        "kubernetes:core/v1:ConfigMap": 4,  # trainer package, notebooks, Jupyter config, contract (no guard: 1.25)
        "kubernetes:core/v1:ServiceAccount": 1,  # Jupyter's: reads layouts
        "kubernetes:rbac.authorization.k8s.io/v1:Role": 2,  # Jupyter's (Layouts); the token reader
        "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding": 3,  # Jupyter's; the group taas as experimenters and token readers
        "kubernetes:apps/v1:Deployment": 2,  # Jupyter, TensorBoard
        "kubernetes:core/v1:Service": 3,  # Jupyter, TensorBoard, the notebook's chief address
        "tfk8s:index:UserEnvironment": 1,
    }
)
EXPERIMENT_EXPECTED = Counter(
    {
        "kubernetes:core/v1:ConfigMap": 1,  # trainer package
        "kubernetes:networking.k8s.io/v1:NetworkPolicy": 1,  # gRPC within the one cluster
        "kubernetes:ptest.layouts.tfk8s.io/v1:Layout": 1,  # the cluster's layout, the platform's kind
        "kubernetes:core/v1:ServiceAccount": 1,  # PS retirement
        "kubernetes:rbac.authorization.k8s.io/v1:Role": 1,
        "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding": 1,
        "kubernetes:apps/v1:Deployment": 2,  # 2 PS
        "kubernetes:apps/v1:DeploymentPatch": 2,  # each PS owned by the worker Job
        "kubernetes:core/v1:Service": 3,  # 2 PS, headless workers
        "kubernetes:batch/v1:Job": 1,  # 3 workers, one Indexed Job
        "tfk8s:index:Experiment": 1,
        "tfk8s:index:TrainingCluster": 1,
    }
)


@pulumi.runtime.test
def test_imagenet_platform_objects(imagenet_platform_config: dict[str, Any]) -> None:
    d = run_program(imagenet_platform_config, secrets={"heketiAdminKey": "heketi-admin-key"}, stack="imagenet-platform")

    def check() -> None:
        found = Counter(r.typ for r in d.mocks.resources)
        assert found == PLATFORM_EXPECTED, {"missing": PLATFORM_EXPECTED - found, "unexpected": found - PLATFORM_EXPECTED}
        names = {(r.typ.rsplit(":", 1)[1], r.inputs.get("metadata", {}).get("name")) for r in d.mocks.resources}
        assert {("StorageClass", "glusterfs"), ("StorageClass", "glusterfs-scratch")} <= names

    return after(d, check)


@pulumi.runtime.test
def test_imagenet_tenant_objects(imagenet_platform_config: dict[str, Any]) -> None:
    d = run_program(stack_config("imagenet-tenant"), platform=facts_for(imagenet_platform_config), stack="imagenet-tenant")

    def check() -> None:
        found = Counter(r.typ for r in d.mocks.resources)
        assert found == TENANT_EXPECTED, {"missing": TENANT_EXPECTED - found, "unexpected": found - TENANT_EXPECTED}
        names = {(r.typ.rsplit(":", 1)[1], r.inputs.get("metadata", {}).get("name")) for r in d.mocks.resources}
        for expected in [
            ("PersistentVolumeClaim", "tfk8s-data"),
            ("PersistentVolumeClaim", "tfk8s-log"),
            ("Namespace", "tfk8s-taas"),
            ("Tenant", "taas"),
        ]:
            assert expected in names
        for claim in d.mocks.of_type("kubernetes:core/v1:PersistentVolumeClaim"):
            assert claim.inputs["spec"]["resources"]["requests"]["storage"] == "10Gi"
            assert claim.inputs["spec"]["storageClassName"] == "glusterfs"

    return after(d, check)


@pulumi.runtime.test
def test_imagenet_experiment_objects(imagenet_config: dict[str, Any], imagenet_platform_config: dict[str, Any]) -> None:
    d = run_program(imagenet_config, platform=facts_for(imagenet_platform_config), stack="imagenet")

    def check() -> None:
        found = Counter(r.typ for r in d.mocks.resources)
        assert found == EXPERIMENT_EXPECTED, {"missing": EXPERIMENT_EXPECTED - found, "unexpected": found - EXPERIMENT_EXPECTED}
        names = {(r.typ.rsplit(":", 1)[1], r.inputs.get("metadata", {}).get("name")) for r in d.mocks.resources}
        # The experiment is named like its one cluster: the seed's own names.
        for expected in [
            ("Service", "imagenet-ps-0"),
            ("Service", "imagenet-ps-1"),
            ("Service", "imagenet-worker"),
            ("Job", "imagenet-worker"),
        ]:
            assert expected in names
        (job,) = d.mocks.of_type(JOB)
        assert job.inputs["spec"]["completions"] == 3
        container = pod_spec(job)["containers"][0]
        assert container["image"] == "tensorflow/tensorflow:1.15.5-py3"
        assert container["command"] == [
            "python",
            "-m",
            "tfk8s_train.launch",
            "--",
            "python",
            "/opt/tfk8s/code/imagenet.py",
        ]
        (fetch,) = pod_spec(job)["initContainers"]
        assert {e["name"]: e["value"] for e in fetch["env"]}[
            "TFK8S_CODE_URL"
        ] == "http://user-node.example:80/imagenet/imagenet.py"
        spec = json.loads(env_of(job)["TFK8S_CLUSTER_SPEC"])
        assert spec == {
            "ps": ["imagenet-ps-0:2222", "imagenet-ps-1:2222"],
            "worker": [f"imagenet-worker-{i}.imagenet-worker:2222" for i in range(3)],
        }
        mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
        assert mounts["/log"]["subPath"] == "imagenet/imagenet" and "subPath" not in mounts["/data"]

    return after(d, check)
