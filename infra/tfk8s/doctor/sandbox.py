"""The doctor's throwaway namespace: its probe pods, made to pass the `restricted` Pod Security level
as every tfk8s pod is, watched until they finish, and everything deleted afterwards whatever happens
(an exception, a time limit, Ctrl-C): the namespace and what it holds, and the cluster-scoped
objects a probe made (a StorageClass, a retained PersistentVolume).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from tfk8s.doctor import reads
from tfk8s.doctor.target import Placement
from tfk8s.kube.api_error import KubeApiError
from tfk8s.kube.api_paths import NAMESPACE, POD, ApiKind
from tfk8s.settings.platform import PodIdentity
from tfk8s.specs import pod_security

MANAGED_BY = {"app.kubernetes.io/managed-by": "tfk8s-doctor"}
# What a pod's waiting container says when it will not start by itself: the image cannot be pulled or
# run as asked. Reported at once rather than waited out.
STUCK = {
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "ErrImageNeverPull",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
}
POLL_SECONDS = 0.5


class Api(reads.Api, Protocol):
    """What the reads use, and the DELETE of what the sandbox made."""

    def delete(self, path: str) -> dict[str, Any] | None: ...


@dataclass(frozen=True)
class PodOutcome:
    """How a probe pod ended, or why it is not known."""

    finished: bool
    ready: bool = False
    exit_code: int | None = None
    node: str | None = None
    ip: str | None = None
    why: str = ""
    """Why it did not finish: stuck (the waiting reason and message), unschedulable, or out of time."""
    stuck: bool = False

    @property
    def fix(self) -> str | None:
        """The fix for a pod stuck before it ran (its image not pulled or not runnable); None otherwise."""
        if self.stuck:
            return (
                "make the image pullable from the nodes (a registry they reach, an imagePullSecret) "
                "and runnable as a non-root user"
            )
        return None


def python_command(script: str, *args: str) -> list[str]:
    """A probe pod's command: Python runs `script` (every tfk8s image has Python)."""
    return ["python3", "-c", script, *args]


class Sandbox:
    def __init__(
        self,
        api: Api,
        placement: Placement,
        version: tuple[int, int],
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.api, self.placement, self.version = api, placement, version
        self.clock, self.sleep = clock, sleep
        self.namespace = f"tfk8s-doctor-{secrets.token_hex(3)}"
        self.cluster_objects: list[str] = []  # paths of cluster-scoped objects to delete, in order

    def __enter__(self) -> Sandbox:
        labels = {**MANAGED_BY, **pod_security.namespace_labels(self.version)}
        self.api.post(
            f"{NAMESPACE.root}/{NAMESPACE.plural}",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace, "labels": labels}},
        )
        return self

    def __exit__(self, *exc: object) -> None:
        self.clean_up()

    def clean_up(self) -> None:
        """Delete the namespace, then what was cluster-scoped; a failed deletion does not stop the others."""
        for path in [NAMESPACE.path(self.namespace), *self.cluster_objects]:
            try:
                self.api.delete(path)
            except (KubeApiError, OSError):
                pass

    def create(self, kind: ApiKind, body: dict[str, Any]) -> dict[str, Any]:
        """Create a namespaced object of `kind` in the sandbox, or a cluster-scoped one remembered for deletion."""
        if kind.namespaced:
            return self.api.post(f"{kind.root}/namespaces/{self.namespace}/{kind.plural}", body)
        created = self.api.post(f"{kind.root}/{kind.plural}", body)
        self.cluster_objects.append(kind.path(created["metadata"]["name"]))
        return created

    def pod_body(
        self,
        name: str,
        image: str,
        command: Sequence[str],
        identity: PodIdentity,
        *,
        labels: Mapping[str, str] | None = None,
        node: str | None = None,
        volumes: Sequence[tuple[str, str]] = (),
        ports: Sequence[int] = (),
    ) -> dict[str, Any]:
        """A probe pod of the `restricted` level: `volumes` are (claim, mount path); `node` pins it."""
        selector = dict(self.placement.node_selector)
        if node:
            selector["kubernetes.io/hostname"] = node
        container: dict[str, Any] = {
            "name": "probe",
            "image": image,
            "command": list(command),
            "securityContext": pod_security.container_security_context(read_only_root=False),
            "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"cpu": "500m", "memory": "512Mi"}},
            "env": [{"name": "PYTHONDONTWRITEBYTECODE", "value": "1"}],
            "volumeMounts": [{"name": f"v{i}", "mountPath": path} for i, (_, path) in enumerate(volumes)],
        }
        if ports:
            container["ports"] = [{"containerPort": p} for p in ports]
            container["readinessProbe"] = {"tcpSocket": {"port": ports[0]}, "periodSeconds": 1}
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": {**MANAGED_BY, **(labels or {})}},
            "spec": {
                "restartPolicy": "Never",
                "automountServiceAccountToken": False,
                "enableServiceLinks": False,
                "terminationGracePeriodSeconds": 1,
                "securityContext": pod_security.pod_security_context(identity),
                "nodeSelector": selector,
                "tolerations": [{"key": key, "operator": "Exists"} for key in self.placement.tolerations],
                "containers": [container],
                "volumes": [
                    {"name": f"v{i}", "persistentVolumeClaim": {"claimName": claim}} for i, (claim, _) in enumerate(volumes)
                ],
            },
        }

    def run_pod(self, body: dict[str, Any], timeout: float, *, until_ready: bool = False) -> PodOutcome:
        """Create the pod and wait until it finished (or is Ready, `until_ready`), is stuck, or `timeout` passed."""
        self.create(POD, body)
        return self.wait_pod(body["metadata"]["name"], timeout, until_ready=until_ready)

    def run_pods(self, bodies: Sequence[dict[str, Any]], timeout: float) -> list[PodOutcome]:
        """Create every pod, then wait for each: they run at once, and `timeout` bounds them all."""
        for body in bodies:
            self.create(POD, body)
        deadline = self.clock() + timeout
        return [self.wait_pod(body["metadata"]["name"], max(deadline - self.clock(), 0)) for body in bodies]

    def wait_pod(self, name: str, timeout: float, *, until_ready: bool = False) -> PodOutcome:
        deadline = self.clock() + timeout
        path = POD.path(name, self.namespace)
        pod: Mapping[str, Any] = {}
        while True:
            try:
                pod = self.api.get(path) or {}
            except OSError:  # a read that timed out on a loaded API server: the next poll may answer
                if self.clock() >= deadline:
                    raise
                self.sleep(POLL_SECONDS)
                continue
            outcome = _outcome(pod, until_ready)
            if outcome is not None:
                return outcome
            if self.clock() >= deadline:
                return _timed_out(pod, timeout)
            self.sleep(POLL_SECONDS)


def _outcome(pod: Mapping[str, Any], until_ready: bool) -> PodOutcome | None:
    """What the pod's status already settles: finished, Ready (when asked) or stuck; None: not yet.
    Unschedulable is not final: the scheduler says it of a pod whose claim is still binding."""
    status = pod.get("status") or {}
    node, ip = (pod.get("spec") or {}).get("nodeName"), status.get("podIP")
    for state in [c.get("state") or {} for c in status.get("containerStatuses") or []]:
        if "terminated" in state:
            return PodOutcome(True, exit_code=state["terminated"].get("exitCode"), node=node, ip=ip)
        waiting = state.get("waiting") or {}
        if waiting.get("reason") in STUCK:
            why = f"{waiting['reason']}: {waiting.get('message', '')}".rstrip(": ")
            return PodOutcome(False, node=node, ip=ip, why=why, stuck=True)
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    if until_ready and ready:
        return PodOutcome(False, ready=True, node=node, ip=ip)
    return None


def _timed_out(pod: Mapping[str, Any], timeout: float) -> PodOutcome:
    status = pod.get("status") or {}
    node = (pod.get("spec") or {}).get("nodeName")
    scheduled: Mapping[str, Any] = next((c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), {})
    if node:
        where = f"on node {node!r}, phase {status.get('phase', '?')}"
    else:
        where = f"not scheduled: {scheduled.get('message') or 'no node took it'}"
    return PodOutcome(False, node=node, ip=status.get("podIP"), why=f"not finished after {timeout:g} s ({where})")
