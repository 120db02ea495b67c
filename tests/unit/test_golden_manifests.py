"""Every stack in the repository, and the variants its code switches on, rendered under mocks and
compared with the manifests kept in tests/unit/golden/.

What a restructuring must not change: every object the program declares (type, logical name,
inputs), for the three kinds of stack, every storage backend, with and without scratch
volumes, every replication mode, with and without monitoring, on Kubernetes 1.25 and 1.34. A change that is meant to change
manifests regenerates them (`make golden`) and the diff shows what it changed.

Nor every resource's URN (tests/unit/golden/urns/): a URN is the resource's identity in the
stack's state, its type and name under each parent's, so a component moved under another parent,
or renamed, is a delete and a create at the next `up` of every existing stack, even with
manifests byte for byte the same.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pulumi
import pytest
from mocked_program import Deployment, after, facts_for, facts_with_scratch, run_program, stack_config

GOLDEN = Path(__file__).resolve().parent / "golden"
URNS = GOLDEN / "urns"
UPDATE = os.environ.get("TFK8S_UPDATE_GOLDEN") == "1"
HEKETI_KEY = {"heketiAdminKey": "golden-heketi-key"}


def _platform(stack: str, **storage: Any) -> dict[str, Any]:
    raw = copy.deepcopy(stack_config(stack))
    if storage:
        raw["platform"]["storage"] = storage
    return raw


def _version(raw: dict[str, Any], version: str) -> dict[str, Any]:
    raw = copy.deepcopy(raw)
    raw["platform"]["kubernetesVersion"] = version
    return raw


def _cluster(**changes: Any) -> dict[str, Any]:
    raw = copy.deepcopy(stack_config("dev"))
    raw["clusters"][0].update(changes)
    return raw


def _facts(stack: str, version: str | None = None) -> dict[str, Any]:
    facts = facts_for(stack_config(stack))
    if version:
        facts["kubernetesVersion"] = version
    return facts


def _queueing() -> dict[str, Any]:
    """platform-dev with Kueue queueing (its Cohort, flavours and priorities; tenants' queues)."""
    raw = copy.deepcopy(stack_config("platform-dev"))
    raw["platform"]["queueing"] = {"enabled": True, "capacity": {"cpu": "64", "memory": "256Gi", "gpus": 8}}
    return raw


def _monitored(scrape: str) -> dict[str, Any]:
    """platform-dev with the platform team's Prometheus in `monitoring`, its scrape declared as `scrape`."""
    raw = copy.deepcopy(stack_config("platform-dev"))
    raw["platform"]["monitoring"] = {"namespace": "monitoring", "scrape": scrape, "monitorLabels": {"release": "prometheus"}}
    return raw


CSI = {"backend": "csi", "className": "tfk8s-nfs", "csi": {"provisioner": "nfs.csi.k8s.io", "parameters": {"server": "nfs"}}}
EXISTING = {"backend": "existing", "className": "standard-rwx", "scratchClassName": "standard-rwx-scratch"}

# name -> (raw stack config, the platform output an experiment reads, secrets)
Case = tuple[Callable[[], dict[str, Any]], Callable[[], dict[str, Any] | None], dict[str, str]]


def _fenced(raw: dict[str, Any]) -> dict[str, Any]:
    """A platform that names its pod network (required where policies are enforced)."""
    raw["platform"]["network"]["podCidrs"] = ["10.244.0.0/16"]
    return raw


CASES: dict[str, Case] = {
    # The repository's stack files as they are.
    "platform-dev": (lambda: stack_config("platform-dev"), lambda: None, {}),
    "imagenet-platform": (lambda: stack_config("imagenet-platform"), lambda: None, HEKETI_KEY),
    "tenant-alice": (lambda: stack_config("tenant-alice"), lambda: _facts("platform-dev"), {}),
    "imagenet-tenant": (lambda: stack_config("imagenet-tenant"), lambda: _facts("imagenet-platform"), {}),
    "dev": (lambda: stack_config("dev"), lambda: _facts("platform-dev"), {}),
    "imagenet": (lambda: stack_config("imagenet"), lambda: _facts("imagenet-platform"), {}),
    # A tenant's claims on each kind of backend: pre-bound hostPath volumes (tenant-alice),
    # Heketi (imagenet-tenant), a CSI class; and a tenant on 1.25 (no guard policy).
    "tenant-csi-k134": (lambda: stack_config("tenant-alice"), lambda: facts_for(_platform("platform-dev", **CSI)), {}),
    "tenant-alice-k125": (lambda: stack_config("tenant-alice"), lambda: _facts("platform-dev", "1.25"), {}),
    # Each storage backend, on both versions where it exists (the in-tree glusterfs ends at 1.25).
    "platform-local-k125": (lambda: _version(stack_config("platform-dev"), "1.25"), lambda: None, {}),
    "platform-csi-k134": (lambda: _platform("platform-dev", **CSI), lambda: None, {}),
    "platform-csi-k125": (lambda: _version(_platform("platform-dev", **CSI), "1.25"), lambda: None, {}),
    "platform-existing-k134": (lambda: _platform("platform-dev", **EXISTING), lambda: None, {}),
    # The scrape of training tasks by the platform's Prometheus, as each kind of object.
    "platform-monitoring-pod-monitor": (lambda: _monitored("podMonitor"), lambda: None, {}),
    "platform-monitoring-scrape-config": (lambda: _monitored("scrapeConfig"), lambda: None, {}),
    # Its pod network named: the monitoring namespace fenced against tenants' pods.
    "platform-monitoring-fenced": (lambda: _fenced(_monitored("scrapeConfig")), lambda: None, {}),
    # Experiments: scratch, each replication mode and client, and a 1.25 platform.
    "dev-scratch": (lambda: _cluster(scratch={"size": "2Gi"}), facts_with_scratch, {}),
    "dev-in-graph-chief-scratch": (
        lambda: _cluster(replication="in-graph", inGraphClient="chief", scratch={"size": "2Gi"}),
        facts_with_scratch,
        {},
    ),
    "dev-in-graph-notebook-sync": (
        lambda: _cluster(replication="in-graph", inGraphClient="notebook", training="sync"),
        lambda: _facts("platform-dev"),
        {},
    ),
    "dev-k125": (lambda: stack_config("dev"), lambda: _facts("platform-dev", "1.25"), {}),
    # A queueing platform, a tenant's queues on it, and a training cluster as one JobSet.
    "platform-queueing": (_queueing, lambda: None, {}),
    "tenant-alice-queueing": (lambda: stack_config("tenant-alice"), lambda: facts_for(_queueing()), {}),
    "dev-queued": (lambda: stack_config("dev"), lambda: facts_for(_queueing()), {}),
    # An experiment on a monitored platform: its policies let that Prometheus in on the metrics port.
    "dev-monitoring": (lambda: stack_config("dev"), lambda: facts_for(_monitored("podMonitor")), {}),
}


SECRET_SIG = "4dabf18193072939515e22adb298388d"  # how Pulumi marks a secret value in resource inputs


def _digest(value: Any) -> Any:
    """Long strings (shipped code, notebooks) as their digest: what changed shows, the files stay
    readable. Secrets as `[secret]`: a generated token differs each run, and no secret belongs in git."""
    if isinstance(value, str) and len(value) > 240:
        return f"sha256:{hashlib.sha256(value.encode()).hexdigest()} ({len(value)} chars)"
    if isinstance(value, dict) and SECRET_SIG in value:
        return "[secret]"
    if isinstance(value, dict):
        return {k: _digest(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_digest(v) for v in value]
    return value


def manifests(d: Deployment) -> str:
    """Every declared resource in a stable order, as JSON lines."""
    rows = [{"type": r.typ, "name": r.name, "inputs": _digest(dict(r.inputs))} for r in d.mocks.resources]
    rows.sort(key=lambda row: (row["type"], row["name"]))
    return "".join(json.dumps(row, sort_keys=True) + "\n" for row in rows)


def check_case(case: str, check: Callable[[Deployment], None]) -> None:
    """Run the program of `case` under mocks and `check` what it declared."""
    raw, platform, secrets = CASES[case]

    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        d = run_program(raw(), secrets=secrets, platform=platform(), stack=case)
        return after(d, lambda: check(d))

    run()


@pytest.mark.parametrize("case", sorted(CASES))
def test_no_stack_has_pulumi_wait_for_a_service(case: str) -> None:
    """docs/concepts/architecture.md "What `pulumi up` waits for": no Service of any kind of stack is awaited (tfk8s.kube.awaits
    says what the provider's Service await costs); the workloads behind them are."""

    def check(d: Deployment) -> None:
        services = [r for r in d.mocks.resources if r.typ == "kubernetes:core/v1:Service"]
        awaited = [s.name for s in services if s.inputs["metadata"]["annotations"].get("pulumi.com/skipAwait") != "true"]
        assert awaited == [], f"{case}: Services pulumi would wait for: {awaited}"

    check_case(case, check)


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_manifests_of_every_stack_are_the_golden_ones(case: str) -> None:
    check_case(case, lambda d: kept(GOLDEN / f"{case}.jsonl", manifests(d), f"{case}: the manifests changed"))


def kept(path: Path, rendered: str, changed: str) -> None:
    """`rendered` is what `path` keeps (`make golden` writes it), or fails saying what `changed`."""
    if UPDATE:
        path.parent.mkdir(exist_ok=True)
        path.write_text(rendered)
    assert path.is_file(), f"no golden file {path.name}: `make golden` writes it"
    assert rendered == path.read_text(), f"{changed}; if that was meant, `make golden`"


def urns(d: Deployment) -> list[str]:
    """Every resource the mocked program registered or read, by URN, sorted. The SDK's mock monitor
    keeps them (its `resources`, by URN; the mocks' own calls are not told the parent), each a
    moment after the mocks saw it, from the thread that registered it: waited for here. Its URN
    names the parent's type alone, not the chain of every ancestor's the engine's has: a resource
    moved under another parent changes its own URN here, its descendants' only there."""
    monitor = pulumi.runtime.settings.get_monitor()
    declared = {(r.typ, r.name) for r in d.mocks.resources + d.mocks.reads}
    deadline = time.monotonic() + 10
    while not declared <= {_type_and_name(urn) for urn in list(monitor.resources)}:
        assert time.monotonic() < deadline, "the mock monitor never kept every resource the mocks saw"
        time.sleep(0.01)
    return sorted(monitor.resources)


def _type_and_name(urn: str) -> tuple[str, str]:
    """`urn:pulumi:stack::project::Parent$Type::name` -> (Type, name)."""
    _, _, qualified, name = urn.split("::", 3)
    return qualified.rsplit("$", 1)[-1], name


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_urns_of_every_stack_are_the_golden_ones(case: str) -> None:
    changed = f"{case}: the URNs changed (every existing stack would replace those resources)"
    check_case(case, lambda d: kept(URNS / f"{case}.txt", "".join(f"{urn}\n" for urn in urns(d)), changed))


def test_every_golden_file_belongs_to_a_case() -> None:
    assert {p.stem for p in GOLDEN.glob("*.jsonl")} == set(CASES)
    assert {p.stem for p in URNS.glob("*.txt")} == set(CASES)
