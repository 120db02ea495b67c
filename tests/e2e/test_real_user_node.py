"""The shared User Node for real: two tenants' Jupyter and TensorBoard run on the real node, and
what code in one tenant's training pod, and that tenant's own kubectl, can reach of the other's.

alice and bob each have a tenant on one platform, which names the node's pod network
(`platform.network.podCidrs`). The real node is the platform's User Node and its training node
at once, as on a cluster of one node (platform.userNode.sharedWithTraining): the layout that puts
a tenant's training code closest to everyone's apps. Both tenants' Jupyter (the Jupyter image
built here) and TensorBoard behind its token gate run there, under kube-router's firewall and
kube-proxy's NodePorts; alice runs an experiment `probe` of two clusters, `probe` and `other`,
whose PS and workers run there too (they select it) and serve plain HTTP on TensorFlow's port, so
whatever reaches them can tell it did. (test_real_training.py moves a User Node the other way: a
dedicated one, replaced.)

What is tried, with what the attacker holds:
* code in alice's training pod connects to every address of every app on the node: the apps'
  pod addresses, their Services' cluster addresses, the node's NodePorts, bob's and her own. None
  connects, while this machine (the node itself, where users' browsers come from) reaches each,
  and the training pods still reach each other: each refusal is the policies'.
* alice, with her client certificate, creates a Service whose `externalIPs` put the node's address
  and bob's Jupyter NodePort in front of her own pods (CVE-2020-8554), or a NodePort of her own:
  refused by the platform's admission. The control: the same Service made by the platform team
  (whom the admission rules do not bind) does intercept bob's NodePort under this kube-proxy, so
  the refusal is what stands between alice and bob's logins.
* alice, with her client certificate, opens her whole namespace to everything (a tenant manages
  her namespace's NetworkPolicies): her two clusters now reach each other, bob's apps still refuse
  her pods on every address (their ingress keeps the pod network out).
* the legitimate path: each tenant opens her own Jupyter and TensorBoard on the node's NodePorts
  with her token, and neither token opens the other's.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from drivers import CLUSTER, Cli, Kube, user_kube
from realnode_drivers import (
    BRIDGE_ADDRESS,
    create,
    give_volumes_to_pods,
    http_get,
    import_image,
    node_of,
    place_on_real_node,
    platform_on_the_node,
    probe_from_node,
    probe_from_pod,
    project,
    real_cluster,
    shared_user_node,
    untaint,
    until,
)

TENANTS = ("alice", "bob")
PLATFORM, EXPERIMENT = "platform-dev", "probe"
GROUP = "tfk8s-users"  # what hack/cluster.sh user-kubeconfig mints alice's certificate into
TF_PORT = 2222
APPS = ("jupyter", "tensorboard")
CLUSTERS = ("probe", "other")  # alice's experiment's training clusters
# alice's PS and worker: a plain HTTP server on TensorFlow's port, whose answers name it
# (`Server: SimpleHTTP...`), unlike Jupyter's (Tornado) or the gate's.
SERVE = f"import http.server as h; h.test(h.SimpleHTTPRequestHandler, h.ThreadingHTTPServer, port={TF_PORT}, bind='0.0.0.0')"


@dataclass(frozen=True)
class App:
    """One tenant's Jupyter or TensorBoard on the User Node, by every address it has."""

    tenant: str
    name: str
    pod: str  # the pod's address and port
    service: str  # its Service's cluster address and port
    node_port: int  # on the User Node's address

    def targets(self) -> dict[str, str]:
        """`<what>: <address:port>` for each way in."""
        what = f"{self.tenant}/{self.name}"
        return {
            f"{what} pod": self.pod,
            f"{what} service": self.service,
            f"{what} node port": f"{BRIDGE_ADDRESS}:{self.node_port}",
        }


@dataclass(frozen=True)
class UserNode:
    kube: Kube
    cli: Cli
    apps: dict[tuple[str, str], App]  # (tenant, app)
    training: dict[str, dict[str, Any]]  # alice's PS and worker pods, by `<cluster>-<role>`
    tokens: dict[str, str]  # each tenant's Jupyter token


@pytest.fixture(scope="module")
def user_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UserNode]:
    with real_cluster(f"{CLUSTER}-user-node") as kube:
        python = import_image(kube, "python")
        jupyter = import_image(kube, "jupyter")
        work = tmp_path_factory.mktemp("real-user-node")
        cli = project(kube, work / "project", "real-user-node-test")
        cli("stack", "select", "--create", PLATFORM)
        node = node_of(kube)
        untaint(kube)
        for path, value in {
            # The Jupyter image holds TensorBoard too (it is the TensorFlow image and one layer more);
            # two tenants' apps and alice's training pods on the real node's 2 cores.
            **platform_on_the_node(work / "volumes", jupyter=jupyter, tensorboard=jupyter, app_cpu="300m", app_memory="1Gi"),
            **shared_user_node(node),
        }.items():
            cli("config", "set", "--stack", PLATFORM, "--path", path, value)
        cli("up", "--stack", PLATFORM, "--yes", "--skip-preview")
        for user in TENANTS:
            cli.init_tenant(f"tenant-{user}", platform=PLATFORM, user=user)
            cli("up", "--stack", f"tenant-{user}", "--yes", "--skip-preview")
        give_volumes_to_pods(kube, [f"{EXPERIMENT}/{name}" for name in CLUSTERS])
        _alices_experiment(cli, python)

        def training_runs() -> dict[str, dict[str, Any]] | None:
            pods = _running(kube, "tfk8s-alice", node, component="tensorflow")
            found = {f"{p['metadata']['labels']['tfk8s.io/cluster']}-{p['metadata']['labels']['tfk8s.io/role']}": p for p in pods}
            return found if len(found) == 2 * len(CLUSTERS) else None

        training = until("alice's PS and worker run on the real node", 180, training_runs)

        def apps_run() -> bool:
            return all(len(_running(kube, f"tfk8s-{user}", node, component=None)) == len(APPS) for user in TENANTS)

        until("both tenants' apps run on the real User Node", 240, apps_run)
        apps = {(user, app): _app(kube, user, app, node) for user in TENANTS for app in APPS}
        tokens = {
            user: base64.b64decode(kube.get("secret", f"tfk8s-{user}", "tfk8s-jupyter-token")["data"]["token"]).decode()
            for user in TENANTS
        }
        yield UserNode(kube, cli, apps, training, tokens)


def _alices_experiment(cli: Cli, image: str) -> None:
    """Two clusters, `probe` and `other`, each a PS and a worker: a pair that may not talk to
    each other until alice opens her namespace."""
    settings: dict[str, str] = {}
    for i, name in enumerate(CLUSTERS):
        prefix = f"tfk8s:clusters[{i}]"
        settings |= {
            f"{prefix}.name": name,
            f"{prefix}.image": image,
            f"{prefix}.classicFlags": "false",
            f"{prefix}.command[0]": "python3",
            **{f"{prefix}.{role}.cpu": "100m" for role in ("ps", "workers")},
            **{f"{prefix}.{role}.memory": "128Mi" for role in ("ps", "workers")},
            f"{prefix}.ps.count": "1",
            f"{prefix}.workers.count": "1",
        }
    cli.init_experiment(EXPERIMENT, tenant="tenant-alice", settings=settings)
    for i in range(len(CLUSTERS)):
        place_on_real_node(cli, EXPERIMENT, i)
        cli.set_value(EXPERIMENT, f"tfk8s:clusters[{i}].command[1]", "-c")
        cli.set_value(EXPERIMENT, f"tfk8s:clusters[{i}].command[2]", SERVE)
    cli("up", "--stack", EXPERIMENT, "--yes", "--skip-preview")


def _running(kube: Kube, namespace: str, node: str, *, component: str | None) -> list[dict[str, Any]]:
    """The running pods of `namespace` on `node`: the training pods (`component`), or else the apps."""
    wanted = (component,) if component else APPS
    return [
        p
        for p in kube.get("pods", namespace)
        if p["metadata"]["labels"].get("app.kubernetes.io/name") in wanted
        and p["spec"].get("nodeName") == node
        and p["status"].get("phase") == "Running"
        and p["status"].get("podIP")
        and "deletionTimestamp" not in p["metadata"]
        and all(c.get("ready") for c in p["status"].get("containerStatuses", []))
    ]


def _app(kube: Kube, user: str, name: str, node: str) -> App:
    namespace = f"tfk8s-{user}"

    def named(obj: dict[str, Any]) -> bool:
        return obj["metadata"].get("labels", {}).get("app.kubernetes.io/name") == name

    (pod,) = [p for p in _running(kube, namespace, node, component=None) if named(p)]
    # Its NodePort Service (Jupyter also has a headless one, for in-graph clusters' calls back).
    (service,) = [s for s in kube.get("svc", namespace) if named(s) and s["spec"]["type"] == "NodePort"]
    (port,) = service["spec"]["ports"]
    return App(
        tenant=user,
        name=name,
        pod=f"{pod['status']['podIP']}:{_container_port(pod, port['targetPort'])}",
        service=f"{service['spec']['clusterIP']}:{port['port']}",
        node_port=port["nodePort"],
    )


def _container_port(pod: dict[str, Any], target: int | str) -> int:
    """A Service's targetPort in `pod`: a number, or the name of one of its containers' ports."""
    if isinstance(target, int):
        return target
    (number,) = [p["containerPort"] for c in pod["spec"]["containers"] for p in c.get("ports", []) if p.get("name") == target]
    return int(number)


def test_code_in_a_training_pod_reaches_no_app_on_the_user_node_by_any_address(user_node: UserNode) -> None:
    targets = {what: target for app in user_node.apps.values() for what, target in app.targets().items()}

    # The control: every app answers on every address from the node itself, so a refusal below is
    # the firewall's, not a port nobody listens on.
    def all_answer() -> bool:
        return all(probe_from_node(targets).values())

    until("every app answers on every address from the node", 60, all_answer)

    worker, ps = user_node.training["probe-worker"], user_node.training["probe-ps"]
    peer = {"alice/probe-ps-0": f"{ps['status']['podIP']}:{TF_PORT}"}
    reached = probe_from_pod(user_node.kube, worker, {**targets, **peer})
    # The training cluster still works: its worker reaches its PS.
    assert reached.pop("alice/probe-ps-0"), "alice's worker no longer reaches its own PS"
    assert not [what for what, ok in reached.items() if ok], reached
    assert len(reached) == len(TENANTS) * len(APPS) * 3
    # The PS, which may also reach the API server, reaches no app either.
    reached = probe_from_pod(user_node.kube, ps, targets)
    assert not [what for what, ok in reached.items() if ok], reached
    print(f"\n[real user node] alice's PS and worker: 0 of {len(targets)} app addresses each; every one answers from the node")


def test_each_tenant_opens_her_own_apps_on_the_node_ports_and_not_the_others(user_node: UserNode) -> None:
    for user in TENANTS:
        jupyter = f"http://{BRIDGE_ADDRESS}:{user_node.apps[(user, 'jupyter')].node_port}/api/status"
        board = f"http://{BRIDGE_ADDRESS}:{user_node.apps[(user, 'tensorboard')].node_port}/data/runs"
        own = user_node.tokens[user]
        (other,) = [t for u, t in user_node.tokens.items() if u != user]
        assert http_get(jupyter, own).status == 200, user
        assert http_get(jupyter).status == 403, user
        assert http_get(jupyter, other).status == 403, user
        assert http_get(board, own).status == 200, user
        assert http_get(board).status == 401, user
        assert http_get(board, other).status == 401, user


def _interceptor(node_port: int, selector: dict[str, str]) -> dict[str, Any]:
    """A Service that puts the User Node's address and `node_port` in front of alice's pods."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "intercept", "namespace": "tfk8s-alice"},
        "spec": {
            "selector": selector,
            "externalIPs": [BRIDGE_ADDRESS],
            "ports": [{"name": "http", "port": node_port, "targetPort": TF_PORT}],
        },
    }


def test_alice_cannot_put_her_pods_in_front_of_bobs_node_port(user_node: UserNode) -> None:
    kube = user_node.kube
    alice = user_kube(kube, "alice", [GROUP])
    bobs = f"http://{BRIDGE_ADDRESS}:{user_node.apps[('bob', 'jupyter')].node_port}/api/status"
    jupyter = http_get(bobs, user_node.tokens["bob"])
    assert jupyter.status == 200 and "Tornado" in jupyter.server, jupyter
    worker = user_node.training["probe-worker"]["metadata"]["labels"]
    selector = {k: worker[k] for k in ("tfk8s.io/experiment", "tfk8s.io/cluster", "tfk8s.io/role")}
    interceptor = _interceptor(user_node.apps[("bob", "jupyter")].node_port, selector)

    # With her own certificate, for real (not a dry run): refused, and bob's NodePort is bob's.
    refused = create(alice, interceptor)
    assert refused.returncode != 0 and "externalIPs" in refused.stderr, refused.stdout + refused.stderr
    node_port = {**interceptor, "metadata": {**interceptor["metadata"], "name": "own-node-port"}}
    node_port["spec"] = {"type": "NodePort", "selector": selector, "ports": [{"port": TF_PORT}]}
    refused_node_port = create(alice, node_port)
    assert refused_node_port.returncode != 0, refused_node_port.stdout
    assert not [s for s in kube.get("svc", "tfk8s-alice") if s["metadata"]["name"] in ("intercept", "own-node-port")]
    still = http_get(bobs, user_node.tokens["bob"])
    assert (still.status, still.server) == (jupyter.status, jupyter.server)

    # The control: the same Service from the platform team, whom the rules do not bind, does take
    # bob's NodePort over under this kube-proxy; so the refusal above is what keeps it bob's.
    made = create(kube, interceptor)
    assert made.returncode == 0, made.stderr
    try:

        def intercepted() -> str | None:
            server = http_get(bobs, user_node.tokens["bob"]).server
            return server if server.startswith("SimpleHTTP") else None

        until("the platform team's externalIPs Service takes bob's NodePort", 30, intercepted)
    finally:
        kube.run("delete", "service", "-n", "tfk8s-alice", "intercept", "--wait=true")
    until("bob's NodePort is his Jupyter again", 30, lambda: "Tornado" in http_get(bobs, user_node.tokens["bob"]).server)


def test_a_tenant_who_opens_her_namespace_still_reaches_no_app(user_node: UserNode) -> None:
    """A tenant's identities manage NetworkPolicies in her namespace (experiments make one per
    cluster), so alice may open hers to everything, both ways; the apps' own ingress keeps the pod
    network (`platform.network.podCidrs`) out of bob's all the same (her own she may open)."""
    kube = user_node.kube
    alice = user_kube(kube, "alice", [GROUP])
    worker = user_node.training["probe-worker"]
    other_ps = user_node.training["other-ps"]
    control = {"alice/other-ps-0": f"{other_ps['status']['podIP']}:{TF_PORT}"}
    assert not any(probe_from_pod(kube, worker, control).values()), "alice's clusters reach each other before she opens them"
    opened = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "all-open", "namespace": "tfk8s-alice"},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"], "ingress": [{}], "egress": [{}]},
    }
    made = create(alice, opened)
    assert made.returncode == 0, made.stderr
    try:
        # Her policy is in force: her worker now reaches what it could not before.
        def opened_up() -> bool:
            return all(probe_from_pod(kube, worker, control).values())

        until("alice's open namespace lets her clusters reach each other", 60, opened_up)
        # Bob's apps keep her out by their own policies; her own apps she has just opened herself.
        bob = [app for (user, _), app in user_node.apps.items() if user == "bob"]
        bobs = {what: target for app in bob for what, target in app.targets().items()}
        reached = probe_from_pod(kube, worker, bobs)
        assert not [what for what, ok in reached.items() if ok], reached
    finally:
        kube.run("delete", "networkpolicy", "-n", "tfk8s-alice", "all-open")
    print(f"[real user node] alice's namespace opened: her other cluster reached, 0 of {len(bobs)} addresses of bob's apps")
