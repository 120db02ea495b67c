"""Kubernetes' own node taints and labels, which training pods never tolerate or select: the
platform's `placement` lists may not name them (tfk8s.settings.platform), nor may an experiment's
tolerations and node selectors (tfk8s.checks.context). Pure: no Pulumi.
"""

from __future__ import annotations

# Taints Kubernetes itself puts on nodes: the control plane's, and a node's conditions (cordoned,
# not ready, under pressure, not yet initialized by its cloud).
KUBERNETES_TAINTS = ("node-role.kubernetes.io/", "node.kubernetes.io/", "node.cloudprovider.kubernetes.io/")
# The two a node that stopped answering gets (NoExecute): every pod tolerates them for 300 s unless
# it says otherwise (the DefaultTolerationSeconds admission plugin); an experiment's
# `run.nodeLostSeconds` says otherwise for its training pods.
NODE_LOST_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
# node-role.kubernetes.io/control-plane (and the older /master): the control plane's nodes, as taint and label.
CONTROL_PLANE = "node-role.kubernetes.io/"
# One node by its name: selecting on it picks nodes, not a pool (the User Node among them).
HOSTNAME_LABEL = "kubernetes.io/hostname"


def tolerable_key(key: str) -> str:
    """`key` if a platform may let training pods tolerate taints of it; else ValueError."""
    if key.startswith(KUBERNETES_TAINTS):
        raise ValueError(
            f"{key!r} is a taint Kubernetes puts on the control plane or on a node in trouble (cordoned, not ready, "
            "under pressure): training pods must never tolerate it; list your own pools' taints, e.g. nvidia.com/gpu"
        )
    return key


def selectable_key(key: str) -> str:
    """`key` if a platform may let training pods select nodes on it; else ValueError."""
    if key == HOSTNAME_LABEL:
        raise ValueError(
            f"{key!r} picks single nodes by name (the User Node's among them): list your own pools' labels instead, "
            "e.g. example.com/gpu"
        )
    if key.startswith(CONTROL_PLANE):
        raise ValueError(f"{key!r} selects the control plane: list your own pools' labels instead, e.g. example.com/gpu")
    return key
