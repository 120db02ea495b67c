"""The doctor's checks that only doing answers, each in the sandbox (tfk8s.doctor.sandbox) with a
time limit: Pod Security admission enforces, a pod resolves a Service's name and reaches it, a
default-deny NetworkPolicy really blocks a connection and an allow policy lets it through, a
ReadWriteMany claim is shared by two pods on two nodes, and every image the platform names is
pulled and started as its pods run it.

The probe pods run Python (every tfk8s image has it: TensorFlow, Jupyter, TensorBoard): a server
that answers a greeting, and a client whose exit code says which of its targets did not behave as
wanted (bit i for target i), so no log has to be read. A pod that never ran leaves its check not
proven, with the reason, never passed.
"""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Sequence

from tfk8s.doctor import reads
from tfk8s.doctor.findings import Finding, failed, not_proven, passed
from tfk8s.doctor.sandbox import PodOutcome, Sandbox
from tfk8s.kube.api_error import KubeApiError
from tfk8s.kube.api_paths import NETWORK_POLICY, PERSISTENT_VOLUME, PERSISTENT_VOLUME_CLAIM, POD, SERVICE, STORAGE_CLASS
from tfk8s.schema.platform import PlatformSettings, PodIdentity
from tfk8s.schema.storage import StorageSettings

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


def python(script: str, *args: str) -> list[str]:
    return ["python3", "-c", script, *args]


def pod_security(sandbox: Sandbox, identity: PodIdentity, image: str) -> Finding:
    """A privileged pod, sent as a dry run into the sandbox (labelled `restricted`), must be refused."""
    body = sandbox.pod_body("privileged", image, ["true"], identity)
    container = body["spec"]["containers"][0]
    container["securityContext"] = {"privileged": True}
    body["spec"]["securityContext"] = {}
    try:
        sandbox.api.post(f"{POD.root}/namespaces/{sandbox.namespace}/{POD.plural}?dryRun=All", body)
    except KubeApiError as error:
        if error.status == 403 and "PodSecurity" in str(error):
            return passed(
                "pod-security", "a privileged pod in a namespace labelled restricted is refused by Pod Security admission"
            )
        return not_proven("pod-security", f"the dry run was refused for another reason: {error}")
    return failed(
        "pod-security",
        "a privileged pod in a namespace labelled pod-security.kubernetes.io/enforce: restricted was accepted",
        "enable the PodSecurity admission plugin (on by default since 1.25; check kube-apiserver "
        "--disable-admission-plugins and any admission configuration exempting namespaces)",
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
    server = sandbox.pod_body("server", image, python(SERVER), identity, labels={"tfk8s-doctor/role": "server"}, ports=[PORT])
    started = sandbox.run_pod(server, timeout, until_ready=True)
    if not started.ready:
        why = f"the probe's server pod did not become ready: {started.why}"
        return [
            not_proven(c, why, _pod_fix(started)) for c in ("dns", "pod-network", "network-policy-deny", "network-policy-allow")
        ]
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
        return not_proven("network-policy-deny", f"the client did not run: {denied.why}", _pod_fix(denied))
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
        return not_proven("network-policy-allow", f"the client did not run: {allowed.why}", _pod_fix(allowed))
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
        python(CLIENT, want, f"{seconds:g}", *targets),
        identity,
        labels={"tfk8s-doctor/role": "client", **(labels or {})},
    )
    return sandbox.run_pod(body, timeout)


def _reach_findings(reached: PodOutcome, name: str, address: str) -> list[Finding]:
    if not reached.finished or reached.exit_code is None:
        return [not_proven(c, f"the client did not run: {reached.why}", _pod_fix(reached)) for c in ("dns", "pod-network")]
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


def _pod_fix(outcome: PodOutcome) -> str | None:
    if outcome.stuck:
        return (
            "make the image pullable from the nodes (a registry they reach, an imagePullSecret) and runnable as a non-root user"
        )
    return None


def images(sandbox: Sandbox, settings: PlatformSettings, timeout: float) -> list[Finding]:
    """Every image the platform names, pulled and started as its pods start it: `restricted`, non-root, Python."""
    wanted = {
        settings.images.tensorflow: settings.pod_security.tensorflow,
        settings.images.tensorboard: settings.pod_security.tensorflow,
        settings.images.jupyter: settings.pod_security.jupyter,
    }
    bodies = [
        sandbox.pod_body(f"image-{number}", image, python("print('ok')"), identity)
        for number, (image, identity) in enumerate(wanted.items())
    ]
    findings = []
    for (image, identity), outcome in zip(wanted.items(), sandbox.run_pods(bodies, timeout), strict=True):
        check = f"image:{image}"
        if outcome.finished and outcome.exit_code == 0:
            findings.append(passed(check, f"pulled and ran Python as uid {identity.run_as_user} on node {outcome.node}"))
        elif outcome.finished:
            findings.append(
                failed(check, f"started, and `python3` exited {outcome.exit_code}", "use an image with python3 on its PATH")
            )
        elif outcome.stuck:
            findings.append(failed(check, outcome.why, _pod_fix(outcome) or ""))
        else:
            findings.append(not_proven(check, outcome.why))
    return findings


def shared_volume(sandbox: Sandbox, settings: PlatformSettings, nodes: reads.Nodes, timeout: float) -> Finding:
    """A ReadWriteMany claim of the platform's class: a file one pod writes on one node, another reads on another."""
    store = settings.storage
    check = "rwx-two-nodes"
    if store.backend == "local":
        return not_proven(
            check,
            f"backend local: the volumes are directories of one node ({store.local.host_path_root}); two nodes do not share them",
            "for training on more than one node use backend csi (NFS, CephFS) or existing",
        )
    if store.backend == "glusterfs":
        return not_proven(check, "backend glusterfs: a probe needs the platform's Heketi secret, which the doctor does not read")
    usable = [reads.name_of(n) for n in nodes if reads.eligible(n, sandbox.placement)]
    if len(usable) < 2:
        return not_proven(
            check,
            f"{len(usable)} node(s) match the probes' placement; two are needed",
            "give --node-selector and --toleration that match two nodes",
        )
    class_name = _shared_claim(sandbox, store)
    token = secrets.token_hex(8)
    identity = settings.pod_security.tensorflow
    image = settings.images.tensorflow
    write = f"open('/shared/{token}', 'w').write('{token}')"
    writer = sandbox.run_pod(
        sandbox.pod_body("writer", image, python(write), identity, node=usable[0], volumes=[("shared", "/shared")]), timeout
    )
    _retain_cleanup(sandbox)
    if not writer.finished or writer.exit_code != 0:
        why = writer.why or f"it exited {writer.exit_code}: uid {identity.run_as_user} may not write to the volume"
        return failed(
            check,
            f"a pod on {usable[0]} could not write to a ReadWriteMany claim of class {class_name!r}: {why}",
            _volume_fix(store.backend),
        )
    read = f"import sys; sys.exit(open('/shared/{token}').read() != '{token}')"
    reader = sandbox.run_pod(
        sandbox.pod_body("reader", image, python(read), identity, node=usable[1], volumes=[("shared", "/shared")]), timeout
    )
    if reader.finished and reader.exit_code == 0:
        return passed(check, f"a file written on {usable[0]} was read on {usable[1]} through one claim of class {class_name!r}")
    why = reader.why or f"it exited {reader.exit_code}"
    return failed(check, f"a pod on {usable[1]} did not read the file written on {usable[0]}: {why}", _volume_fix(store.backend))


def _shared_claim(sandbox: Sandbox, store: StorageSettings) -> str:
    """A ReadWriteMany claim `shared` in the sandbox, of the platform's class (for csi, a class of
    the sandbox's own with the platform's provisioner and parameters, deleted with it); its class."""
    if store.backend == "csi" and store.csi is not None:
        made = sandbox.create(
            STORAGE_CLASS,
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "StorageClass",
                "metadata": {"name": sandbox.namespace, "labels": {"app.kubernetes.io/managed-by": "tfk8s-doctor"}},
                "provisioner": store.csi.provisioner,
                "parameters": dict(store.csi.parameters),
                "reclaimPolicy": "Delete",
            },
        )
        class_name = str(made["metadata"]["name"])
    else:
        class_name = store.class_name
    sandbox.create(
        PERSISTENT_VOLUME_CLAIM,
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "shared"},
            "spec": {
                "accessModes": ["ReadWriteMany"],
                "storageClassName": class_name,
                "resources": {"requests": {"storage": "1Gi"}},
            },
        },
    )
    return class_name


def _retain_cleanup(sandbox: Sandbox) -> None:
    """The claim's volume, deleted with the sandbox when its class would retain it."""
    claim = sandbox.api.get(PERSISTENT_VOLUME_CLAIM.path("shared", sandbox.namespace)) or {}
    volume = (claim.get("spec") or {}).get("volumeName")
    if volume:
        sandbox.cluster_objects.append(PERSISTENT_VOLUME.path(volume))


def _volume_fix(backend: str) -> str:
    return "use a class whose volumes are ReadWriteMany across nodes and writable by the pods' group (fsGroup): " + (
        "check the CSI driver's parameters and its NFS export or CephFS permissions"
        if backend == "csi"
        else "check the class's provisioner"
    )
