"""Each rule of the tfk8s policy pack, with the pack's own validate() and a violation reporter:
every golden manifest of every stack kind passes, and each rule catches a violating variant of one."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pulumi_policy import (
    EnforcementLevel,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
)
from tfk8s_policies import POLICIES, pod_templates

GOLDEN = Path(__file__).resolve().parents[2] / "tests" / "unit" / "golden"
BY_NAME = {p.name: p for p in POLICIES}
Row = dict[str, Any]


def golden(case: str) -> list[Row]:
    return [json.loads(line) for line in (GOLDEN / f"{case}.jsonl").read_text().splitlines()]


CASES = sorted(p.stem for p in GOLDEN.glob("*.jsonl"))


def _options() -> PolicyResourceOptions:
    return PolicyResourceOptions(
        protect=False,
        ignore_changes=[],
        delete_before_replace=None,
        aliases=[],
        custom_timeouts=None,
        additional_secret_outputs=[],
    )


def violations(rows: list[Row], policy_name: str) -> list[str]:
    """What `policy_name` reports on `rows` (a stack's resources, as the golden files hold them)."""
    policy = BY_NAME[policy_name]
    found: list[str] = []

    def report(message: str, urn: str | None = None) -> None:
        found.append(message)

    if isinstance(policy, ResourceValidationPolicy):
        for row in rows:
            args = ResourceValidationArgs(row["type"], row["inputs"], f"urn:{row['name']}", row["name"], _options(), None)
            policy.validate(args, report)
    else:
        resources = [
            PolicyResource(row["type"], row["inputs"], f"urn:{row['name']}", row["name"], _options(), None, None, [], {})
            for row in rows
        ]
        policy.validate(StackValidationArgs(resources), report)
    return found


def test_the_pack_has_mandatory_and_advisory_rules() -> None:
    levels = {p.name: p.enforcement_level for p in POLICIES}
    assert sum(1 for level in levels.values() if level == EnforcementLevel.MANDATORY) >= 9
    assert {name for name, level in levels.items() if level == EnforcementLevel.ADVISORY} == {"jobs-cleaned-up", "jobs-deadline"}


@pytest.mark.parametrize("case", CASES)
def test_every_stack_tfk8s_builds_passes_every_mandatory_rule(case: str) -> None:
    rows = golden(case)
    for policy in POLICIES:
        if policy.enforcement_level == EnforcementLevel.MANDATORY:
            assert violations(rows, policy.name) == [], (case, policy.name)


def _first(rows: list[Row], predicate: Callable[[Row], bool]) -> Row:
    return next(row for row in rows if predicate(row))


def _is(kind: str, component: str | None = None) -> Callable[[Row], bool]:
    def match(row: Row) -> bool:
        if row["type"] != kind:
            return False
        labels = ((row["inputs"].get("spec") or {}).get("template") or {}).get("metadata", {}).get("labels", {})
        return component is None or labels.get("app.kubernetes.io/name") == component

    return match


DEPLOYMENT, JOB = "kubernetes:apps/v1:Deployment", "kubernetes:batch/v1:Job"


def _pod(row: Row) -> dict[str, Any]:
    return row["inputs"]["spec"]["template"]["spec"]


def _root_pod(rows: list[Row]) -> None:
    _pod(_first(rows, _is(JOB, "tensorflow")))["securityContext"] = {"runAsUser": 0}


def _escalating(rows: list[Row]) -> None:
    _pod(_first(rows, _is(DEPLOYMENT)))["containers"][0]["securityContext"]["allowPrivilegeEscalation"] = True


def _no_resources(rows: list[Row]) -> None:
    _pod(_first(rows, _is(DEPLOYMENT, "jupyter")))["containers"][0].pop("resources")


def _latest(rows: list[Row]) -> None:
    _pod(_first(rows, _is(JOB)))["containers"][0]["image"] = "tensorflow/tensorflow:latest"


def _untagged(rows: list[Row]) -> None:
    _pod(_first(rows, _is(JOB)))["containers"][0]["image"] = "tensorflow/tensorflow"


def _tolerates_user_node(rows: list[Row]) -> None:
    _pod(_first(rows, _is(JOB)))["tolerations"] = [{"key": "tfk8s.io/user-node", "operator": "Exists"}]


def _no_affinity(rows: list[Row]) -> None:
    _pod(_first(rows, _is(DEPLOYMENT, "tensorflow"))).pop("affinity")


def _no_psa_label(rows: list[Row]) -> None:
    _first(rows, _is("kubernetes:core/v1:Namespace"))["inputs"]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] = (
        "baseline"
    )


def _rwo_log(rows: list[Row]) -> None:
    claim = _first(
        rows, lambda r: r["type"].endswith(":PersistentVolumeClaim") and r["inputs"]["metadata"].get("name") == "tfk8s-log"
    )
    claim["inputs"]["spec"]["accessModes"] = ["ReadWriteOnce"]


def _cluster_traffic_policy(rows: list[Row]) -> None:
    service = _first(rows, lambda r: r["type"].endswith(":Service") and r["inputs"]["spec"].get("type") == "NodePort")
    service["inputs"]["spec"]["externalTrafficPolicy"] = "Cluster"


def _no_default_deny(rows: list[Row]) -> None:
    rows.remove(
        _first(rows, lambda r: r["type"].endswith(":NetworkPolicy") and r["inputs"]["metadata"]["name"] == "tfk8s-default-deny")
    )


def _no_quota(rows: list[Row]) -> None:
    rows.remove(_first(rows, _is("kubernetes:core/v1:ResourceQuota")))


def _no_cluster_policy(rows: list[Row]) -> None:
    rows.remove(_first(rows, lambda r: r["type"].endswith(":NetworkPolicy")))


def _app_off_the_user_node(rows: list[Row]) -> None:
    _pod(_first(rows, _is(DEPLOYMENT, "tensorboard"))).pop("nodeSelector")


JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"


def _jobset_worker(rows: list[Row]) -> dict[str, Any]:
    jobset = _first(rows, lambda r: r["type"] == JOBSET)
    worker = next(rj for rj in jobset["inputs"]["spec"]["replicatedJobs"] if rj["name"] == "worker")
    spec: dict[str, Any] = worker["template"]["spec"]["template"]["spec"]
    return spec


def _jobset_root(rows: list[Row]) -> None:
    _jobset_worker(rows)["securityContext"] = {"runAsUser": 0}


def _jobset_on_the_user_node(rows: list[Row]) -> None:
    _jobset_worker(rows)["tolerations"] = [{"key": "tfk8s.io/user-node", "operator": "Exists"}]


def _no_ttl(rows: list[Row]) -> None:
    _first(rows, _is(JOB))["inputs"]["spec"].pop("ttlSecondsAfterFinished", None)


def _no_deadline(rows: list[Row]) -> None:
    _first(rows, _is(JOB))["inputs"]["spec"].pop("activeDeadlineSeconds", None)


VIOLATIONS = [
    ("pod-security-restricted", "dev", _root_pod, "the pod may run as root"),
    ("pod-security-restricted", "tenant-alice", _escalating, "allows privilege escalation"),
    ("container-resources", "tenant-alice", _no_resources, "container 'jupyter' sets no requests of cpu, memory"),
    ("no-latest-image", "dev", _latest, "runs 'tensorflow/tensorflow:latest': pin a tag"),
    ("no-latest-image", "dev", _untagged, "runs 'tensorflow/tensorflow': pin a tag"),
    ("training-pods-off-the-user-node", "dev", _tolerates_user_node, "tolerates the User Node taint"),
    ("training-pods-off-the-user-node", "dev", _no_affinity, "does not require its node to lack the label"),
    ("pod-security-restricted", "dev-queued", _jobset_root, "replicatedJobs[worker]: the pod may run as root"),
    ("training-pods-off-the-user-node", "dev-queued", _jobset_on_the_user_node, "replicatedJobs[worker]: a training pod"),
    ("namespace-pod-security-labels", "tenant-alice", _no_psa_label, "pod-security.kubernetes.io/enforce is not restricted"),
    (
        "shared-volumes-read-write-many",
        "tenant-alice",
        _rwo_log,
        "the shared volume tfk8s-log has access modes ['ReadWriteOnce']",
    ),
    ("user-facing-services-local", "tenant-alice", _cluster_traffic_policy, "without externalTrafficPolicy: Local"),
    ("namespaces-isolated", "tenant-alice", _no_default_deny, "has no NetworkPolicy denying all ingress and egress"),
    ("namespaces-isolated", "tenant-alice", _no_quota, "has no ResourceQuota"),
    ("namespaces-isolated", "dev", _no_cluster_policy, "no NetworkPolicy of its stack selects its pods"),
    (
        "user-facing-services-on-the-user-node",
        "tenant-alice",
        _app_off_the_user_node,
        "selects pods that are not pinned to the User Node",
    ),
    ("jobs-cleaned-up", "dev", _no_ttl, "no run.ttlSecondsAfterFinished"),
    ("jobs-deadline", "dev", _no_deadline, "no run.activeDeadlineSeconds"),
]


@pytest.mark.parametrize(("policy", "case", "mutate", "message"), VIOLATIONS, ids=[f"{v[0]}:{v[2].__name__}" for v in VIOLATIONS])
def test_each_rule_catches_what_it_is_for(policy: str, case: str, mutate: Callable[[list[Row]], None], message: str) -> None:
    rows = copy.deepcopy(golden(case))
    mutate(rows)
    found = violations(rows, policy)
    assert any(message in v for v in found), found


def test_every_rule_has_a_violating_case() -> None:
    assert {v[0] for v in VIOLATIONS} == set(BY_NAME)


def _pod_specs_in(value: Any) -> int:
    """How many pod specs (mappings with `containers`) `value` holds, at any depth."""
    if isinstance(value, dict):
        return ("containers" in value) + sum(_pod_specs_in(v) for v in value.values())
    if isinstance(value, list):
        return sum(_pod_specs_in(v) for v in value)
    return 0


@pytest.mark.parametrize("case", CASES)
def test_the_pack_finds_every_pod_template_of_every_kind_tfk8s_declares(case: str) -> None:
    """A kind tfk8s starts to declare with a pod template the pack cannot find fails here, not in a
    cluster: every rule on pods would pass it unread."""
    for row in golden(case):
        found = pod_templates(row["type"], row["inputs"]) or []
        assert len(found) == _pod_specs_in(row["inputs"]), (case, row["type"], row["name"])
