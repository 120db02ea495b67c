"""The seed's own example (stacks/Pulumi.imagenet.yaml) produces exactly the expected objects."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pulumi
from conftest import run_program
from test_training_cluster import JOB, after, env_of, pod_spec

EXPECTED = Counter(
    {
        "kubernetes:core/v1:NodePatch": 1,
        "kubernetes:storage.k8s.io/v1:StorageClass": 1,
        "kubernetes:core/v1:Secret": 2,  # Heketi admin key, Jupyter token
        "kubernetes:core/v1:Namespace": 1,
        "kubernetes:core/v1:PersistentVolumeClaim": 2,  # imagenet-data, imagenet-log
        "kubernetes:core/v1:ConfigMap": 2,  # launcher package, notebooks
        "kubernetes:core/v1:ServiceAccount": 1,
        "kubernetes:rbac.authorization.k8s.io/v1:Role": 1,
        "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding": 1,
        "kubernetes:apps/v1:Deployment": 4,  # 2 PS, Jupyter, TensorBoard
        "kubernetes:core/v1:Service": 5,  # 2 PS, headless workers, Jupyter, TensorBoard
        "kubernetes:batch/v1:Job": 1,  # 3 workers, one Indexed Job
        "tfk8s:index:UserNode": 1,
        "tfk8s:index:SharedStorage": 1,
        "tfk8s:index:UserEnvironment": 1,
        "tfk8s:index:TrainingCluster": 1,
    }
)


@pulumi.runtime.test
def test_imagenet_stack_objects(imagenet_config: dict[str, Any]) -> None:
    d = run_program(imagenet_config, secrets={"heketiAdminKey": "heketi-admin-key"})

    def check() -> None:
        found = Counter(r.typ for r in d.mocks.resources)
        assert found == EXPECTED, {"missing": EXPECTED - found, "unexpected": found - EXPECTED}
        names = {(r.typ.rsplit(":", 1)[1], r.inputs.get("metadata", {}).get("name")) for r in d.mocks.resources}
        for expected in [
            ("PersistentVolumeClaim", "imagenet-data"),
            ("PersistentVolumeClaim", "imagenet-log"),
            ("Service", "imagenet-ps-0"),
            ("Service", "imagenet-ps-1"),
            ("Service", "imagenet-worker"),
            ("Job", "imagenet-worker"),
            ("Namespace", "tfk8s-taas"),
            ("StorageClass", "glusterfs"),
        ]:
            assert expected in names
        (job,) = d.mocks.of_type(JOB)
        assert job.inputs["spec"]["completions"] == 3
        container = pod_spec(job)["containers"][0]
        assert container["image"] == "tensorflow/tensorflow:1.15.5-py3"
        assert container["command"] == [
            "python",
            "/opt/tfk8s/tfk8s_train/launch.py",
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
        for claim in d.mocks.of_type("kubernetes:core/v1:PersistentVolumeClaim"):
            assert claim.inputs["spec"]["resources"]["requests"]["storage"] == "10Gi"
            assert claim.inputs["spec"]["storageClassName"] == "glusterfs"

    return after(d, check)
