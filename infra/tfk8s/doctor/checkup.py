"""The doctor's run: every check in order, each timed, the probes in a sandbox deleted afterwards.

Reads first (a failure there does not stop the others: a team fixes everything in one pass), then
the probes, at once in two threads (the network's chain; the images and the shared volume), unless
the credentials may not create a namespace for them, when they are not proven.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from tfk8s.checks import access
from tfk8s.doctor import network_probe, node_reads, probes, reads
from tfk8s.doctor.findings import Finding, not_proven, ready
from tfk8s.doctor.sandbox import Api, Sandbox
from tfk8s.doctor.target import Placement, Target
from tfk8s.kube.api_error import KubeApiError
from tfk8s.specs.tenant_admission import POLICY_SINCE

NETWORK_PROBES = ("dns", "pod-network", "network-policy-deny", "network-policy-allow")
STORAGE_PROBES = ("images", "rwx-two-nodes")
PROBES = ("pod-security", *NETWORK_PROBES, *STORAGE_PROBES)


@dataclass(frozen=True)
class Report:
    server: str
    version: tuple[int, int] | None
    identity: str
    source: str
    findings: list[Finding]
    seconds: float

    @property
    def ready(self) -> bool:
        return ready(self.findings)


@dataclass(frozen=True)
class Options:
    placement: Placement = Placement()
    image: str | None = None
    """The probes' image (Python on its PATH); the platform's TensorFlow image when None."""
    timeout: float = 60.0
    """Seconds each probe pod may take to start and finish (an image's first pull counts)."""
    probes: bool = True


def _timed(check: Callable[[], list[Finding]], clock: Callable[[], float]) -> list[Finding]:
    start = clock()
    found = check()
    spent = round(clock() - start, 2)
    return [dataclasses.replace(f, seconds=spent) for f in found]


def _guarded(checks: tuple[str, ...], check: Callable[[], list[Finding]], clock: Callable[[], float]) -> list[Finding]:
    """A check's findings; when a request of it fails (a read the credentials may not make, say),
    its checks are not proven, with the API server's words."""
    try:
        return _timed(check, clock)
    except (KubeApiError, OSError) as error:
        return [_unread(name, error) for name in checks]


def _unread(check: str, error: Exception) -> Finding:
    return not_proven(check, f"a request failed: {error}", "run the doctor with the platform team's credentials")


def checkup(
    api: Api,
    server: str,
    version: tuple[int, int] | None,
    target: Target,
    options: Options,
    *,
    clock: Callable[[], float] = time.monotonic,
) -> Report:
    start = clock()
    settings = target.settings
    findings = _timed(lambda: reads.version(version, settings), clock)
    findings += _guarded(("admission-policies",), lambda: reads.admission(api, version), clock)
    try:
        monitoring, pod_monitors = reads.monitoring_findings(api, settings)
    except KubeApiError as error:
        monitoring, pod_monitors = [_unread("monitoring", error)], False
    findings += _guarded(("rights",), lambda: reads.credentials(api, settings, pod_monitors=pod_monitors), clock)
    findings += _guarded(("storage-class",), lambda: reads.storage(api, settings), clock)
    try:
        nodes = reads.list_nodes(api)
    except KubeApiError as error:
        nodes = []
        findings += [_unread(check, error) for check in ("nodes", "user-node", "pod-cidrs")]
    else:
        findings += _timed(lambda: node_reads.nodes(nodes, settings, options.placement, user_node=target.user_node), clock)
        findings += _timed(lambda: node_reads.pod_networks(nodes, settings), clock)
    findings += _guarded(("dns-route",), lambda: reads.dns_route(api, settings), clock)
    findings += _guarded(("queueing",), lambda: reads.queueing_findings(api, settings), clock)
    findings += monitoring
    if options.probes:
        findings += _probe(api, version or POLICY_SINCE, target, options, nodes, clock)
    return Report(server, version, access.identity(api.post), target.source, findings, round(clock() - start, 2))


def _probe(
    api: Api, version: tuple[int, int], target: Target, options: Options, nodes: node_reads.Nodes, clock: Callable[[], float]
) -> list[Finding]:
    settings = target.settings
    image = options.image or settings.images.tensorflow
    try:
        sandbox = Sandbox(api, options.placement, version).__enter__()
    except KubeApiError as error:
        why = f"no throwaway namespace for the probes: {error}"
        return [not_proven(check, why, "run the doctor with credentials that may create namespaces") for check in PROBES]
    try:
        findings = _guarded(
            ("pod-security",), lambda: [probes.pod_security(sandbox, settings.pod_security.tensorflow, image)], clock
        )
        with ThreadPoolExecutor(2) as pool:
            network = pool.submit(
                _guarded, NETWORK_PROBES, lambda: network_probe.network(sandbox, settings, image, options.timeout), clock
            )
            storage = pool.submit(
                _guarded,
                STORAGE_PROBES,
                lambda: [
                    *probes.images(sandbox, settings, options.timeout),
                    probes.shared_volume(sandbox, settings, nodes, options.timeout),
                ],
                clock,
            )
            findings += network.result() + storage.result()
        return findings
    finally:
        sandbox.clean_up()
