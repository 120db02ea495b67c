"""The live reader of queued clusters' Workloads (tfk8s.stack_kinds.queue_status) and the one permission it
needs: one LIST of the tenant's namespace during a real `up`, never in a preview, bounded in time;
whatever goes wrong is an `unknown` with the fix; and the experimenter role may get and list
Workloads on a queueing platform only."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pulumi
import pytest
from kueue_objects import ADMITTED, INSUFFICIENT, NAMESPACE, QUEUED, workload
from mocked_program import after, facts_for, run_program, stack_config, tenant_facts_for
from tfk8s import program
from tfk8s.checks import access
from tfk8s.errors import AccessDenied
from tfk8s.kube.api_error import KubeApiError
from tfk8s.settings.contract import PlatformFacts, TenantFacts
from tfk8s.specs import experimenter_rights, queue_readiness
from tfk8s.stack_kinds import queue_status

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
LIST = f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NAMESPACE}/workloads"
JOBSETS = ["dev-mnist", "dev-cifar"]
API_SERVER = {"cidrs": ["10.0.0.1/32"], "ports": [6443]}
KUEUE_RULE = {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["get", "list"]}


def queueing_platform_config() -> dict[str, Any]:
    raw = copy.deepcopy(stack_config("platform-dev"))
    raw["platform"]["queueing"] = {"enabled": True, "capacity": {"cpu": "64", "memory": "256Gi", "gpus": 8}}
    raw["platform"]["network"] = {"apiServer": API_SERVER, "podCidrs": ["10.244.0.0/16"]}
    return raw


QUEUEING = PlatformFacts.model_validate(facts_for(queueing_platform_config()), strict=False)
NOT_QUEUEING = PlatformFacts.model_validate(facts_for(stack_config("platform-dev")), strict=False)


class Api:
    """The tenant's namespace as her credentials list it: `answer` for the Workloads' list (or what
    listing raises, or a function of the path); records every path read."""

    def __init__(self, answer: Any) -> None:
        self.answer, self.read = answer, []  # type: ignore[var-annotated]

    def __call__(self, path: str) -> Any:
        self.read.append(path)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer(path) if callable(self.answer) else self.answer


def listed(*items: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadList", "items": list(items)}


def test_one_list_gives_each_jobset_its_workload_facts() -> None:
    api = Api(listed(workload("dev-mnist", conditions=QUEUED), workload("dev-cifar", conditions=ADMITTED)))
    found = queue_status.read_now(NAMESPACE, JOBSETS, api, NOW)
    assert api.read == [LIST]
    mnist = found["dev-mnist"]
    assert mnist["position"] == (1, 1) and mnist["queue"] == "experiments" and mnist["jobsetUid"] == "uid-of-dev-mnist"
    assert mnist["conditions"][0]["message"] == INSUFFICIENT
    assert found["dev-cifar"]["clusterQueue"] == NAMESPACE and found["dev-cifar"]["position"] is None


FAILURES = [
    (
        "forbidden",
        KubeApiError(f"GET {LIST}: HTTP 403 Forbidden", 403),
        ["may not list Kueue's Workloads", f"namespace {NAMESPACE!r}", "`pulumi up` the platform stack"],
    ),
    ("not-served", None, ["serves no Kueue Workloads", "is Kueue running?", "hack/cluster.sh start --queueing"]),
    ("failed", KubeApiError(f"GET {LIST}: HTTP 500 Internal Server Error", 500), ["could not be listed", "HTTP 500"]),
    ("crash", RuntimeError("a bug"), ["could not be read (RuntimeError)", f"kubectl get workloads -n {NAMESPACE}"]),
    ("no-workload-yet", listed(), ["no Workload for this JobSet yet", "`pulumi up --refresh` again"]),
]


@pytest.mark.parametrize(("answer", "says"), [f[1:] for f in FAILURES], ids=[f[0] for f in FAILURES])
def test_what_cannot_be_read_is_unknown_with_the_fix(answer: Any, says: list[str]) -> None:
    found = queue_status.read_now(NAMESPACE, JOBSETS, Api(answer), NOW)
    assert set(found) == set(JOBSETS)
    for name in JOBSETS:
        for words in says:
            assert words in found[name]["unknown"], found[name]
    # Readiness then says what the JobSet alone says, and why the Workload is missing.
    status = {"jobset": {"spec": {"suspend": True}, "status": None, "uid": "uid-of-dev-mnist"}}
    report = queue_readiness.queued_cluster_readiness(
        ps_expected=1, workers_expected=2, chief_expected=False, status=status, queue=found["dev-mnist"]
    )
    assert (
        report["queue"]["reason"] == queue_readiness.NO_WORKLOAD_READ
        and report["queue"]["unknown"] == found["dev-mnist"]["unknown"]
    )


class NoResources(pulumi.runtime.Mocks):
    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        return args.name, dict(args.inputs)

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        return {}, None


def resolved(make: Callable[[], pulumi.Output[Any] | None], *, preview: bool = False) -> tuple[Any, float]:
    """What `make()` resolves to under a run (an `up`, or a preview), and the seconds it took."""
    pulumi.runtime.set_mocks(NoResources(), preview=preview)
    found: list[Any] = []
    start = time.monotonic()

    @pulumi.runtime.test
    def run() -> Any:
        output = make()
        if output is None:
            found.append(None)
            return None
        return output.apply(found.append)

    run()
    assert len(found) == 1, "never resolved"
    return found[0], time.monotonic() - start


def test_during_an_up_it_lists_once_in_a_thread_and_gives_each_jobset_its_facts() -> None:
    api = Api(listed(workload("dev-mnist", conditions=QUEUED)))
    found, _ = resolved(lambda: queue_status.read(NAMESPACE, JOBSETS, QUEUEING, api))
    assert api.read == [LIST]
    assert found["dev-mnist"]["position"] == (1, 1) and "unknown" in found["dev-cifar"]


def test_a_silent_api_server_costs_the_timeout_at_most_and_says_so() -> None:
    def slow(path: str) -> Any:
        time.sleep(1.5)
        return listed(workload("dev-mnist", conditions=QUEUED))

    found, seconds = resolved(lambda: queue_status.read(NAMESPACE, JOBSETS, QUEUEING, Api(slow), timeout=0.2))
    assert seconds < 1.0, seconds
    for name in JOBSETS:
        assert "did not list Kueue's Workloads within 0.2 s" in found[name]["unknown"]
        assert f"kubectl get workloads -n {NAMESPACE}" in found[name]["unknown"]


def test_it_lists_only_once_after_has_resolved() -> None:
    api = Api(listed(workload("dev-mnist", conditions=QUEUED)))
    order: list[str] = []

    def make() -> pulumi.Output[Any] | None:
        uids = pulumi.Output.from_input("uid-of-dev-mnist").apply(lambda u: order.append("after") or u)
        return queue_status.read(NAMESPACE, JOBSETS, QUEUEING, lambda p: order.append("list") or api(p), after=uids)

    found, _ = resolved(make)
    assert order == ["after", "list"] and found["dev-mnist"]["position"] == (1, 1)


@pytest.mark.parametrize(
    ("platform", "preview"), [(QUEUEING, True), (NOT_QUEUEING, False)], ids=["preview", "platform-without-queueing"]
)
def test_a_preview_or_a_platform_without_queueing_reads_nothing(platform: PlatformFacts, preview: bool) -> None:
    api = Api(listed())
    found, _ = resolved(lambda: queue_status.read(NAMESPACE, JOBSETS, platform, api), preview=preview)
    assert found is None and api.read == []


# --- RBAC: get and list of Workloads, on a queueing platform only ------------------------------------------


def test_the_experimenter_table_reads_workloads_only_with_queueing() -> None:
    kueue = [p for p in experimenter_rights.experimenter_rules(QUEUEING.layouts, queueing=True) if "kueue" in p.api_group]
    assert [(p.api_group, p.resource, p.verbs, p.resource_names) for p in kueue] == [
        ("kueue.x-k8s.io", "workloads", ("get", "list"), ())
    ]
    assert not [p for p in experimenter_rights.experimenter_rules(NOT_QUEUEING.layouts) if "kueue" in p.api_group]


@pytest.mark.parametrize("queueing", [True, False], ids=["queueing", "without"])
def test_the_platforms_experimenter_role_grants_reading_workloads_only_on_a_queueing_platform(queueing: bool) -> None:
    raw = queueing_platform_config() if queueing else copy.deepcopy(stack_config("platform-dev"))
    objects = {
        "/api/v1/nodes/tfk8s-user-node": {"metadata": {"name": "tfk8s-user-node"}, "spec": {}, "status": {}},
        "/apis/kueue.x-k8s.io/v1beta2": {"resources": [{"name": "clusterqueues"}, {"name": "cohorts"}]},
        "/apis/jobset.x-k8s.io/v1alpha2": {"resources": [{"name": "jobsets"}]},
    }

    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        d = run_program(raw, read_whole=objects.get)

        def check() -> None:
            (role,) = d.mocks.of_type("kubernetes:rbac.authorization.k8s.io/v1:ClusterRole")
            kueue = [r for r in role.inputs["rules"] if any("kueue" in g for g in r["apiGroups"])]
            assert kueue == ([KUEUE_RULE] if queueing else [])

        return after(d, check)

    run()


def test_an_experiment_on_a_queueing_platform_is_refused_without_reading_workloads() -> None:
    def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
        if path == access.RULES_REVIEW:
            return {"status": {"resourceRules": [], "incomplete": True}}
        if path == access.ACCESS_REVIEW:
            return {"status": {"allowed": body["spec"]["resourceAttributes"]["resource"] != "workloads"}}
        return {"status": {"userInfo": {"username": "alice"}}}

    tenant = TenantFacts.model_validate(tenant_facts_for("tenant-alice", facts_for(queueing_platform_config())), strict=False)
    with pytest.raises(AccessDenied, match=r"may not get or list workloads\.kueue\.x-k8s\.io in namespace 'tfk8s-alice'"):
        program.refuse_without_access(QUEUEING, tenant, post)
    program.refuse_without_access(NOT_QUEUEING, tenant, post)  # without queueing nobody asks
