"""Valid stack files at the edges of what the schema accepts produce manifests the real API server
accepts: each is previewed on the session's cluster, where the Kubernetes provider's preview is a
server-side dry run of every object (nothing is created). The schema's refusals are
tests/unit/test_config.py; this is the other side: what it lets through, Kubernetes takes."""

from __future__ import annotations

import pytest
from drivers import Cli, Kube

EDGES = {
    "longest-names": {
        "tfk8s:experiment": "e" * 20,
        "tfk8s:clusters[0].name": "c" * 19,  # experiment-cluster: 40 characters, the most names allow
    },
    "quantities": {
        "tfk8s:clusters[0].name": "quantities",
        "tfk8s:clusters[0].workers.cpu": "0.25",
        "tfk8s:clusters[0].workers.memory": "1.5Gi",
        "tfk8s:clusters[0].ps.cpu": "250m",
        "tfk8s:clusters[0].ps.memory": "1048576Ki",  # 1Gi in a large number; a bare "1073741824" has no unit
    },
    "placement": {
        "tfk8s:clusters[0].name": "placed",
        'tfk8s:clusters[0].workers.nodeSelector["example.com/pool-a_b.c"]': "Pool_1.x-y",
        "tfk8s:clusters[0].workers.tolerations[0].key": "example.com/gpu",
        "tfk8s:clusters[0].workers.tolerations[0].operator": "Exists",
        "tfk8s:clusters[0].workers.tolerations[0].effect": "NoExecute",
        "tfk8s:clusters[0].workers.tolerations[1].key": "dedicated",
        "tfk8s:clusters[0].workers.tolerations[1].value": "ml",
        "tfk8s:clusters[0].workers.tolerations[1].effect": "NoSchedule",
    },
    "image-and-code": {
        "tfk8s:clusters[0].name": "fetched",
        "tfk8s:clusters[0].image": "registry.example.com:5000/ml/tf-gpu__v2:2.21.0-gpu@sha256:" + "a" * 64,
        "tfk8s:clusters[0].code.source": "url",
        "tfk8s:clusters[0].code.url": "https://code.example.com:8443/a/train.py?ref=v1",
        "tfk8s:clusters[0].code.addresses[0]": "203.0.113.7/32",
        "tfk8s:clusters[0].dataSubPath": "sets/mnist-v2",
        "tfk8s:clusters[0].dataWritable": "true",
    },
    "run-policy-in-graph": {
        "tfk8s:clusters[0].name": "ingraph",
        "tfk8s:clusters[0].replication": "in-graph",
        "tfk8s:clusters[0].training": "sync",
        "tfk8s:clusters[0].run.activeDeadlineSeconds": "1",
        "tfk8s:clusters[0].run.ttlSecondsAfterFinished": "0",
        "tfk8s:clusters[0].workers.backoffLimitPerIndex": "0",
        "tfk8s:clusters[1].name": "notebook",
        "tfk8s:clusters[1].replication": "in-graph",
        "tfk8s:clusters[1].inGraphClient": "notebook",
    },
}


@pytest.fixture(scope="module")
def alice(cli: Cli, platform: str, tenants: dict[str, str]) -> str:
    """alice's tenant on the session's platform, both up: a no-change `up` if they are, their return
    if an earlier module destroyed them (test_stack_model ends by destroying every stack)."""
    for stack in (platform, tenants["alice"]):
        cli("up", "--stack", stack, "--yes", "--skip-preview")
    return tenants["alice"]


@pytest.mark.parametrize("edge", sorted(EDGES))
def test_a_valid_experiment_at_the_edges_is_accepted_by_the_api_server(cli: Cli, kube: Kube, alice: str, edge: str) -> None:
    stack = f"valid-{edge}"
    settings = {k: v for k, v in EDGES[edge].items() if k != 'tfk8s:clusters[0].workers.nodeSelector["example.com/pool-a_b.c"]'}
    cli.init_experiment(stack, tenant=alice, settings={"tfk8s:clusters[0].workers.count": "1", **settings})
    if edge == "placement":  # a map key with '/' and '.': set it as the stack file would hold it
        cli(
            "config",
            "set",
            "--stack",
            stack,
            "--path",
            'tfk8s:clusters[0].workers.nodeSelector["example.com/pool-a_b.c"]',
            "Pool_1.x-y",
        )
    before = {j["metadata"]["uid"] for j in kube.get("jobs", "tfk8s-alice")}
    try:
        done = cli("preview", "--stack", stack, "--diff", check=False)
        text = done.stdout + done.stderr
        assert done.returncode == 0, text
        assert "error" not in text.lower(), text
        assert "+ kubernetes:batch/v1:Job" in text or "create" in text, text  # the objects were sent for a dry run
        assert {j["metadata"]["uid"] for j in kube.get("jobs", "tfk8s-alice")} == before  # nothing created
    finally:
        cli("stack", "rm", stack, "--yes", "--force")
