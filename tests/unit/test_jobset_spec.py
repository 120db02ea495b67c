"""One training cluster as one JobSet (tfk8s.specs.jobset): today's pods, ganged for Kueue."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from mocked_program import facts_for, stack_config
from tfk8s.settings.contract import PlatformFacts
from tfk8s.settings.experiment import ClusterSettings
from tfk8s.specs import cluster_spec as cs
from tfk8s.specs import jobset as js
from tfk8s.specs import pods
from tfk8s.specs.labels import INDEX, RUN, labels
from tfk8s.specs.roles import CHIEF_ROLE, PS_ROLE, WORKER_ROLE

EXPERIMENT, RUN_ID, VERSION = "exp", "0123456789ab", (1, 31)
OWNER_LABELS = {"tfk8s.io/owner": "organization-tfk8s-exp"}
QUEUE = js.Queueing(local_queue="experiments", priority_class="urgent")

BETWEEN_GRAPH = ClusterSettings.model_validate(
    {
        "name": "mnist",
        "ps": {"count": 2},
        "workers": {"count": 3, "backoffLimitPerIndex": 4},
        "run": {"ttlSecondsAfterFinished": 600},
    }
)
# A chief, scratch, code by URL and node placement: every branch of the pod builder.
IN_GRAPH_CHIEF = ClusterSettings.model_validate(
    {
        "name": "big",
        "replication": "in-graph",
        "inGraphClient": "chief",
        "ps": {"count": 1, "nodeSelector": {"pool": "ps"}},
        "workers": {"count": 2, "gpus": 1, "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]},
        "scratch": {"size": "20Gi"},
        "code": {"url": "https://example.com/train.py"},
    },
    strict=False,  # as a stack file says it (lists, not tuples)
)
CLUSTERS = pytest.mark.parametrize("cluster", [BETWEEN_GRAPH, IN_GRAPH_CHIEF], ids=["between-graph", "in-graph-chief"])


def cluster_pods(cluster: ClusterSettings) -> pods.ClusterPods:
    platform = PlatformFacts.model_validate(facts_for(stack_config("platform-dev")), strict=False)
    return pods.ClusterPods(
        tenant="alice",
        experiment=EXPERIMENT,
        cluster=cluster,
        platform=platform,
        spec=cs.cluster_spec(cluster, platform.ports.tensorflow, experiment=EXPERIMENT),
        volumes=pods.VolumeSources(
            data_claim="tfk8s-data",
            log_claim="tfk8s-log",
            launcher=pods.ConfigMapFiles(name="trainer", files=(pods.TRAINER_ARCHIVE,)),
            scratch_claim="scratch" if cluster.scratch else None,
        ),
        log_sub_path=f"{EXPERIMENT}/{cluster.name}",
        lineage=cs.lineage(cluster, ""),
    )


def name_of(cluster: ClusterSettings) -> str:
    return cs.qualified_name(EXPERIMENT, cluster.name)


def build(cluster: ClusterSettings, queueing: js.Queueing = QUEUE) -> dict[str, Any]:
    return js.jobset(
        name=name_of(cluster),
        cluster_pods=cluster_pods(cluster),
        run_id=RUN_ID,
        queueing=queueing,
        owner_labels=OWNER_LABELS,
        kubernetes_version=VERSION,
    )


def replicated(jobset: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in jobset["spec"]["replicatedJobs"]}


def todays_labels(cluster: ClusterSettings, role: str, index: int | None = None) -> dict[str, str]:
    """What training_cluster.py labels a role's pods with."""
    own = labels("alice", "tensorflow", experiment=EXPERIMENT, cluster=cluster.name, role=role, index=index, run=RUN_ID)
    return {**own, **OWNER_LABELS}


def without_env(template: dict[str, Any], names: set[str]) -> dict[str, Any]:
    template = copy.deepcopy(template)
    for container in template["spec"]["containers"]:
        container["env"] = [e for e in container["env"] if e["name"] not in names]
    return template


@CLUSTERS
def test_ps_pods_are_todays_but_for_restarts_index_and_retirement(cluster: ClusterSettings) -> None:
    """The PS of a JobSet share one template (their index is the completion index), restart in place,
    and need neither a service account nor the Job they used to watch: the JobSet retires them."""
    cp = cluster_pods(cluster)
    today = pods.pod_template(
        PS_ROLE,
        cp,
        labels=todays_labels(cluster, cs.PS, index=0),
        index=0,
        run_uid=pods.run_uid_of_watched_job(RUN_ID),
        scale_to_zero=pods.ScaleToZero(deployment="d", watched_job="w", service_account="sa"),
    )
    queued = replicated(build(cluster))["ps"]["template"]["spec"]["template"]
    today = without_env(today, {"TFK8S_WATCH_JOB_RUN", "TFK8S_TASK_INDEX", "TFK8S_PS_DEPLOYMENT", "TFK8S_WATCH_JOB"})
    assert today["spec"].pop("serviceAccountName") == "sa"
    assert (today["spec"].pop("restartPolicy"), queued["spec"].pop("restartPolicy")) == ("Always", "OnFailure")
    assert (today["spec"].pop("automountServiceAccountToken"), queued["spec"]["automountServiceAccountToken"]) == (True, False)
    queued["spec"].pop("automountServiceAccountToken")
    assert today["metadata"]["labels"].pop(INDEX) == "0"
    assert without_env(queued, {"TFK8S_RUN_UID"}) == js.as_served(today)


@CLUSTERS
def test_worker_and_chief_pods_are_todays_but_for_their_run_uid_and_subdomain(cluster: ClusterSettings) -> None:
    cp = cluster_pods(cluster)
    queued_jobs = replicated(build(cluster))
    roles = [WORKER_ROLE, CHIEF_ROLE] if cs.has_chief_job(cluster) else [WORKER_ROLE]
    for role in roles:
        today = pods.pod_template(
            role,
            cp,
            labels=todays_labels(cluster, role.name),
            index=0 if role.one_task else None,
            run_uid=pods.run_uid_of_own_job(VERSION),
            subdomain=cs.Names(cluster=name_of(cluster)).indexed(role.name),
        )
        today["spec"].pop("subdomain")
        queued = queued_jobs[role.name]["template"]["spec"]["template"]
        assert without_env(queued, {"TFK8S_RUN_UID"}) == js.as_served(without_env(today, {"TFK8S_RUN_UID"})), role.name


def test_served_templates_drop_the_empty_args_the_api_server_drops_and_nothing_else() -> None:
    template = {"spec": {"containers": [{"name": "a", "args": [], "env": []}, {"name": "b", "args": ["--x"]}]}}
    assert js.as_served(template)["spec"]["containers"] == [{"name": "a", "env": []}, {"name": "b", "args": ["--x"]}]


@CLUSTERS
def test_every_pod_reads_its_run_uid_from_the_jobset_uid_label(cluster: ClusterSettings) -> None:
    for job in build(cluster)["spec"]["replicatedJobs"]:
        (env,) = [e for e in job["template"]["spec"]["template"]["spec"]["containers"][0]["env"] if e["name"] == "TFK8S_RUN_UID"]
        assert env["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.labels['jobset.sigs.k8s.io/jobset-uid']"


@pytest.mark.parametrize(
    ("cluster", "jobs", "target"),
    [(BETWEEN_GRAPH, ["ps", "worker"], ["worker"]), (IN_GRAPH_CHIEF, ["ps", "worker", "chief"], ["chief"])],
    ids=["workers-drive", "chief-drives"],
)
def test_the_jobset_succeeds_when_the_runs_driver_does(cluster: ClusterSettings, jobs: list[str], target: list[str]) -> None:
    jobset = build(cluster)
    assert list(replicated(jobset)) == jobs
    assert jobset["spec"]["successPolicy"] == {"operator": "All", "targetReplicatedJobs": target}
    # A task's fault is its own Job's to restart; a Job failed for good ends the run, no gang restart.
    assert jobset["spec"]["failurePolicy"] == {"maxRestarts": 0}


def test_the_jobset_names_its_queue_and_priority_and_never_suspend() -> None:
    jobset = build(BETWEEN_GRAPH)
    assert jobset["apiVersion"] == "jobset.x-k8s.io/v1alpha2"
    assert jobset["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "experiments"
    assert jobset["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "urgent"
    assert jobset["metadata"]["labels"][RUN] == RUN_ID

    def keys(value: Any) -> set[str]:
        if isinstance(value, dict):
            return set(value) | {k for v in value.values() for k in keys(v)}
        return {k for v in value for k in keys(v)} if isinstance(value, list) else set()

    assert "suspend" not in keys(jobset)  # Kueue's field, never ours
    unprioritized = build(BETWEEN_GRAPH, js.Queueing(local_queue="experiments"))
    assert "kueue.x-k8s.io/priority-class" not in unprioritized["metadata"]["labels"]


@CLUSTERS
def test_retries_are_per_index_on_workers_and_as_good_as_endless_on_ps(cluster: ClusterSettings) -> None:
    jobs = replicated(build(cluster))
    for name, job in jobs.items():
        spec = job["template"]["spec"]
        tasks = 1 if name == "chief" else (cluster.ps.count if name == "ps" else cluster.workers.count)
        assert (job["replicas"], spec["completionMode"], spec["completions"], spec["parallelism"]) == (1, "Indexed", tasks, tasks)
        if name == "ps":
            assert spec["backoffLimit"] == js.PS_BACKOFF_LIMIT and "backoffLimitPerIndex" not in spec
        else:
            assert (spec["backoffLimitPerIndex"], spec["maxFailedIndexes"]) == (cluster.workers.backoff_limit_per_index, 0)
            assert spec["template"]["spec"]["restartPolicy"] == "Never"
        assert "ttlSecondsAfterFinished" not in spec  # a child Job deleted under its JobSet comes back


def test_the_ttl_is_the_jobsets() -> None:
    assert build(BETWEEN_GRAPH)["spec"]["ttlSecondsAfterFinished"] == 600
    assert "ttlSecondsAfterFinished" not in build(IN_GRAPH_CHIEF)["spec"]


def pods_of(jobset: dict[str, Any], run: str) -> list[dict[str, str]]:
    """The labels of every pod JobSet and the Job controller create for `jobset`, as of run `run`."""
    found = []
    for job in jobset["spec"]["replicatedJobs"]:
        spec = job["template"]["spec"]
        for index in range(spec["completions"]):
            own = {**spec["template"]["metadata"]["labels"], RUN: run}
            found.append(
                {
                    **own,
                    js.JOBSET_NAME_LABEL: jobset["metadata"]["name"],
                    js.JOBSET_UID_LABEL: "uid",
                    js.REPLICATED_JOB_LABEL: job["name"],
                    "jobset.sigs.k8s.io/job-index": "0",
                    js.COMPLETION_INDEX_LABEL: str(index),
                }
            )
    return found


@CLUSTERS
def test_every_task_has_a_service_selecting_its_pod_alone_and_no_earlier_runs(cluster: ClusterSettings) -> None:
    jobset = build(cluster)
    current, earlier = pods_of(jobset, RUN_ID), pods_of(jobset, "earlier-run")
    services = js.task_services(name_of(cluster), cluster, RUN_ID)
    assert len(services) == len(current) == len({s.name for s in services})
    for service in services:
        chosen = [p for p in current + earlier if service.selector.items() <= p.items()]
        assert len(chosen) == 1, service.name
        assert (chosen[0][js.REPLICATED_JOB_LABEL], chosen[0][js.COMPLETION_INDEX_LABEL]) == (service.role, str(service.index))


@CLUSTERS
def test_ps_hosts_keep_todays_service_names(cluster: ClusterSettings) -> None:
    """The PS's names in TF_CONFIG do not change. A worker's or chief's `<c>-worker-<i>.<c>-worker`
    cannot be kept (its pod's hostname is the Job controller's): its Service is `<c>-worker-<i>`."""
    port = 2222
    services = js.task_services(name_of(cluster), cluster, RUN_ID)
    today = cs.cluster_spec(cluster, port, experiment=EXPERIMENT)
    assert [s.host(port) for s in services if s.role == cs.PS] == today[cs.PS]
    workers = [s.host(port) for s in services if s.role == cs.WORKER]
    assert [h.split(".")[0] + f":{port}" for h in today[cs.WORKER]] == workers


def test_the_longest_name_is_the_last_workers_pod_with_its_random_suffix() -> None:
    # `-worker-0-2-abcde` is 17 characters: a 46-character JobSet name makes 63, JobSet's limit.
    cluster = BETWEEN_GRAPH.model_copy(update={"name": "c" * 46})
    longest = js.longest_name(cluster.name, cluster)
    assert longest == "c" * 46 + "-worker-0-2-abcde"
    assert len(longest) == js.MAX_NAME_LENGTH
