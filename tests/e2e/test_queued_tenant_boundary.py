"""What a tenant's own kubectl may not do with a JobSet on a platform that queues, on the real API server.

On a queueing platform an experiment's training cluster is one JobSet (tfk8s.specs.jobset): JobSet's
controller makes its Jobs and the Job controller its pods, identities the platform's other placement
policies exempt or may exempt. So quinn, holding the queued experimenter table in her namespace
(tfk8s.specs.experimenter_rights, `queueing=True`), tries with her own certificate what those policies refuse of
a Job, through a JobSet, and a JobSet beside the queue: the jobset-placement policy
(tfk8s.components.tenant_admission) refuses each with its message, and a well-formed JobSet passes.

Self-contained: JobSet's CRD from the Go module cache (no JobSet controller: admission needs none),
a namespace of its own labelled for a platform group of its own, and that platform's policies for
queueing as `policies` renders them, applied by the admin as the platform stack would declare them.
The session's platform and tenants are not used, and everything made here is deleted afterwards.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from drivers import RESTRICTED, Kube, user_kube
from tfk8s.checks import access
from tfk8s.components import guard
from tfk8s.kube import client as kube_client
from tfk8s.settings.platform import PlacementSettings, UserNodeSettings
from tfk8s.specs import experimenter_rights, tenant_admission
from tfk8s.specs.jobset import QUEUE_NAME_LABEL
from tfk8s.specs.queueing import LOCAL_QUEUE_NAME

import toolenv

NAMESPACE = "tfk8s-quinn"
GROUP = "qguard.layouts.tfk8s.io"  # a platform group of this module's own: its policies select this namespace alone
USERS = "tfk8s-users"
USER_NODE, USER_NODE_KEY = "tfk8s-user-node", "tfk8s.io/user-node"
PREFIX = "qguard"  # of the cluster-scoped objects made here
CRD = "jobsets.jobset.x-k8s.io"


def crd_file() -> Path:
    """JobSet's CRD at the version hack/queueing.sh runs, from the Go module cache: downloaded here
    as hack/queueing.sh does (a JobSet binary built earlier can outlive a cleaned module cache)."""
    version = toolenv.pinned("JOBSET_VERSION")
    # As hack/tools.sh downloads: the checksum database is out of reach here.
    env = {**os.environ, "GOSUMDB": "off", "GOFLAGS": "-mod=mod"}
    subprocess.run(["go", "mod", "download", f"sigs.k8s.io/jobset@{version}"], cwd="/tmp", env=env, check=True)
    modules = subprocess.run(["go", "env", "GOMODCACHE"], check=True, capture_output=True, text=True).stdout.strip()
    found = Path(modules) / f"sigs.k8s.io/jobset@{version}/config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml"
    if not found.is_file():
        pytest.fail(f"{found}: JobSet {version}'s module has no such CRD file")
    return found


def apply(kube: Kube, *objects: dict[str, Any]) -> None:
    """`kubectl apply --server-side` of `objects`, as the admin (the platform stack's way)."""
    document = json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)})
    subprocess.run(
        [kube.binary, "--kubeconfig", str(kube.kubeconfig), "apply", "--server-side", "-f", "-"],
        input=document,
        check=True,
        capture_output=True,
        text=True,
    )


def established(kube: Kube, timeout: float = 60.0) -> None:
    """Until the CRD is Established (`kubectl wait` fails at once while it has no status yet)."""
    deadline = time.monotonic() + timeout
    while not any(
        c["type"] == "Established" and c["status"] == "True"
        for c in (kube.get("crd", name=CRD).get("status") or {}).get("conditions") or []
    ):
        if time.monotonic() > deadline:
            raise AssertionError(f"{CRD} is not Established after {timeout} s")
        time.sleep(0.5)


@pytest.fixture(scope="module")
def jobsets(kube: Kube) -> Iterator[None]:
    """JobSet's CRD, established; deleted afterwards unless it was there before (then left as found)."""
    present = subprocess.run([kube.binary, "--kubeconfig", str(kube.kubeconfig), "get", "crd", CRD], capture_output=True)
    ours = present.returncode != 0
    if ours:
        kube.run("apply", "--server-side", "-f", str(crd_file()))
    try:
        established(kube)
        yield
    finally:
        if ours:
            kube.run("delete", "crd", CRD, "--ignore-not-found", "--wait=false")


def policy_objects() -> list[dict[str, Any]]:
    """The platform's policies for its tenants' namespaces, with queueing, each bound with Deny."""
    specs = tenant_admission.policies(
        GROUP,
        guard.tenant_kind(GROUP),
        UserNodeSettings(name=USER_NODE, taint_key=USER_NODE_KEY),
        PlacementSettings(toleration_keys=["nvidia.com/gpu"]),
        queueing=True,
    )
    found = []
    for short, spec in specs.items():
        name = f"{PREFIX}-{short}"
        found.append(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicy",
                "metadata": {"name": name},
                "spec": spec,
            }
        )
        found.append(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicyBinding",
                "metadata": {"name": name},
                "spec": {"policyName": name, "validationActions": ["Deny"]},
            }
        )
    return found


@pytest.fixture(scope="module")
def quinn(kube: Kube, jobsets: None) -> Iterator[Kube]:
    """quinn, with the queued experimenter table in her tenant namespace, under the queueing platform's policies."""
    layouts = guard.layout_kind(GROUP)
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "experimenter", "namespace": NAMESPACE},
        "rules": experimenter_rights.rules_for_role(experimenter_rights.experimenter_rules(layouts, queueing=True)),
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "experimenters", "namespace": NAMESPACE},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "experimenter"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "quinn"}],
    }
    namespace = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": NAMESPACE, "labels": tenant_admission.namespace_labels(GROUP)},
    }
    policies = policy_objects()
    try:
        apply(kube, namespace, role, binding)
        user = user_kube(kube, "quinn", [USERS])
        # The hole: without the policy, RBAC and the API server let her JobSet tolerate the User Node.
        hole = attempt(user, "create", manifest=jobset(tolerations=[USER_NODE_TOLERATION]))
        assert hole.returncode == 0, hole.stderr
        apply(kube, *policies)
        wait_until_enforced(user)
        yield user
    finally:
        for obj in policies:
            kube.run("delete", obj["kind"].lower(), obj["metadata"]["name"], "--ignore-not-found")
        kube.run("delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait=false")


def pod_spec(**extra: Any) -> dict[str, Any]:
    return {
        "restartPolicy": "Never",
        "containers": [{"name": "task", "image": "busybox", "command": ["true"], "securityContext": RESTRICTED}],
        **extra,
    }


def jobset(*, name: str = "probe", queue: str | None = LOCAL_QUEUE_NAME, **extra: Any) -> dict[str, Any]:
    """A JobSet of a PS and a worker replicated Job, as tfk8s's are; `extra` in the worker's pod spec alone."""

    def replicated(role: str, spec: dict[str, Any]) -> dict[str, Any]:
        job = {"completionMode": "Indexed", "completions": 1, "parallelism": 1, "template": {"spec": spec}}
        return {"name": role, "replicas": 1, "template": {"spec": job}}

    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {QUEUE_NAME_LABEL: queue} if queue else {}},
        "spec": {
            "replicatedJobs": [replicated("ps", pod_spec()), replicated("worker", pod_spec(**extra))],
            "successPolicy": {"operator": "All", "targetReplicatedJobs": ["worker"]},
        },
    }


def attempt(
    user: Kube, *args: str, manifest: dict[str, Any] | None = None, dry_run: bool = True
) -> subprocess.CompletedProcess[str]:
    """`kubectl` as `user`; by default a server-side dry run: admission runs in full, nothing is stored."""
    command = [user.binary, "--kubeconfig", str(user.kubeconfig), *args, *(["--dry-run=server"] if dry_run else [])]
    if manifest is not None:
        command += ["-f", "-"]
    return subprocess.run(command, input=json.dumps(manifest) if manifest else None, capture_output=True, text=True)


def refused(done: subprocess.CompletedProcess[str], *why: str) -> None:
    """Denied by a ValidatingAdmissionPolicy whose message has one of `why`."""
    assert done.returncode != 0, f"allowed: {done.stdout}"
    assert "ValidatingAdmissionPolicy" in done.stderr and "denied request" in done.stderr, done.stderr
    assert any(reason in done.stderr for reason in why), done.stderr


USER_NODE_TOLERATION = {"key": USER_NODE_KEY, "operator": "Exists", "effect": "NoSchedule"}


def wait_until_enforced(user: Kube, timeout: float = 60.0) -> None:
    """New policies and bindings reach admission after the API server's next resync: until then
    everything passes. Waits until the attack of the module's first test is refused."""
    deadline = time.monotonic() + timeout
    while True:
        done = attempt(user, "create", manifest=jobset(tolerations=[USER_NODE_TOLERATION]))
        if done.returncode != 0 and "ValidatingAdmissionPolicy" in done.stderr:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"the jobset-placement policy is not enforced after {timeout} s: {done.stdout}{done.stderr}")
        time.sleep(1)


def node_affinity(key: str, operator: str, values: list[str] | None = None) -> dict[str, Any]:
    term = {"matchExpressions": [{"key": key, "operator": operator, **({"values": values} if values else {})}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


WHERE = "spec.replicatedJobs[*].template.spec.template.spec"
ATTACKS = [
    # Every route to the User Node the pod policies close, in a replicated Job's pod template (the
    # worker's, the second: every replicated Job is checked, not the first).
    (
        "user-node-toleration",
        jobset(tolerations=[USER_NODE_TOLERATION]),
        f"{WHERE}: a toleration of every taint, of the User Node's",
    ),
    ("tolerates-every-taint", jobset(tolerations=[{"operator": "Exists"}]), f"{WHERE}: a toleration of every taint"),
    ("node-name", jobset(nodeName=USER_NODE), f"{WHERE}: spec.nodeName is refused"),
    ("user-node-selector", jobset(nodeSelector={USER_NODE_KEY: "true"}), f"{WHERE}: a nodeSelector on the User Node"),
    (
        "hostname-selector",
        jobset(nodeSelector={"kubernetes.io/hostname": USER_NODE}),
        f"{WHERE}: a nodeSelector on the User Node",
    ),
    (
        "hostname-affinity",
        jobset(affinity=node_affinity("kubernetes.io/hostname", "In", [USER_NODE])),
        f"{WHERE}: a node affinity",
    ),
    ("node-critical-priority", jobset(priorityClassName="system-node-critical"), f"{WHERE}: only the priority classes"),
    # Beside the queue: Kueue would leave it alone, and JobSet's controller start it at once.
    ("no-queue-label", jobset(queue=None), f"it needs the label {QUEUE_NAME_LABEL}: {LOCAL_QUEUE_NAME}"),
    ("another-queue", jobset(queue="elsewhere"), f"it needs the label {QUEUE_NAME_LABEL}: {LOCAL_QUEUE_NAME}"),
]


@pytest.mark.parametrize(("case", "manifest", "why"), ATTACKS, ids=[c for c, _, _ in ATTACKS])
def test_quinn_cannot_place_a_jobset_beside_the_rules_or_the_queue(
    quinn: Kube, case: str, manifest: dict[str, Any], why: str
) -> None:
    refused(attempt(quinn, "create", manifest=manifest), why)


def test_a_well_formed_jobset_passes_and_keeps_to_the_rules_once_created(kube: Kube, quinn: Kube) -> None:
    """What tfk8s's own JobSets ask (an allowed toleration, off the User Node by DoesNotExist, in the
    queue) passes; once created, an update may not add what a create may not have, nor leave the queue."""
    legitimate = jobset(
        name="legit",
        tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        affinity=node_affinity(USER_NODE_KEY, "DoesNotExist"),
    )
    done = attempt(quinn, "create", manifest=legitimate)
    assert done.returncode == 0, done.stderr
    done = attempt(quinn, "create", manifest=legitimate, dry_run=False)
    assert done.returncode == 0, done.stderr
    try:
        worker = "/spec/replicatedJobs/1/template/spec/template/spec"
        onto_user_node = json.dumps([{"op": "add", "path": f"{worker}/tolerations/-", "value": USER_NODE_TOLERATION}])
        refused(
            attempt(quinn, "patch", "jobset", "legit", "-n", NAMESPACE, "--type", "json", "-p", onto_user_node),
            f"{WHERE}: a toleration of every taint, of the User Node's",
        )
        refused(
            attempt(quinn, "label", "jobset", "legit", "-n", NAMESPACE, f"{QUEUE_NAME_LABEL}-"),
            f"it needs the label {QUEUE_NAME_LABEL}: {LOCAL_QUEUE_NAME}",
        )
        # The platform team is exempt, as from every placement policy.
        done = attempt(kube, "label", "jobset", "legit", "-n", NAMESPACE, f"{QUEUE_NAME_LABEL}-")
        assert done.returncode == 0, done.stderr
    finally:
        kube.run("delete", "jobset", "legit", "-n", NAMESPACE, "--ignore-not-found")


KUEUE = "system:serviceaccount:kueue-system:kueue-controller-manager"  # platform.queueing.controller's default


def test_only_kueue_resumes_a_suspended_jobset(kube: Kube, quinn: Kube) -> None:
    """Suspended as Kueue's webhook leaves a queued JobSet: quinn's own resume would start her run
    beside the queue and is refused; Kueue's account, with the same rights, resumes it."""
    held = {**jobset(name="held"), "spec": {**jobset()["spec"], "suspend": True}}
    done = attempt(quinn, "create", manifest=held, dry_run=False)
    assert done.returncode == 0, done.stderr
    rights = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "e2e-kueue", "namespace": NAMESPACE},
        "rules": [{"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": ["get", "patch", "update"]}],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "e2e-kueue", "namespace": NAMESPACE},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "e2e-kueue"},
        "subjects": [{"kind": "ServiceAccount", "name": KUEUE.rsplit(":", 1)[1], "namespace": "kueue-system"}],
    }
    apply(kube, rights, binding)
    try:
        resume = ["patch", "jobset", "held", "-n", NAMESPACE, "--type", "merge", "-p", '{"spec": {"suspend": false}}']
        refused(attempt(quinn, *resume), "spec.suspend: only Kueue resumes a suspended JobSet")
        done = attempt(kube, f"--as={KUEUE}", *resume, dry_run=False)
        assert done.returncode == 0, done.stderr
        # Suspending stays hers (Kueue's preemption does it too): nothing runs beside the queue that way.
        done = attempt(quinn, "patch", "jobset", "held", "-n", NAMESPACE, "--type", "merge", "-p", '{"spec": {"suspend": true}}')
        assert done.returncode == 0, done.stderr
    finally:
        kube.run("delete", "jobset", "held", "-n", NAMESPACE, "--ignore-not-found")
        kube.run("delete", "rolebinding,role", "e2e-kueue", "-n", NAMESPACE, "--ignore-not-found")


def test_quinns_only_workload_is_a_jobset(quinn: Kube) -> None:
    """The queued experimenter table: JobSets applied; Jobs and Deployments (the clusters of before the
    platform queued) read and deleted, never created or changed; no pods of her own, nor roles to bind."""

    def can_i(*question: str) -> bool:
        return quinn.can_i(*question, "-n", NAMESPACE)

    for verb in ("create", "patch", "get", "list", "watch", "delete"):
        assert can_i(verb, "jobsets.jobset.x-k8s.io"), verb
    for kind in (
        "jobs.batch",
        "deployments.apps",
        "serviceaccounts",
        "roles.rbac.authorization.k8s.io",
        "rolebindings.rbac.authorization.k8s.io",
    ):
        assert can_i("delete", kind) and can_i("get", kind), kind
        assert not can_i("create", kind) and not can_i("patch", kind), kind
    assert not can_i("create", "pods")
    assert not can_i("patch", "deployments.apps", "--subresource", "scale")
    assert not can_i("bind", "roles.rbac.authorization.k8s.io")
    assert not can_i("list", "replicasets.apps") and not can_i("list", "endpoints")
    refused_job = attempt(quinn, "create", "job", "probe", "--image", "busybox", "-n", NAMESPACE)
    assert refused_job.returncode != 0 and 'cannot create resource "jobs"' in refused_job.stderr, refused_job.stderr
    # What the program's preflight asks on a queueing platform is what this grant gives, through its own client.
    server, user, cluster = kube_client.current_entries([yaml.safe_load(quinn.kubeconfig.read_text())])
    assert server
    api = kube_client.KubeApi(server, cluster, user)
    table = experimenter_rights.experimenter_rules(guard.layout_kind(GROUP), queueing=True)
    assert access.missing(api.post, NAMESPACE, table) == []
    assert access.missing(api.post, NAMESPACE, experimenter_rights.experimenter_rules(guard.layout_kind(GROUP))) != []
