"""What a user cares about in one training cluster, read from the resources the program declares."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pytest
from mocked_program import (
    CONFIG_MAP,
    DEPLOYMENT,
    DEPLOYMENT_PATCH,
    JOB,
    PVC,
    ROOT,
    SCRATCH_CLASS,
    SERVICE,
    Deployment,
    after,
    env_of,
    facts_for,
    facts_with_scratch,
    pod_labels,
    pod_spec,
    run_program,
    stack_config,
)
from tfk8s.settings.stack_file import validate
from tfk8s.specs import cluster_spec as cs
from tfk8s.specs import run_policy


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def tf_workloads(d: Deployment) -> list[Any]:
    return [
        r
        for r in d.mocks.of_type(DEPLOYMENT) + d.mocks.of_type(JOB)
        if pod_labels(r).get("app.kubernetes.io/name") == "tensorflow"
    ]


@pulumi.runtime.test
def test_every_host_in_the_spec_resolves_to_a_service_selecting_exactly_that_task(dev_config: dict[str, Any]) -> None:
    d = run_program(dev_config)

    def check() -> None:
        services = {r.inputs["metadata"].get("name"): r.inputs["spec"] for r in d.mocks.of_type(SERVICE)}
        spec = json.loads(env_of(tf_workloads(d)[0])["TFK8S_CLUSTER_SPEC"])
        assert [h.split(":")[1] for h in spec["ps"] + spec["worker"]] == ["2222"] * 3
        ps_deployments = [r for r in d.mocks.of_type(DEPLOYMENT) if pod_labels(r).get("tfk8s.io/role") == "ps"]
        for index, host in enumerate(spec["ps"]):
            service = services[host.split(":")[0]]
            matching = [r for r in tf_workloads(d) if selects(service["selector"], pod_labels(r))]
            assert matching == [ps_deployments[index]], f"{host} must select PS task {index} only"
            assert env_of(ps_deployments[index])["TFK8S_TASK_INDEX"] == str(index)
        (job,) = d.mocks.of_type(JOB)
        for index, host in enumerate(spec["worker"]):
            pod_host, subdomain = host.split(":")[0].split(".")
            # An Indexed Job names pod i's hostname `<job>-<i>`; the subdomain is the headless Service.
            assert pod_host == f"{job.inputs['metadata']['name']}-{index}"
            assert pod_spec(job)["subdomain"] == subdomain
            service = services[subdomain]
            assert service["clusterIP"] == "None"
            assert [r for r in tf_workloads(d) if selects(service["selector"], pod_labels(r))] == [job]

    return after(d, check)


@pulumi.runtime.test
def test_worker_indexes_are_all_present_and_unique_and_come_from_the_indexed_job(dev_config: dict[str, Any]) -> None:
    dev_config["clusters"][0]["workers"]["count"] = 7
    d = run_program(dev_config)

    def check() -> None:
        (job,) = d.mocks.of_type(JOB)
        spec = job.inputs["spec"]
        assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == ("Indexed", 7, 7)
        env = env_of(job)
        assert "TFK8S_TASK_INDEX" not in env  # JOB_COMPLETION_INDEX, set per pod by Kubernetes
        hosts = json.loads(env["TFK8S_CLUSTER_SPEC"])["worker"]
        assert hosts == [f"dev-mnist-worker-{i}.dev-mnist-worker:2222" for i in range(7)]
        assert len(set(hosts)) == 7

    return after(d, check)


@pulumi.runtime.test
@pytest.mark.parametrize("writable", [False, True], ids=["data-read-only", "data-writable"])
def test_tasks_mount_the_users_volumes_logs_per_run_and_declare_no_claims(dev_config: dict[str, Any], writable: bool) -> None:
    dev_config["clusters"][0]["dataSubPath"] = "mnist"
    if writable:
        dev_config["clusters"][0]["dataWritable"] = True
    d = run_program(dev_config)

    def check() -> None:
        assert d.mocks.of_type(PVC) == []  # the volumes are the platform's: they outlive the experiment
        for workload in tf_workloads(d):
            spec = pod_spec(workload)
            volumes = {v["name"]: v.get("persistentVolumeClaim", {}).get("claimName") for v in spec["volumes"]}
            mounts = {m["mountPath"]: m for m in spec["containers"][0]["volumeMounts"]}
            assert (volumes[mounts["/log"]["name"]], mounts["/log"]["subPath"]) == ("tfk8s-log", "dev/mnist")
            role = pod_labels(workload)["tfk8s.io/role"]
            # The seed's shape: workers read /data; PS only need /log (done markers, no data).
            if role == "worker":
                assert (volumes[mounts["/data"]["name"]], mounts["/data"]["subPath"]) == ("tfk8s-data", "mnist")
                # Shared by every experiment of the user: written only by a cluster that says so.
                assert mounts["/data"].get("readOnly", False) is not writable
                assert "readOnly" not in mounts["/log"]
            else:
                assert "/data" not in mounts

    return after(d, check)


@pulumi.runtime.test
def test_training_pods_keep_off_the_user_node_even_with_tolerations(dev_config: dict[str, Any]) -> None:
    dev_config["clusters"][0]["workers"]["tolerations"] = [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
    d = run_program(dev_config)
    taint_key = facts_for(stack_config("platform-dev"))["userNode"]["taintKey"]

    def check() -> None:
        for workload in tf_workloads(d):
            assert not any(t.get("key") == taint_key for t in pod_spec(workload).get("tolerations", []))
            terms = pod_spec(workload)["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            assert {"key": taint_key, "operator": "DoesNotExist"} in terms["nodeSelectorTerms"][0]["matchExpressions"]

    return after(d, check)


@pulumi.runtime.test
def test_on_a_user_node_shared_with_training_the_pods_may_land_there_and_still_never_tolerate_it(
    dev_config: dict[str, Any],
) -> None:
    """A cluster of one node (platform.userNode.sharedWithTraining): no affinity keeps the pods off it,
    and the pods still carry neither its toleration nor its label (the tenant admission refuses both)."""
    platform = facts_for(stack_config("platform-dev"))
    platform["userNode"]["sharedWithTraining"] = True
    taint_key = platform["userNode"]["taintKey"]
    d = run_program(dev_config, platform=platform)

    def check() -> None:
        workloads = tf_workloads(d)
        assert workloads
        for workload in workloads:
            spec = pod_spec(workload)
            assert "affinity" not in spec, spec.get("affinity")
            assert not any(t.get("key") == taint_key for t in spec.get("tolerations", []))
            assert taint_key not in spec.get("nodeSelector", {})

    return after(d, check)


@pulumi.runtime.test
def test_gpu_requests_land_on_workers_only(dev_config: dict[str, Any]) -> None:
    dev_config["clusters"][0]["workers"].update(gpus=2, nodeSelector={"accelerator": "nvidia"})
    d = run_program(dev_config)

    def check() -> None:
        for workload in d.mocks.of_type(DEPLOYMENT) + d.mocks.of_type(JOB):
            limits = pod_spec(workload)["containers"][0].get("resources", {}).get("limits", {})
            is_worker = pod_labels(workload).get("tfk8s.io/role") == "worker"
            assert limits.get("nvidia.com/gpu") == ("2" if is_worker else None), workload.name
        (job,) = d.mocks.of_type(JOB)
        assert pod_spec(job)["nodeSelector"] == {"accelerator": "nvidia"}

    return after(d, check)


@pulumi.runtime.test
def test_each_role_is_placed_by_its_own_settings(dev_config: dict[str, Any]) -> None:
    """PS follow `ps.nodeSelector`/`ps.tolerations`, workers `workers.*`; neither takes the other's."""
    placed = {
        "ps": ({"example.com/pool": "cpu"}, [{"key": "example.com/cpu-pool", "operator": "Exists", "effect": "NoSchedule"}]),
        "workers": ({"accelerator": "nvidia"}, [{"key": "nvidia.com/gpu", "operator": "Exists"}]),
    }
    for role, (selector, tolerations) in placed.items():
        dev_config["clusters"][0][role].update(nodeSelector=selector, tolerations=tolerations)
    d = run_program(dev_config)

    def check() -> None:
        workloads = tf_workloads(d)
        assert {pod_labels(w)["tfk8s.io/role"] for w in workloads} == {"ps", "worker"}
        for workload in workloads:
            selector, tolerations = placed["ps" if pod_labels(workload)["tfk8s.io/role"] == "ps" else "workers"]
            assert pod_spec(workload)["nodeSelector"] == selector, workload.name
            assert pod_spec(workload)["tolerations"] == tolerations, workload.name

    return after(d, check)


@pulumi.runtime.test
def test_an_in_graph_chief_goes_where_the_ps_go(dev_config: dict[str, Any]) -> None:
    """The chief needs CPU, as the PS do: their pool, not the workers' GPU pool."""
    cluster = dev_config["clusters"][0]
    cluster.update(replication="in-graph", inGraphClient="chief")
    cluster["ps"].update(
        nodeSelector={"example.com/pool": "cpu"}, tolerations=[{"key": "example.com/cpu-pool", "operator": "Exists"}]
    )
    cluster["workers"].update(nodeSelector={"accelerator": "nvidia"})
    d = run_program(dev_config)

    def check() -> None:
        (chief,) = [job for job in d.mocks.of_type(JOB) if pod_labels(job)["tfk8s.io/role"] == "chief"]
        assert pod_spec(chief)["nodeSelector"] == {"example.com/pool": "cpu"}
        assert pod_spec(chief)["tolerations"] == [{"key": "example.com/cpu-pool", "operator": "Exists"}]

    return after(d, check)


@pulumi.runtime.test
def test_run_node_lost_seconds_is_how_long_every_training_pod_waits_for_a_node_that_stopped_answering(
    dev_config: dict[str, Any],
) -> None:
    """Every role's pods, the chief's too, tolerate the two taints of a lost node for that long,
    beside the stack file's own tolerations; left unset, they say nothing of them (Kubernetes gives
    300 s)."""
    cluster = dev_config["clusters"][0]
    cluster.update(replication="in-graph", inGraphClient="chief")
    own = [{"key": "example.com/cpu-pool", "operator": "Exists"}]
    cluster["ps"].update(tolerations=own)
    cluster["run"] = {"nodeLostSeconds": 20}
    d = run_program(dev_config)

    def check() -> None:
        lost = [
            {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 20}
            for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
        ]
        workloads = [*d.mocks.of_type(DEPLOYMENT), *d.mocks.of_type(JOB)]
        roles = {
            pod_labels(w)["tfk8s.io/role"]: pod_spec(w).get("tolerations") for w in workloads if "tfk8s.io/role" in pod_labels(w)
        }
        assert roles == {"ps": own + lost, "chief": own + lost, "worker": lost}, roles

    return after(d, check)


@pulumi.runtime.test
def test_without_node_lost_seconds_the_pods_leave_a_lost_node_to_kubernetes_defaults(dev_config: dict[str, Any]) -> None:
    d = run_program(dev_config)

    def check() -> None:
        for workload in tf_workloads(d):
            assert not any(t["key"].startswith("node.kubernetes.io/") for t in pod_spec(workload).get("tolerations", [])), (
                workload.name
            )

    return after(d, check)


@pulumi.runtime.test
def test_tasks_learn_the_layout_both_ways(dev_config: dict[str, Any]) -> None:
    d = run_program(dev_config)

    def check() -> None:
        for workload in tf_workloads(d):
            container = pod_spec(workload)["containers"][0]
            env = env_of(workload)
            assert container["command"][:5] == ["python", "-m", "tfk8s_train.launch", "--", "python"]
            assert env["TFK8S_CLASSIC_FLAGS"] == "true"  # launcher appends --ps_hosts ... --log_path
            assert env["TFK8S_JOB_NAME"] == pod_labels(workload)["tfk8s.io/role"]
            assert set(json.loads(env["TFK8S_CLUSTER_SPEC"])) == {"ps", "worker"}

    return after(d, check)


def _count(config: dict[str, Any], users: int, clusters: int, workers: int) -> int:
    import copy

    base = config["clusters"][0]
    config["clusters"] = []
    for c in range(clusters):
        cluster = copy.deepcopy(base)
        cluster["name"] = f"c{c}"
        cluster["workers"]["count"] = workers
        config["clusters"].append(cluster)
    return 0


def test_resource_count_does_not_grow_with_workers(dev_config: dict[str, Any]) -> None:
    import copy

    counts = {}
    for workers in (2, 1000):
        config = copy.deepcopy(dev_config)
        _count(config, 1, 1, workers)

        @pulumi.runtime.test
        def declare(config: dict[str, Any] = config, workers: int = workers) -> pulumi.Output[Any]:
            d = run_program(config)
            # after(): readiness alone may resolve before the last RoleBinding reaches the mocks
            return after(d, lambda: counts.__setitem__(workers, len(d.mocks.resources)))

        declare()
    assert counts[2] == counts[1000], f"2 workers: {counts[2]} resources, 1000 workers: {counts[1000]}"


@pulumi.runtime.test
def test_in_graph_chief_gets_its_own_job_and_is_in_the_spec(dev_config: dict[str, Any]) -> None:
    dev_config["clusters"][0].update(replication="in-graph", inGraphClient="chief")
    d = run_program(dev_config)

    def check() -> None:
        jobs = {r.inputs["metadata"]["name"]: r for r in d.mocks.of_type(JOB)}
        assert set(jobs) == {"dev-mnist-worker", "dev-mnist-chief"}
        spec = json.loads(env_of(jobs["dev-mnist-chief"])["TFK8S_CLUSTER_SPEC"])
        assert spec["chief"] == ["dev-mnist-chief-0.dev-mnist-chief:2222"]
        assert env_of(jobs["dev-mnist-chief"])["TFK8S_TASK_INDEX"] == "0"
        assert jobs["dev-mnist-chief"].inputs["spec"]["completions"] == 1
        # Servers are Ready when their gRPC port listens; the chief is a client only.
        assert "readinessProbe" not in pod_spec(jobs["dev-mnist-chief"])["containers"][0]
        assert pod_spec(jobs["dev-mnist-worker"])["containers"][0]["readinessProbe"] == {
            "tcpSocket": {"port": 2222},
            "periodSeconds": 5,
        }

    return after(d, check)


LAYOUT = "kubernetes:ptest.layouts.tfk8s.io/v1:Layout"  # the platform's kind (conftest.facts_for)


def layouts(d: Deployment) -> dict[str, Any]:
    return {r.inputs["metadata"]["name"]: r.inputs["spec"] for r in d.mocks.of_type(LAYOUT)}


@pulumi.runtime.test
def test_in_graph_notebook_client_gets_the_cluster_layout(dev_config: dict[str, Any]) -> None:
    dev_config["clusters"][0].update(replication="in-graph", inGraphClient="notebook")
    d = run_program(dev_config)

    def check() -> None:
        (job,) = d.mocks.of_type(JOB)
        assert job.inputs["metadata"]["name"] == "dev-mnist-worker"  # no chief Job: the notebook is the client
        server_env = env_of(job)
        (layout,) = layouts(d).values()
        assert layout["spec"] == json.loads(server_env["TFK8S_CLUSTER_SPEC"])
        assert layout["spec"]["chief"] == ["jupyter-tf:2222"]  # the platform's notebook Service
        # The current run is the worker Job (the servers wait for the notebook): its uid names the
        # run's directory, where the notebook's done marker must land.
        assert layout["runUid"] == f"{job.name}-uid"
        assert (layout["experiment"], layout["cluster"], layout["inGraphClient"]) == ("dev", "mnist", "notebook")
        # The notebook's done marker must land where the servers' launchers poll: the run's log dir.
        assert layout["logSubPath"] == "dev/mnist"
        # The experiment creates nothing of the user's Jupyter: the platform owns it.
        assert [r for r in d.mocks.of_type(DEPLOYMENT) if pod_labels(r)["app.kubernetes.io/name"] == "jupyter"] == []

    return after(d, check)


@pulumi.runtime.test
def test_pulumi_up_waits_for_running_workers_not_for_training_to_finish(dev_config: dict[str, Any]) -> None:
    d = run_program(dev_config)

    def check() -> None:
        (job,) = d.mocks.of_type(JOB)
        annotations = job.inputs["metadata"]["annotations"]
        assert annotations["pulumi.com/waitFor"] == "jsonpath={$[?@.ready > 1 || @.failed > 0 || @.succeeded > 0]}"
        assert "=" not in annotations["pulumi.com/waitFor"].removeprefix("jsonpath=")
        assert annotations["pulumi.com/timeoutSeconds"] == "180"
        assert d.options[f"{JOB}::dev-mnist-worker"].delete_before_replace is True
        # Services are not awaited, the headless worker Service too (tfk8s.kube.awaits); workloads are.
        services = d.mocks.of_type(SERVICE)
        assert {s.inputs["spec"].get("clusterIP") for s in services} == {None, "None"}
        for service in services:
            others = set(service.inputs["metadata"].get("annotations") or {}) - {"tfk8s.io/owner"}
            assert others == {"pulumi.com/skipAwait"}, service.name
        for deployment in d.mocks.of_type(DEPLOYMENT):
            assert "pulumi.com/skipAwait" not in deployment.inputs["metadata"]["annotations"]

    return after(d, check)


@pytest.mark.parametrize("replication", ["between-graph", "in-graph"])
def test_sync_training_reaches_our_trainer_as_a_flag(dev_config: dict[str, Any], replication: str) -> None:
    dev_config["clusters"][0].update(training="sync", replication=replication)

    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        d = run_program(dev_config)

        def check() -> None:
            workloads = tf_workloads(d)
            assert len(workloads) == (3 if replication == "in-graph" else 2)  # in-graph: plus the chief Job
            for workload in workloads:
                container = pod_spec(workload)["containers"][0]
                assert container["command"][-4:] == ["python", "-m", "tfk8s_train", "train"]
                assert container["args"] == ["--sync"]
                assert env_of(workload)["TFK8S_TRAINING"] == "sync"

        return after(d, check)

    run()


@pytest.mark.parametrize("seconds", [None, 20])
def test_every_task_learns_a_checkpoint_interval_that_is_set_and_a_default_one_changes_no_pod(
    dev_config: dict[str, Any], seconds: int | None
) -> None:
    """run.checkpointSeconds reaches every task (the trainer and a user script read
    TFK8S_CHECKPOINT_SECONDS); left at its default, no pod template gains a variable, so an
    upgrade replaces no running experiment's Job."""
    dev_config["clusters"][0].update(replication="in-graph")
    if seconds is not None:
        dev_config["clusters"][0]["run"] = {"checkpointSeconds": seconds}

    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        d = run_program(dev_config)

        def check() -> None:
            for workload in tf_workloads(d):
                assert env_of(workload).get("TFK8S_CHECKPOINT_SECONDS") == (str(seconds) if seconds else None)

        return after(d, check)

    run()


@pulumi.runtime.test
def test_a_notebook_client_learns_to_train_synchronously(dev_config: dict[str, Any]) -> None:
    dev_config["clusters"][0].update(replication="in-graph", inGraphClient="notebook", training="sync")
    d = run_program(dev_config)
    return after(d, lambda: _assert_equal([layout["training"] for layout in layouts(d).values()], ["sync"]))


def _assert_equal(actual: Any, expected: Any) -> None:
    assert actual == expected


@pulumi.runtime.test
def test_all_pods_of_an_experiment_mount_its_one_trainer_config_map(dev_config: dict[str, Any]) -> None:
    """One copy of the trainer package per experiment, not per cluster: large stacks keep a small state."""
    import base64
    import io
    import zipfile

    from tfk8s.specs.code import launcher_bundle
    from tfk8s.specs.pods import TRAINER_ARCHIVE

    base = dev_config["clusters"][0]
    notebook_driven = dict(base, name="cifar", replication="in-graph", inGraphClient="notebook")
    dev_config["clusters"] = [base, dict(base, name="svhn"), notebook_driven]
    d = run_program(dev_config)

    def check() -> None:
        code_maps = [r for r in d.mocks.of_type(CONFIG_MAP) if r.inputs["metadata"]["labels"].get("tfk8s.io/role") == "code"]
        (trainer,) = code_maps
        # The package as one zip archive Python imports from, every shipped module in it, byte for byte.
        assert set(trainer.inputs["binaryData"]) == {TRAINER_ARCHIVE} and "data" not in trainer.inputs
        shipped = launcher_bundle(ROOT, "experiment").files
        with zipfile.ZipFile(io.BytesIO(base64.b64decode(trainer.inputs["binaryData"][TRAINER_ARCHIVE]))) as archive:
            packed = {n: archive.read(n).decode() for n in archive.namelist()}
        assert packed == {f"tfk8s_train/{f}": text for f, text in shipped.items()}
        assert trainer.inputs["immutable"] is True
        # Another zlib deflates the same sources into other bytes: never an update of the ConfigMap.
        assert d.options[f"{CONFIG_MAP}::{trainer.name}"].ignore_changes == ["binaryData"]
        # Named after the experiment and its content, known before it exists: the Job need not wait
        # for its creation (tfk8s.components.experiment.trainer_config_map).
        name = trainer.inputs["metadata"]["name"]
        assert name == f"dev-trainer-{launcher_bundle(ROOT, 'experiment').digest[:10]}"
        # New sources are a new resource (its name is theirs), never a replacement, which Pulumi
        # would create from the old archive under `ignore_changes`.
        assert trainer.name == name
        pods = tf_workloads(d)
        assert len(pods) == 3 * 2  # per cluster a PS Deployment and a worker Job (the notebook is cifar's client)
        for workload in pods:
            mounted = [v["configMap"]["name"] for v in pod_spec(workload)["volumes"] if "configMap" in v]
            assert name in mounted, (workload.name, mounted)

    return after(d, check)


ROLE = "kubernetes:rbac.authorization.k8s.io/v1:Role"


@pytest.mark.parametrize(
    ("version", "fields", "absent"),
    [
        ("1.34", {"backoffLimitPerIndex": 3, "maxFailedIndexes": 0}, {"backoffLimit"}),
        ("1.29", {"backoffLimitPerIndex": 3, "maxFailedIndexes": 0}, {"backoffLimit"}),
        ("1.28", {"backoffLimit": 6}, {"backoffLimitPerIndex", "maxFailedIndexes"}),
        ("1.25", {"backoffLimit": 6}, {"backoffLimitPerIndex", "maxFailedIndexes", "podFailurePolicy"}),
    ],
    ids=["1.34", "1.29", "1.28", "1.25"],
)
def test_job_retries_follow_the_kubernetes_version(
    dev_config: dict[str, Any], version: str, fields: dict[str, int], absent: set[str]
) -> None:
    """Below 1.29 the API server drops per-index fields: the same total budget is shared instead."""
    platform = facts_for(stack_config("platform-dev"))
    platform["kubernetesVersion"] = version

    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        d = run_program(dev_config, platform=platform)

        def check() -> None:
            (job,) = d.mocks.of_type(JOB)
            spec = job.inputs["spec"]
            assert {k: spec.get(k) for k in fields} == fields
            assert not absent & set(spec), spec

        return after(d, check)

    run()


@pulumi.runtime.test
def test_run_policy_sets_deadline_and_ttl_and_a_new_run_number_is_a_new_run(dev_config: dict[str, Any]) -> None:
    cluster = dev_config["clusters"][0]
    cluster["run"] = {"number": 1, "activeDeadlineSeconds": 3600, "ttlSecondsAfterFinished": 600}
    d = run_program(dev_config)

    def check() -> None:
        (job,) = d.mocks.of_type(JOB)
        assert (job.inputs["spec"]["activeDeadlineSeconds"], job.inputs["spec"]["ttlSecondsAfterFinished"]) == (3600, 600)
        (ps,) = [r for r in d.mocks.of_type(DEPLOYMENT) if pod_labels(r).get("tfk8s.io/role") == "ps"]
        run = pod_labels(ps)["tfk8s.io/run"]
        assert ps.inputs["metadata"]["name"].endswith(run[:8])
        # The Job's pods carry it too: a new run id is a new Job template, so the Job is replaced
        # (re-applying an unchanged failed Job would do nothing).
        assert pod_labels(job)["tfk8s.io/run"] == run
        settings = validate(dev_config).clusters[0]  # type: ignore[union-attr]
        spec = json.loads(env_of(job)["TFK8S_CLUSTER_SPEC"])
        image = settings.image or "tensorflow/tensorflow:2.21.0"
        bumped = settings.model_copy(update={"run": settings.run.model_copy(update={"number": 2})})
        jobs = run_policy.immutable_fields(settings, (1, 34))
        again = cs.run_id(bumped, spec, image, "", jobs)
        assert again != cs.run_id(settings, spec, image, "", jobs)  # bumping the number is a fresh run

    return after(d, check)


@pulumi.runtime.test
def test_a_ps_service_selects_only_its_runs_pods_and_the_ps_may_read_only_its_job(dev_config: dict[str, Any]) -> None:
    d = run_program(dev_config)

    def check() -> None:
        (ps,) = [r for r in d.mocks.of_type(DEPLOYMENT) if pod_labels(r).get("tfk8s.io/role") == "ps"]
        (service,) = [r for r in d.mocks.of_type(SERVICE) if r.inputs["metadata"].get("name") == "dev-mnist-ps-0"]
        selector = service.inputs["spec"]["selector"]
        assert selects(selector, pod_labels(ps))
        assert not selects(selector, {**pod_labels(ps), "tfk8s.io/run": "an-older-run"})  # a stale PS is no endpoint
        assert env_of(ps)["TFK8S_WATCH_JOB"] == "dev-mnist-worker"
        (role,) = [r for r in d.mocks.of_type(ROLE) if r.name.endswith("ps-retire")]
        rules = {(tuple(r["resources"]), tuple(r["verbs"])): r["resourceNames"] for r in role.inputs["rules"]}
        assert rules == {
            (("deployments/scale",), ("patch",)): [ps.inputs["metadata"]["name"]],
            (("jobs",), ("get", "list", "watch")): ["dev-mnist-worker"],
        }

    return after(d, check)


def _with_scratch(dev_config: dict[str, Any], replication: str = "between-graph") -> Deployment:
    """dev's mnist with a 2Gi scratch volume, on a platform that offers a scratch class."""
    dev_config["clusters"][0].update(scratch={"size": "2Gi"}, replication=replication)
    if replication == "in-graph":
        dev_config["clusters"][0]["inGraphClient"] = "chief"
    return run_program(dev_config, platform=facts_with_scratch())


@pulumi.runtime.test
def test_a_scratch_volume_is_the_clusters_own_claim_in_the_platforms_scratch_class(dev_config: dict[str, Any]) -> None:
    d = _with_scratch(dev_config)

    def check() -> None:
        (claim,) = d.mocks.of_type(PVC)
        meta, spec = claim.inputs["metadata"], claim.inputs["spec"]
        assert (meta["namespace"], meta["name"]) == ("tfk8s-alice", "dev-mnist-scratch")
        assert meta["labels"]["tfk8s.io/experiment"] == "dev" and meta["labels"]["tfk8s.io/stack-kind"] == "experiment"
        assert spec == {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": SCRATCH_CLASS,
            "resources": {"requests": {"storage": "2Gi"}},
        }
        # The worker Job's pods cannot start before their claim exists.
        depends = {r._name for r in d.options[f"{JOB}::dev-mnist-worker"].depends_on}  # type: ignore[attr-defined]
        assert "dev-mnist-scratch" in depends

    return after(d, check)


@pulumi.runtime.test
def test_workers_and_chief_mount_scratch_and_parameter_servers_do_not(dev_config: dict[str, Any]) -> None:
    d = _with_scratch(dev_config, replication="in-graph")

    def check() -> None:
        roles: dict[str, bool] = {}
        for workload in tf_workloads(d):
            spec = pod_spec(workload)
            claims = {v["name"]: v.get("persistentVolumeClaim", {}).get("claimName") for v in spec["volumes"]}
            mounts = {m["mountPath"]: m["name"] for m in spec["containers"][0]["volumeMounts"]}
            role = pod_labels(workload)["tfk8s.io/role"]
            has = cs.SCRATCH_DIR in mounts
            roles[role] = roles.get(role, has) and has
            if has:
                assert claims[mounts[cs.SCRATCH_DIR]] == "dev-mnist-scratch"
                assert env_of(workload)["TFK8S_SCRATCH_DIR"] == cs.SCRATCH_DIR
            else:
                assert "dev-mnist-scratch" not in claims.values() and "TFK8S_SCRATCH_DIR" not in env_of(workload)
        assert roles == {"ps": False, "worker": True, "chief": True}

    return after(d, check)


def run_uid_entry(resource: Any) -> dict[str, Any]:
    (entry,) = [e for e in pod_spec(resource)["containers"][0]["env"] if e["name"] == "TFK8S_RUN_UID"]
    return dict(entry)


@pytest.mark.parametrize(
    ("replication", "client", "run_job"),
    [
        ("between-graph", None, "dev-mnist-worker"),
        ("in-graph", "chief", "dev-mnist-chief"),
        ("in-graph", "notebook", "dev-mnist-worker"),
    ],
    ids=["between-graph", "chief-client", "notebook-client"],
)
def test_a_run_is_the_job_the_ps_watch_and_every_task_knows_its_uid(
    dev_config: dict[str, Any], replication: str, client: str | None, run_job: str
) -> None:
    """Done markers and the run's directory are keyed by that Job's uid (tfk8s_train.launch), so a Job
    re-created with the same settings (destroy + up, a TTL clean-up + `up --refresh`) is a new run."""
    dev_config["clusters"][0].update(replication=replication, **({"inGraphClient": client} if client else {}))

    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        d = run_program(dev_config)

        def check() -> None:
            jobs = {r.inputs["metadata"]["name"]: r for r in d.mocks.of_type(JOB)}
            uid = f"{jobs[run_job].name}-uid"  # what the mock API server answers for that Job
            # The run's own pods read the uid from the label the Job controller gives them (1.34 here).
            own = {"valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['batch.kubernetes.io/controller-uid']"}}}
            assert run_uid_entry(jobs[run_job]) == {"name": "TFK8S_RUN_UID", **own}
            for name, job in jobs.items():  # a chief-driven cluster's workers serve the chief's run
                if name != run_job:
                    assert run_uid_entry(job) == {"name": "TFK8S_RUN_UID", "value": uid}
            (ps,) = [r for r in d.mocks.of_type(DEPLOYMENT) if pod_labels(r).get("tfk8s.io/role") == "ps"]
            # The PS read the uid from the Job they watch, once it carries their run's label: they
            # are declared beside the Job, from nothing of it (no Output of the Job in their inputs).
            assert "TFK8S_RUN_UID" not in env_of(ps)
            assert env_of(ps)["TFK8S_WATCH_JOB"] == run_job
            assert env_of(ps)["TFK8S_WATCH_JOB_RUN"] == jobs[run_job].inputs["metadata"]["labels"]["tfk8s.io/run"]
            assert "ownerReferences" not in ps.inputs["metadata"]
            depends = d.options[f"{DEPLOYMENT}::{ps.name}"].depends_on
            assert not [r for r in depends if isinstance(r, pulumi.CustomResource) and r._name == run_job]
            # The PS goes with its run's Job (a TTL clean-up of the Job deletes it too): a patch of
            # the PS Deployment, once the Job is up, makes the Job its owner.
            (owner,) = d.mocks.of_type(DEPLOYMENT_PATCH)
            assert owner.inputs["metadata"] == {
                "name": ps.inputs["metadata"]["name"],
                "namespace": ps.inputs["metadata"]["namespace"],
                # Not awaited: the provider's await may leave a state from before the patch.
                "annotations": {"pulumi.com/skipAwait": "true"},
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": run_job, "uid": uid}],
            }
            assert set(owner.inputs) <= {"apiVersion", "kind", "metadata", "spec", "status"} and not owner.inputs.get("spec")
            # Deleting it leaves the owner in place: the provider's delete of a patch fails once the
            # Deployment is gone (a TTL clean-up took it), and the Deployment goes with its run anyway.
            assert d.options[f"{DEPLOYMENT_PATCH}::{owner.name}"].retain_on_delete is True
            (layout,) = layouts(d).values()
            assert layout["runUid"] == uid

        return after(d, check)

    run()


@pulumi.runtime.test
def test_before_1_27_a_jobs_pods_read_their_uid_from_the_legacy_label(dev_config: dict[str, Any]) -> None:
    platform = facts_for(stack_config("platform-dev"))
    platform["kubernetesVersion"] = "1.25"
    d = run_program(dev_config, platform=platform)

    def check() -> None:
        (job,) = d.mocks.of_type(JOB)
        assert run_uid_entry(job)["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.labels['controller-uid']"}}

    return after(d, check)
