"""The doctor's network probe, in the sandbox (tfk8s.doctor.sandbox) with a time limit: a pod
resolves a Service's name and reaches it and another pod, a default-deny NetworkPolicy really blocks
a connection, and an allow policy lets it through.

A server that answers a greeting, and a client whose exit code says which of its targets did not
behave as wanted (bit i for target i), so no log has to be read.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from tfk8s.doctor.findings import Finding, failed, not_proven, passed
from tfk8s.doctor.sandbox import PodOutcome, Sandbox, python_command
from tfk8s.kube.api_paths import NETWORK_POLICY, SERVICE
from tfk8s.settings.platform import PlatformSettings, PodIdentity

PORT = 8080
GREETING = "tfk8s-doctor"
SERVER = f"""
import socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", {PORT}))
s.listen(16)
while True:
    c, _ = s.accept()
    c.sendall(b"{GREETING}")
    c.close()
"""
# argv: want (open|blocked), seconds, targets (dns:NAME or tcp:HOST:PORT). Open: each target seen
# open once. Blocked: each seen refused or timing out three times in a row (a policy can take a
# moment to reach the node's firewall). Exit code: a bit per target not seen as wanted.
CLIENT = f"""
import socket, sys, time
want, limit, targets = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
def probe(target):
    kind, _, rest = target.partition(":")
    try:
        if kind == "dns":
            return bool(socket.getaddrinfo(rest, None))
        host, _, port = rest.rpartition(":")
        c = socket.create_connection((host, int(port)), timeout=2)
        try:
            return c.recv(32).startswith(b"{GREETING}")
        finally:
            c.close()
    except OSError:
        return False
end = time.time() + limit
streak = dict((t, 0) for t in targets)
seen = set()
while True:
    for t in targets:
        if t in seen:
            continue
        got = probe(t)
        streak[t] = 0 if got else streak[t] + 1
        if (want == "open" and got) or (want == "blocked" and streak[t] >= 3):
            seen.add(t)
    if len(seen) == len(targets) or time.time() > end:
        break
    time.sleep(0.5)
sys.exit(sum(1 << i for i, t in enumerate(targets) if t not in seen))
"""
CNI_FIX = (
    "run a CNI that enforces NetworkPolicy (Calico, Cilium, Antrea, kube-router; on EKS the VPC CNI's network "
    "policy agent, on GKE Dataplane V2), or, knowingly, set tfk8s:platform.network.policyEnforced: false "
    "(then every tenant is told its TensorFlow servers are open to every pod)"
)


def network(sandbox: Sandbox, settings: PlatformSettings, image: str, timeout: float) -> list[Finding]:
    """A server and its Service; a client that must reach both by name and address; then a default-deny
    policy that must block a client, and an allow policy that must let another one through. The deny
    check is required unless the stack file says policies are not enforced (whatever its verdict)."""
    found = _network(sandbox, settings, image, timeout)
    enforced = settings.network.policy_enforced
    return [dataclasses.replace(f, required=enforced) if f.check == "network-policy-deny" else f for f in found]


def _network(sandbox: Sandbox, settings: PlatformSettings, image: str, timeout: float) -> list[Finding]:
    identity = settings.pod_security.tensorflow
    server = sandbox.pod_body(
        "server", image, python_command(SERVER), identity, labels={"tfk8s-doctor/role": "server"}, ports=[PORT]
    )
    started = sandbox.run_pod(server, timeout, until_ready=True)
    if not started.ready:
        why = f"the probe's server pod did not become ready: {started.why}"
        return [not_proven(c, why, started.fix) for c in ("dns", "pod-network", "network-policy-deny", "network-policy-allow")]
    sandbox.create(
        SERVICE,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "server"},
            "spec": {"selector": {"tfk8s-doctor/role": "server"}, "ports": [{"port": PORT, "targetPort": PORT}]},
        },
    )
    name, address = f"server.{sandbox.namespace}.svc", f"{started.ip}:{PORT}"
    targets = [f"dns:{name}", f"tcp:{name}:{PORT}", f"tcp:{address}"]
    reached = _client(sandbox, "reach", image, identity, "open", targets, timeout)
    findings = _reach_findings(reached, name, address)
    if reached.exit_code is None or reached.exit_code & 0b100:
        why = "the pods could not reach each other without any policy, so a policy's effect cannot be told"
        return findings + [not_proven(c, why) for c in ("network-policy-deny", "network-policy-allow")]
    return findings + [
        _policy_denies(sandbox, settings, image, address, timeout),
        _policy_allows(sandbox, settings, image, address, timeout),
    ]


def _policy_denies(sandbox: Sandbox, settings: PlatformSettings, image: str, address: str, timeout: float) -> Finding:
    """A default-deny ingress policy blocks a pod's connection to the server."""
    identity = settings.pod_security.tensorflow
    enforced_fix = CNI_FIX if settings.network.policy_enforced else None
    sandbox.create(NETWORK_POLICY, _policy("deny", []))
    denied = _client(sandbox, "denied", image, identity, "blocked", [f"tcp:{address}"], timeout)
    if not denied.finished:
        return not_proven("network-policy-deny", f"the client did not run: {denied.why}", denied.fix)
    if denied.exit_code == 0:
        return passed("network-policy-deny", "a default-deny ingress policy blocked a pod's connection to the server")
    return failed(
        "network-policy-deny",
        f"a default-deny ingress policy did not block a pod's connection to the server (still open after {timeout:g} s): "
        "NetworkPolicies are not enforced",
        enforced_fix or "none needed: the stack file says policies are not enforced (policyEnforced: false)",
    )


def _policy_allows(sandbox: Sandbox, settings: PlatformSettings, image: str, address: str, timeout: float) -> Finding:
    """A policy allowing the client's labels lets its connection through the default deny."""
    identity = settings.pod_security.tensorflow
    sandbox.create(
        NETWORK_POLICY, _policy("allow", [{"from": [{"podSelector": {"matchLabels": {"tfk8s-doctor/allowed": "true"}}}]}])
    )
    allowed = _client(
        sandbox, "allowed", image, identity, "open", [f"tcp:{address}"], timeout, labels={"tfk8s-doctor/allowed": "true"}
    )
    if not allowed.finished:
        return not_proven("network-policy-allow", f"the client did not run: {allowed.why}", allowed.fix)
    if allowed.exit_code == 0:
        return passed("network-policy-allow", "a policy allowing the client's labels let its connection through the default deny")
    return failed(
        "network-policy-allow",
        f"a policy allowing the client's labels did not let its connection through within {timeout:g} s",
        "check the CNI's NetworkPolicy support (ingress from podSelector) and its logs",
    )


def _client(
    sandbox: Sandbox,
    name: str,
    image: str,
    identity: PodIdentity,
    want: str,
    targets: Sequence[str],
    timeout: float,
    *,
    labels: dict[str, str] | None = None,
) -> PodOutcome:
    # The client's own limit is shorter than the wait for it, which also covers its start.
    seconds = max(timeout / 2, 10)
    body = sandbox.pod_body(
        name,
        image,
        python_command(CLIENT, want, f"{seconds:g}", *targets),
        identity,
        labels={"tfk8s-doctor/role": "client", **(labels or {})},
    )
    return sandbox.run_pod(body, timeout)


def _reach_findings(reached: PodOutcome, name: str, address: str) -> list[Finding]:
    if not reached.finished or reached.exit_code is None:
        return [not_proven(c, f"the client did not run: {reached.why}", reached.fix) for c in ("dns", "pod-network")]
    code = reached.exit_code
    findings = []
    if code & 0b001:
        findings.append(
            failed(
                "dns",
                f"a pod could not resolve the Service name {name}",
                "check the cluster's DNS (CoreDNS pods, the kubelet's --cluster-dns)",
            )
        )
    elif code & 0b010:
        findings.append(
            failed(
                "dns",
                f"{name} resolved, but a pod could not connect through the Service",
                "check kube-proxy (or the CNI's service proxy)",
            )
        )
    else:
        findings.append(passed("dns", f"a pod resolved {name} and reached the server through it"))
    if code & 0b100:
        findings.append(
            failed(
                "pod-network", f"a pod could not connect to another pod at {address}", "check the CNI: pods must reach each other"
            )
        )
    else:
        findings.append(passed("pod-network", f"a pod reached another pod at {address}"))
    return findings


def _policy(name: str, ingress: list[dict[str, object]]) -> dict[str, object]:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name},
        "spec": {"podSelector": {"matchLabels": {"tfk8s-doctor/role": "server"}}, "policyTypes": ["Ingress"], "ingress": ingress},
    }
