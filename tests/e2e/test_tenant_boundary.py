"""What a tenant's own kubectl may not do around her namespace, tried with her own certificate.

alice holds the experimenter role in tfk8s-alice (her tenant stack binds it): enough for RBAC to let
her create Jobs, Services, RoleBindings and patch Deployments there. Each attack below is what a
review found RBAC let through; the platform's admission policies (tfk8s.components.tenant_admission) refuse it
on the real API server, with a message naming the rule. Every request is a server-side dry run, so
admission runs in full and nothing is left behind. The legitimate paths stay open: her plain Jobs,
ClusterIP Services, bindings of her own service accounts, reading her pods and their logs; and the
platform team (the admin) still changes what the tenant stack owns.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
from drivers import RESTRICTED, Kube, user_kube

ALICE = "tfk8s-alice"
USER_NODE, USER_NODE_KEY = "tfk8s-user-node", "tfk8s.io/user-node"  # stacks/Pulumi.platform-dev.yaml
GROUP = "tfk8s-users"


@pytest.fixture(scope="module")
def alice(kube: Kube, tenants: dict[str, str]) -> Kube:
    return user_kube(kube, "alice", [GROUP])


def pod_spec(**extra: Any) -> dict[str, Any]:
    return {
        "restartPolicy": "Never",
        "containers": [{"name": "probe", "image": "busybox", "command": ["true"], "securityContext": RESTRICTED}],
        **extra,
    }


def job(**extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "probe", "namespace": ALICE},
        "spec": {"template": {"spec": pod_spec(**extra)}},
    }


def deployment(**extra: Any) -> dict[str, Any]:
    labels = {"app": "probe"}
    spec = {**pod_spec(**extra), "restartPolicy": "Always"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "probe", "namespace": ALICE},
        "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": spec}},
    }


def service(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "probe", "namespace": ALICE},
        "spec": {"selector": {"app": "probe"}, "ports": [{"port": 8888}], **spec},
    }


def role_binding(role_ref: dict[str, str], *subjects: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "probe", "namespace": ALICE},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", **role_ref},
        "subjects": list(subjects),
    }


def node_affinity(key: str, operator: str, values: list[str] | None = None, preferred: bool = False) -> dict[str, Any]:
    term = {"matchExpressions": [{"key": key, "operator": operator, **({"values": values} if values else {})}]}
    if preferred:
        return {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": term}]}}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


def attempt(user: Kube, *args: str, manifest: dict[str, Any] | None = None) -> subprocess.CompletedProcess[str]:
    """`kubectl` as `user`, a server-side dry run: admission runs in full, nothing is stored."""
    command = [user.binary, "--kubeconfig", str(user.kubeconfig), *args, "--dry-run=server"]
    if manifest is not None:
        command += ["-f", "-"]
    return subprocess.run(command, input=json.dumps(manifest) if manifest else None, capture_output=True, text=True)


def refused(done: subprocess.CompletedProcess[str], *why: str) -> None:
    """Denied by an admission policy whose message has one of `why` (the API server names the
    first policy that denied, in no fixed order, when several do)."""
    assert done.returncode != 0, f"allowed: {done.stdout}"
    assert "ValidatingAdmissionPolicy" in done.stderr and "denied request" in done.stderr, done.stderr
    assert any(reason in done.stderr for reason in why), done.stderr


USER_NODE_TOLERATION = {"key": USER_NODE_KEY, "operator": "Exists", "effect": "NoSchedule"}
ATTACKS = [
    # The User Node, by every route: what a review did with kubectl, and the routes beside it.
    (
        "user-node-toleration-and-selector",
        job(tolerations=[USER_NODE_TOLERATION], nodeSelector={USER_NODE_KEY: "true"}),
        "toleration",
    ),
    ("node-name", job(nodeName=USER_NODE), "spec.nodeName is refused"),
    ("tolerates-every-taint", job(tolerations=[{"operator": "Exists"}]), "a toleration of every taint"),
    (
        "control-plane-toleration",
        job(tolerations=[{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}]),
        "toleration",
    ),
    # A node its team cordoned, or one short of memory or disk: tolerated by none of a tenant's pods.
    (
        "cordoned-node-toleration",
        job(tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]),
        "a node condition's other than not-ready and unreachable",
    ),
    (
        "memory-pressure-toleration",
        job(tolerations=[{"key": "node.kubernetes.io/memory-pressure", "operator": "Exists"}]),
        "a node condition's other than not-ready and unreachable",
    ),
    (
        "not-ready-without-no-execute",
        job(tolerations=[{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoSchedule"}]),
        "a node condition's other than not-ready and unreachable",
    ),
    ("user-node-selector", job(nodeSelector={USER_NODE_KEY: "true"}), "a nodeSelector on the User Node"),
    ("hostname-selector", job(nodeSelector={"kubernetes.io/hostname": USER_NODE}), "a nodeSelector on the User Node"),
    ("control-plane-selector", job(nodeSelector={"node-role.kubernetes.io/control-plane": ""}), "a nodeSelector"),
    ("hostname-affinity", job(affinity=node_affinity("kubernetes.io/hostname", "In", [USER_NODE])), "a node affinity"),
    ("preferred-user-node-affinity", job(affinity=node_affinity(USER_NODE_KEY, "Exists", preferred=True)), "a node affinity"),
    ("deployment-on-the-user-node", deployment(tolerations=[USER_NODE_TOLERATION]), "toleration"),
    # Preempting other tenants' Jupyter and TensorBoard.
    ("node-critical-priority", job(priorityClassName="system-node-critical"), "only the priority classes"),
    # Intercepting another tenant's logins (CVE-2020-8554), or exposing a port of her own on the node.
    ("external-ips", service(externalIPs=["10.0.0.10"]), "spec.externalIPs is refused"),
    ("node-port", service(type="NodePort"), "only ClusterIP Services"),
    ("load-balancer", service(type="LoadBalancer"), "only ClusterIP Services"),
    # Opening her namespace to everyone: the review's system:authenticated binding, and its cousins.
    (
        "experimenter-role-to-everyone",
        role_binding(
            {"kind": "ClusterRole", "name": "EXPERIMENTER"},
            {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "system:authenticated"},
        ),
        "never a ClusterRole",
    ),
    (
        "own-role-to-another-user",
        role_binding({"kind": "Role", "name": "probe"}, {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "bob"}),
        "service accounts of its own namespace only",
    ),
    (
        "own-role-to-another-namespaces-account",
        role_binding({"kind": "Role", "name": "probe"}, {"kind": "ServiceAccount", "name": "default", "namespace": "tfk8s-bob"}),
        "service accounts of its own namespace only",
    ),
    # Forging the tenant stack's mark on an object of her own.
    (
        "forged-tenant-label",
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "probe", "namespace": ALICE, "labels": {"tfk8s.io/stack-kind": "tenant"}},
        },
        "the tenant stack owns",
    ),
]


def is_experimenters(binding: dict[str, Any]) -> bool:
    """The tenant's binding of the platform's experimenter role (tfk8s.components.guard.experimenter_role),
    not of its preview role, which the session's platform declares too."""
    return binding["roleRef"]["kind"] == "ClusterRole" and binding["roleRef"]["name"].startswith("tfk8s-experimenter-")


def experimenter_role(kube: Kube) -> str:
    (binding,) = [b for b in kube.get("rolebindings", ALICE) if is_experimenters(b)]
    return str(binding["roleRef"]["name"])


@pytest.mark.parametrize(("case", "manifest", "why"), ATTACKS, ids=[c for c, _, _ in ATTACKS])
def test_alice_cannot_reach_beyond_her_namespace_with_her_own_kubectl(
    kube: Kube, alice: Kube, case: str, manifest: dict[str, Any], why: str
) -> None:
    text = json.dumps(manifest).replace("EXPERIMENTER", experimenter_role(kube))
    refused(attempt(alice, "create", manifest=json.loads(text)), why)


def tenant_objects(kube: Kube, kind: str) -> list[dict[str, Any]]:
    return [o for o in kube.get(kind, ALICE) if (o["metadata"].get("labels") or {}).get("tfk8s.io/stack-kind") == "tenant"]


def jupyter(kube: Kube) -> str:
    (found,) = [d["metadata"]["name"] for d in tenant_objects(kube, "deployments") if "jupyter" in d["metadata"]["name"]]
    return found


def test_alice_cannot_change_what_her_tenant_stack_owns(kube: Kube, alice: Kube) -> None:
    """RBAC lets her patch Deployments, RoleBindings and NetworkPolicies and delete claims in her
    namespace; the tenant stack's own (her Jupyter, the experimenters binding, the deny-by-default
    policy, her data volume) are the platform team's."""
    (experimenters,) = [b["metadata"]["name"] for b in tenant_objects(kube, "rolebindings") if is_experimenters(b)]
    everyone = json.dumps([{"op": "add", "path": "/subjects/-", "value": {"kind": "Group", "name": "system:authenticated"}}])
    for args in (
        ("delete", "rolebinding", experimenters, "-n", ALICE),
        ("delete", "networkpolicy", tenant_objects(kube, "networkpolicies")[0]["metadata"]["name"], "-n", ALICE),
        ("delete", "pvc", "tfk8s-data", "-n", ALICE),
        ("delete", "deployment", jupyter(kube), "-n", ALICE),
    ):
        refused(attempt(alice, *args), "the tenant stack owns")
    # Changes another policy refuses too (the binding names a ClusterRole; Jupyter's template
    # tolerates the User Node): either policy's word, whichever the API server names first.
    for args, also in (
        (("patch", "rolebinding", experimenters, "-n", ALICE, "--type", "json", "-p", everyone), "never a ClusterRole"),
        (("patch", "deployment", jupyter(kube), "-n", ALICE, "-p", '{"spec": {"replicas": 5}}'), "toleration"),
        (("label", "deployment", jupyter(kube), "-n", ALICE, "tfk8s.io/stack-kind-"), "toleration"),
    ):
        refused(attempt(alice, *args), "the tenant stack owns", also)
    refused(
        attempt(alice, "scale", "deployment", jupyter(kube), "-n", ALICE, "--replicas", "5"),
        "scaling up through deployments/scale",
    )
    # The platform team still can (the admin may create Tenants).
    done = attempt(kube, "patch", "deployment", jupyter(kube), "-n", ALICE, "-p", '{"spec": {"replicas": 2}}')
    assert done.returncode == 0, done.stderr


def test_every_pod_in_a_tenant_namespace_has_bounded_scratch_whoever_creates_it(kube: Kube) -> None:
    """Binds the admin too: an emptyDir without a sizeLimit is refused, with one it passes."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "probe", "namespace": ALICE},
        "spec": pod_spec(volumes=[{"name": "scratch", "emptyDir": {}}]),
    }
    refused(attempt(kube, "create", manifest=pod), "every emptyDir needs a sizeLimit")
    pod["spec"]["volumes"][0]["emptyDir"] = {"sizeLimit": "1Gi"}
    done = attempt(kube, "create", "-o", "json", manifest=pod)
    assert done.returncode == 0, done.stderr
    # The namespace's LimitRange gave the container its disk limit, which the policy asks for.
    (container,) = json.loads(done.stdout)["spec"]["containers"]
    assert container["resources"]["limits"]["ephemeral-storage"] == "4Gi"


def test_of_kube_systems_accounts_only_kubernetes_own_controllers_are_exempt(kube: Kube) -> None:
    """An add-on's account in kube-system (a CNI's, an operator's), given rights in alice's
    namespace, is bound by the rules like anyone: its Job onto the User Node is refused; the
    controller-manager's job-controller, with the same rights, is not (it acts on what others wrote)."""
    accounts = {"addon": "tfk8s-e2e-addon", "controller": "job-controller"}
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "tfk8s-e2e-kube-system-accounts", "namespace": ALICE},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": "kube-system"} for name in accounts.values()],
    }
    apply = [kube.binary, "--kubeconfig", str(kube.kubeconfig), "apply", "-f", "-"]
    applied = subprocess.run(apply, input=json.dumps(binding), capture_output=True, text=True)
    assert applied.returncode == 0, applied.stderr
    try:
        onto_user_node = job(tolerations=[USER_NODE_TOLERATION], nodeSelector={USER_NODE_KEY: "true"})
        as_addon = f"--as=system:serviceaccount:kube-system:{accounts['addon']}"
        refused(attempt(kube, as_addon, "create", manifest=onto_user_node), "toleration")
        as_controller = f"--as=system:serviceaccount:kube-system:{accounts['controller']}"
        done = attempt(kube, as_controller, "create", manifest=onto_user_node)
        assert done.returncode == 0, done.stderr
    finally:
        kube.run("delete", "rolebinding", "-n", ALICE, binding["metadata"]["name"], "--ignore-not-found")


LEGITIMATE = [
    (
        "training-job-off-the-user-node",
        job(
            tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            affinity=node_affinity(USER_NODE_KEY, "DoesNotExist"),
        ),
    ),
    (
        "default-toleration-seconds",  # what the DefaultTolerationSeconds admission plugin gives every pod
        job(
            tolerations=[
                {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
                for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
            ]
        ),
    ),
    ("cluster-ip-service", service()),
    ("headless-service", service(clusterIP="None")),
    (
        "own-role-to-own-account",
        role_binding({"kind": "Role", "name": "probe"}, {"kind": "ServiceAccount", "name": "default", "namespace": ALICE}),
    ),
]


@pytest.mark.parametrize(("case", "manifest"), LEGITIMATE, ids=[c for c, _ in LEGITIMATE])
def test_what_experiments_need_still_passes(alice: Kube, case: str, manifest: dict[str, Any]) -> None:
    done = attempt(alice, "create", manifest=manifest)
    assert done.returncode == 0, done.stderr


def test_alice_reads_her_pods_their_logs_and_events_but_never_execs(kube: Kube, alice: Kube) -> None:
    pods = json.loads(alice.run("get", "pods", "-n", ALICE, "-o", "json"))["items"]
    assert {p["metadata"]["name"] for p in pods} == {p["metadata"]["name"] for p in kube.get("pods", ALICE)}
    name = pods[0]["metadata"]["name"]
    assert alice.get("pod", ALICE, name)["metadata"]["name"] == name
    alice.run("get", "events", "-n", ALICE)

    can_i = alice.can_i

    assert can_i("get", "pods", "--subresource", "log", "-n", ALICE)
    assert not can_i("create", "pods", "--subresource", "exec", "-n", ALICE)
    assert not can_i("create", "pods", "--subresource", "attach", "-n", ALICE)
    assert not can_i("get", "pods", "--subresource", "log", "-n", "tfk8s-bob")
