"""A training cluster on a platform that queues in Kueue (issue 38; tfk8s.components.queued_cluster):
one JobSet, admitted whole, and a Service per task that every host of the cluster spec resolves
to; no Deployment, Job or RBAC of today's shape; the checks a queued experiment gets before
anything is declared (its priority, its names, its quota)."""

from __future__ import annotations

import copy
import json
from decimal import Decimal
from typing import Any

import pulumi
import pytest
from mocked_program import DEPLOYMENT, JOB, SERVICE, after, facts_for, run_program, stack_config
from test_quota import cluster_with
from tfk8s.checks import quota as quota_check
from tfk8s.errors import ConfigError
from tfk8s.settings.experiment import ClusterSettings
from tfk8s.specs import cluster_spec as cs
from tfk8s.specs import jobset
from tfk8s.stack_kinds import experiment as experiment_stack

JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
CAPACITY = {"cpu": "64", "memory": "256Gi", "gpus": 8}


def queueing_facts(**queueing: Any) -> dict[str, Any]:
    raw = copy.deepcopy(stack_config("platform-dev"))
    raw["platform"]["queueing"] = {"enabled": True, "capacity": CAPACITY, **queueing}
    return facts_for(raw)


def replicated(js: Any) -> dict[str, Any]:
    return {r["name"]: r for r in js.inputs["spec"]["replicatedJobs"]}


def pods_of(js: Any) -> list[dict[str, str]]:
    """The labels each pod of the JobSet will carry: its template's, and what JobSet and the Job controller add."""
    name = js.inputs["metadata"]["name"]
    found = []
    for role, r in replicated(js).items():
        job = r["template"]["spec"]
        for index in range(int(job["completions"])):
            found.append(
                {
                    **job["template"]["metadata"]["labels"],
                    jobset.JOBSET_NAME_LABEL: name,
                    jobset.REPLICATED_JOB_LABEL: role,
                    jobset.COMPLETION_INDEX_LABEL: str(index),
                }
            )
    return found


def env(js: Any, role: str) -> dict[str, Any]:
    container = replicated(js)[role]["template"]["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


@pulumi.runtime.test
def test_a_queued_cluster_is_one_jobset_and_every_host_selects_exactly_its_task(dev_config: dict[str, Any]) -> None:
    dev_config["clusters"][0]["workers"]["count"] = 3
    d = run_program(dev_config, platform=queueing_facts())

    def check() -> None:
        (js,) = d.mocks.of_type(JOBSET)
        assert d.mocks.of_type(DEPLOYMENT) == [] and d.mocks.of_type(JOB) == []
        # No Role, ServiceAccount or ownership patch: the PS no longer scale themselves to zero.
        assert not [r for r in d.mocks.resources if "rbac" in r.typ or "ServiceAccount" in r.typ or "Patch" in r.typ]
        assert sorted(replicated(js)) == ["ps", "worker"]
        services = {r.inputs["metadata"]["name"]: r.inputs["spec"] for r in d.mocks.of_type(SERVICE)}
        spec = json.loads(env(js, "worker")["TFK8S_CLUSTER_SPEC"])
        assert len(spec["ps"]) == 1 and len(spec["worker"]) == 3
        pods = pods_of(js)
        for role in ("ps", "worker"):
            for index, host in enumerate(spec[role]):
                service = services[host.split(":")[0]]
                selected = [p for p in pods if all(p.get(k) == v for k, v in service["selector"].items())]
                assert len(selected) == 1, f"{host} must select one pod, selects {len(selected)}"
                assert selected[0][jobset.REPLICATED_JOB_LABEL] == role
                assert selected[0][jobset.COMPLETION_INDEX_LABEL] == str(index)
                assert service["publishNotReadyAddresses"] is True
        # The PS's host is today's name; the run's uid is the JobSet's, read from its label.
        assert spec["ps"] == ["dev-mnist-ps-0:2222"]
        assert env(js, "ps")["TFK8S_RUN_UID"] == {"fieldRef": {"fieldPath": f"metadata.labels['{jobset.JOBSET_UID_LABEL}']"}}

    return after(d, check)


@pulumi.runtime.test
def test_the_jobset_waits_in_the_tenants_queue_at_its_priority_and_a_new_priority_is_the_same_run(
    dev_config: dict[str, Any],
) -> None:
    facts = queueing_facts(priorityClasses={"urgent": 1000})
    plain = run_program(copy.deepcopy(dev_config), platform=facts)
    dev_config["clusters"][0]["run"] = {"priority": "urgent"}
    urgent = run_program(dev_config, platform=facts)

    def check() -> None:
        (before,), (now,) = plain.mocks.of_type(JOBSET), urgent.mocks.of_type(JOBSET)
        assert before.inputs["metadata"]["labels"][jobset.QUEUE_NAME_LABEL] == "experiments"
        assert jobset.PRIORITY_CLASS_LABEL not in before.inputs["metadata"]["labels"]
        assert now.inputs["metadata"]["labels"][jobset.PRIORITY_CLASS_LABEL] == "urgent"
        # Same spec: no replacement of a running JobSet, no new run directory.
        assert now.inputs["spec"] == before.inputs["spec"]
        # Not awaited: `up` returns once the JobSet is queued.
        assert now.inputs["metadata"]["annotations"]["pulumi.com/skipAwait"] == "true"

    return after(urgent, check)


@pulumi.runtime.test
def test_a_changed_jobset_is_replaced_under_its_name_behind_its_network_policy(dev_config: dict[str, Any]) -> None:
    d = run_program(dev_config, platform=queueing_facts())

    def check() -> None:
        (opts,) = [o for key, o in d.options.items() if key.startswith(JOBSET)]
        assert opts.replace_on_changes == ['metadata.labels["tfk8s.io/run"]'] and opts.delete_before_replace is True
        depends = opts.depends_on if isinstance(opts.depends_on, list) else [opts.depends_on]
        assert any("NetworkPolicy" in type(dep).__name__ or "network" in str(getattr(dep, "_name", "")) for dep in depends)

    return after(d, check)


def test_cluster_spec_hosts_on_a_queueing_platform_are_the_task_services() -> None:
    cluster = ClusterSettings.model_validate(
        {"name": "net", "replication": "in-graph", "inGraphClient": "chief", "workers": {"count": 2}}
    )
    spec = cs.cluster_spec(cluster, 2222, experiment="exp", queued=True)
    names = {t.name for t in jobset.task_services("exp-net", cluster, run_id="r")}
    assert {h.split(":")[0] for hosts in spec.values() for h in hosts} == names
    assert spec["chief"] == ["exp-net-chief-0:2222"]


def test_fixed_objects_of_a_queued_cluster_are_its_jobset_and_task_services() -> None:
    from tfk8s.settings.contract import PlatformFacts
    from tfk8s.specs import fixed_names

    facts = PlatformFacts.model_validate(queueing_facts(), strict=False)
    cluster = ClusterSettings.model_validate({"name": "net", "workers": {"count": 2}})
    claimed = fixed_names.cluster_claims("exp", cluster, "ns", facts.layouts, "tfk8s:clusters[0]", queued=True)
    by_kind = {(c.kind.kind, c.name) for c in claimed}
    assert ("JobSet", "exp-net") in by_kind
    assert {n for k, n in by_kind if k == "Service"} == {"exp-net-ps-0", "exp-net-worker-0", "exp-net-worker-1"}
    assert not [n for k, n in by_kind if k == "Job"]


@pytest.mark.parametrize(
    ("platform", "run", "refusal"),
    [
        (
            {},
            {"priority": "urgent"},
            r"tfk8s:clusters\[0\]\.run\.priority: 'urgent' is no priority class of this platform \(it offers: none\)",
        ),
        (
            {"priorityClasses": {"batch": 10, "urgent": 1000}},
            {"priority": "soon"},
            r"'soon' is no priority class of this platform \(it offers: batch, urgent\): name one of them",
        ),
        (None, {"priority": "urgent"}, r"run\.priority: this platform does not queue experiments"),
    ],
)
def test_a_priority_the_platform_does_not_offer_is_refused_before_anything_is_declared(
    dev_config: dict[str, Any], platform: dict[str, Any] | None, run: dict[str, Any], refusal: str
) -> None:
    dev_config["clusters"][0]["run"] = run
    facts = queueing_facts(**platform) if platform is not None else None
    with pytest.raises(ConfigError, match=refusal):
        run_program(dev_config, platform=facts)


def test_every_cluster_name_the_experiment_check_allows_gives_pod_names_jobset_accepts() -> None:
    # The longest `<experiment>-<cluster>` the context check allows (MAX_NAME_LENGTH), with more
    # workers than a cluster spec can hold (its size check): JobSet's own limit is never reached.
    from tfk8s.settings.types import MAX_NAME_LENGTH

    qualified = "e" * 20 + "-" + "c" * (MAX_NAME_LENGTH - 21)
    assert len(qualified) == MAX_NAME_LENGTH
    cluster = ClusterSettings.model_validate({"name": "c", "workers": {"count": 99_999}, "ps": {"count": 999}})
    assert len(jobset.longest_name(qualified, cluster)) <= jobset.MAX_NAME_LENGTH


def test_a_queued_experiment_waits_for_what_others_use_but_never_for_more_than_the_whole_quota(
    dev_config: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # 2.5 CPUs asked; 15 of 16 in use by other experiments: queued, it waits.
    busy = cluster_with({"requests.cpu": "16", "limits.cpu": "16"}, {"requests.cpu": "15", "limits.cpu": "15"})
    declared: list[bool] = []
    monkeypatch.setattr(experiment_stack, "build", lambda *args, **kwargs: declared.append(True) or {})
    run_program(copy.deepcopy(dev_config), read_whole=busy, platform=queueing_facts())
    assert declared == [True]
    # Without queueing the same experiment is refused, as before.
    with pytest.raises(ConfigError, match=r"quota has 1 of 16 left"):
        run_program(copy.deepcopy(dev_config), read_whole=busy)
    # Past the whole quota less what her Jupyter and TensorBoard hold (16 - 2.1) it would never be
    # admitted (her queue never lends that share): refused, saying so.
    dev_config["clusters"][0]["workers"]["count"] = 14
    refusal = r"asks cpu 14\.5 .* tenant alice's whole quota is 16, 2\.1 of it her Jupyter's and TensorBoard's \(a queued"
    with pytest.raises(ConfigError, match=refusal):
        run_program(copy.deepcopy(dev_config), read_whole=busy, platform=queueing_facts())
    dev_config["clusters"][0]["workers"]["count"] = 13
    run_program(dev_config, read_whole=busy, platform=queueing_facts())
    assert declared == [True, True]


def test_queued_demand_counts_a_service_per_task() -> None:
    cluster = ClusterSettings.model_validate(
        {"name": "net", "replication": "in-graph", "inGraphClient": "chief", "ps": {"count": 2}, "workers": {"count": 3}}
    )

    def services(queued: bool) -> Decimal:
        return sum((p.total for p in quota_check.experiment_demand([cluster], queued=queued)["services"]), Decimal(0))

    assert services(queued=False) == 2 + 1 + 1  # PS Services, the worker and chief headless Services
    assert services(queued=True) == 2 + 3 + 1  # one per task


def jobset_status(suspended: bool, ready: bool) -> Any:
    """A status hook: the JobSet suspended by Kueue (queued), or admitted with every Job ready."""

    def hook(typ: str, name: str, state: dict[str, Any]) -> dict[str, Any] | None:
        if typ != JOBSET:
            return None
        state["spec"]["suspend"] = suspended
        jobs = [{"name": r["name"], "ready": 1 if ready else 0, "active": 1} for r in state["spec"]["replicatedJobs"]]
        return {"replicatedJobsStatus": jobs}

    return hook


def workload(name: str, jobset_name: str, jobset_uid: str, created: str, message: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "creationTimestamp": created,
            "uid": f"{name}-uid",
            "ownerReferences": [
                {
                    "apiVersion": "jobset.x-k8s.io/v1alpha2",
                    "kind": "JobSet",
                    "name": jobset_name,
                    "uid": jobset_uid,
                    "controller": True,
                }
            ],
        },
        "spec": {"queueName": "experiments", "priority": 0},
        "status": {"conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": message}]},
    }


@pulumi.runtime.test
def test_a_queued_experiments_readiness_says_queued_with_kueues_reason_and_its_place(dev_config: dict[str, Any]) -> None:
    from tfk8s.kube.api_paths import WORKLOAD

    reason = "couldn't assign flavors to pod set worker: insufficient unused quota for cpu in flavor cpu, 2 more needed"
    listed = {
        "items": [
            # An earlier experiment of alice's waits ahead of this one.
            workload("jobset-other-1", "other-mnist", "other-uid", "2026-11-27T10:00:00Z", reason),
            workload("jobset-dev-mnist-1", "dev-mnist", "dev-mnist-jobset-uid", "2026-11-27T10:05:00Z", reason),
        ]
    }
    read_whole = lambda path: listed if path == WORKLOAD.list_path("tfk8s-alice", {}) else None  # noqa: E731
    d = run_program(
        dev_config, platform=queueing_facts(), status_hook=jobset_status(suspended=True, ready=False), read_whole=read_whole
    )

    def check(readiness: dict[str, Any]) -> None:
        mnist = readiness["clusters"]["mnist"]
        assert readiness["ready"] is False and mnist["phase"] == "Pending"
        assert mnist["queue"]["state"] == "Queued"
        assert mnist["queue"]["position"] == "2 of 2"
        assert reason in mnist["queue"]["reason"]

    return d.components["readiness"].apply(check)


@pulumi.runtime.test
def test_an_admitted_cluster_whose_jobs_are_all_ready_is_running_and_ready(dev_config: dict[str, Any]) -> None:
    d = run_program(dev_config, platform=queueing_facts(), status_hook=jobset_status(suspended=False, ready=True))

    def check(readiness: dict[str, Any]) -> None:
        mnist = readiness["clusters"]["mnist"]
        assert (readiness["ready"], mnist["phase"]) == (True, "Running"), mnist
        assert mnist["ps"]["available"] == 1 and mnist["workers"]["ready"] == 2

    return d.components["readiness"].apply(check)
