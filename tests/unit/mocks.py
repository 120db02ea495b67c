"""A recording Pulumi mock that answers with the status fields readiness reads."""

from __future__ import annotations

import copy
import zlib
from collections.abc import Callable
from typing import Any

import pulumi

StatusHook = Callable[[str, str, dict[str, Any]], dict[str, Any] | None]
LiveHook = Callable[[str, str], dict[str, Any]]  # (type, object id) -> the existing object's state


def healthy_status(typ: str, name: str, state: dict[str, Any]) -> dict[str, Any] | None:
    """What a healthy cluster reports right after `pulumi up` (camelCase, as the provider does)."""
    spec = state.get("spec") or {}
    if typ == "kubernetes:apps/v1:Deployment":
        replicas = int(spec.get("replicas", 1))
        return {"replicas": replicas, "readyReplicas": replicas, "availableReplicas": replicas}
    if typ == "kubernetes:batch/v1:Job":
        n = int(spec.get("completions", 1))
        return {"active": n, "ready": n, "succeeded": 0, "failed": 0}
    if typ == "kubernetes:core/v1:PersistentVolumeClaim":
        return {"phase": "Bound"}
    if typ == "kubernetes:core/v1:NodePatch":
        return {"addresses": [{"type": "InternalIP", "address": "10.0.0.10"}]}
    return None


def plain_nodes(typ: str, object_id: str) -> dict[str, Any]:
    """Existing objects the program reads: nodes as kwok/kubelet register them, without taints."""
    metadata: dict[str, Any] = {"name": object_id}
    if typ == "kubernetes:core/v1:Node":
        metadata["managedFields"] = [{"manager": "kubectl-client-side-apply", "fieldsV1": {"f:metadata": {"f:labels": {}}}}]
        return {"metadata": metadata, "spec": {}, "status": {"allocatable": {"pods": "110"}}}  # kubelet's default max-pods
    return {"metadata": metadata, "spec": {}}


def through_the_engine(value: Any) -> Any:
    """`value` as the real engine hands it to the program (a resource's state, a stack's outputs):
    every number a JSON float (a NodePort 31406 comes back as 31406.0, 2222 as 2222.0); the mock
    monitor would keep Python's ints."""
    if isinstance(value, dict):
        return {k: through_the_engine(v) for k, v in value.items()}
    if isinstance(value, list):
        return [through_the_engine(v) for v in value]
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


NODE_PORTS = range(30000, 32768)  # the API server's default --service-node-port-range


class RecordingMocks(pulumi.runtime.Mocks):
    """Records every resource; `status_hook` decides the live status each one reports."""

    def __init__(self, status_hook: StatusHook = healthy_status, live_hook: LiveHook = plain_nodes) -> None:
        self.resources: list[pulumi.runtime.MockResourceArgs] = []
        self.reads: list[pulumi.runtime.MockResourceArgs] = []  # Resource.get of existing objects
        self.status_hook = status_hook
        self.live_hook = live_hook
        self._node_ports: set[int] = set()

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        if args.resource_id:  # a read of something that exists, not a resource the program creates
            self.reads.append(args)
            return args.resource_id, self.live_hook(args.typ, args.resource_id)
        self.resources.append(args)
        state = copy.deepcopy(dict(args.inputs))
        metadata = state.setdefault("metadata", {})
        metadata.setdefault("name", f"{args.name}-auto")  # Pulumi auto-naming adds a suffix
        metadata.setdefault("uid", f"{args.name}-uid")  # the API server's, unique per object
        if args.typ == "kubernetes:core/v1:Service" and state.get("spec", {}).get("type") == "NodePort":
            for port in state["spec"]["ports"]:
                port.setdefault("nodePort", self._node_port(f"{args.name}/{port.get('name') or port.get('port')}"))
        status = self.status_hook(args.typ, args.name, state)
        if status is not None:
            state["status"] = status
        return f"{args.name}-id", through_the_engine(state)

    def _node_port(self, key: str) -> int:
        """A NodePort chosen from the Service and port, as the API server would pick a free one: not
        in the order registrations reach the mocks, which the runtime does not fix (under load the
        TensorBoard's Service came first, and the tenant's published URLs changed between runs)."""
        first = NODE_PORTS.start + zlib.crc32(key.encode()) % len(NODE_PORTS)
        port = next(p for p in (*range(first, NODE_PORTS.stop), *range(NODE_PORTS.start, first)) if p not in self._node_ports)
        self._node_ports.add(port)
        return port

    def call(self, args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:
        return {}

    def of_type(self, typ: str) -> list[pulumi.runtime.MockResourceArgs]:
        return [r for r in self.resources if r.typ == typ]

    def named(self, typ: str, name: str) -> pulumi.runtime.MockResourceArgs:
        found = [r for r in self.of_type(typ) if r.name == name]
        assert len(found) == 1, f"expected one {typ} named {name}, found {[r.name for r in self.of_type(typ)]}"
        return found[0]
