"""examples/training-cluster, a Pulumi program of its own that uses tfk8s as a library, run under
mocks: what it declares is a whole training cluster whose hosts resolve to its own Services, in
the namespace it creates, with its own provider, and nothing of a tfk8s platform.
(tests/e2e/test_example_program.py runs it for real.)"""

from __future__ import annotations

import asyncio
import json
import runpy
from typing import Any

import pulumi
from mocked_program import CONFIG_MAP, DEPLOYMENT, JOB, ROOT, SERVICE, env_of, pod_labels, pod_spec
from mocks import RecordingMocks

EXAMPLE = ROOT / "examples" / "training-cluster"
STACK = "example"


def run_example(config: dict[str, Any] | None = None) -> tuple[RecordingMocks, dict[str, Any], list[str]]:
    """The example's program under fresh mocks, as `pulumi up` of stack `example` would run it."""
    mocks = RecordingMocks()
    pulumi.runtime.set_mocks(mocks, project="tfk8s-training-cluster", stack=STACK, preview=False)
    pulumi.runtime.set_all_config({f"tfk8s-training-cluster:{k}": str(v) for k, v in (config or {}).items()})
    declared: list[str] = []

    def record(args: pulumi.ResourceTransformationArgs) -> None:
        declared.append(f"{args.type_}::{args.name}")
        return None

    pulumi.runtime.register_stack_transformation(record)
    program = runpy.run_path(str(EXAMPLE / "__main__.py"), run_name="__main__")
    return mocks, program, declared


def settled(mocks: RecordingMocks, program: dict[str, Any], declared: list[str], check: Any) -> pulumi.Output[Any]:
    """Run `check` once the cluster's status resolved and every declared resource reached the mocks."""

    async def settle_then_check() -> None:
        deadline = asyncio.get_running_loop().time() + 10
        while len(mocks.resources) + len(mocks.reads) < len(declared):
            assert asyncio.get_running_loop().time() < deadline, "declared but never registered"
            await asyncio.sleep(0.01)
        check()

    return program["cluster"].status.apply(lambda _: asyncio.ensure_future(settle_then_check()))


@pulumi.runtime.test
def test_the_example_declares_a_ps_deployment_and_service_and_a_worker_job_whose_hosts_resolve() -> None:
    mocks, program, declared = run_example({"workers": 3, "namespace": "mnist-example"})

    def check() -> None:
        (ps,) = mocks.of_type(DEPLOYMENT)
        (job,) = mocks.of_type(JOB)
        services = {s.inputs["metadata"]["name"]: s.inputs for s in mocks.of_type(SERVICE)}
        assert set(services) == {"example-mnist-ps-0", "example-mnist-worker"}
        spec = json.loads(env_of(job)["TFK8S_CLUSTER_SPEC"])
        assert spec == {
            "ps": ["example-mnist-ps-0:2222"],
            "worker": [f"example-mnist-worker-{i}.example-mnist-worker:2222" for i in range(3)],
        }
        # The PS host is its Service, selecting the PS pods; the workers' pods are the Job's, on its headless Service.
        assert services["example-mnist-ps-0"]["spec"]["selector"].items() <= pod_labels(ps).items()
        assert services["example-mnist-worker"]["spec"]["clusterIP"] == "None"
        assert services["example-mnist-worker"]["spec"]["selector"].items() <= pod_labels(job).items()
        assert pod_spec(job)["subdomain"] == "example-mnist-worker"
        assert job.inputs["spec"]["completions"] == 3 and job.inputs["spec"]["completionMode"] == "Indexed"
        # Everything in the namespace the program created, on the volumes it created.
        workloads = [ps, job, *mocks.of_type(SERVICE), *mocks.of_type(CONFIG_MAP)]
        assert {r.inputs["metadata"]["namespace"] for r in workloads} == {"mnist-example"}
        claims = {v["persistentVolumeClaim"]["claimName"] for v in pod_spec(job)["volumes"] if "persistentVolumeClaim" in v}
        assert claims == {"example-data", "example-logs"}
        # The cluster ships its own trainer package (no Experiment here), and no Layout (no platform).
        (trainer,) = mocks.of_type(CONFIG_MAP)
        assert trainer.inputs["metadata"]["name"].startswith("example-mnist-trainer-")
        assert not [r for r in mocks.resources if r.typ.startswith("kubernetes:") and "layouts.tfk8s.io" in r.typ]
        # Every Kubernetes object goes through the program's own provider.
        objects = [r for r in mocks.resources if r.typ.startswith("kubernetes:")]
        assert {(r.provider or "").split("::")[-2] for r in objects} == {"kubernetes"}
        assert {(r.provider or "").split("::")[-1] for r in objects} == {"kubernetes-id"}

    return settled(mocks, program, declared, check)
