"""What the User Node must allow before anything is declared: its taints leave room for tfk8s's
(the platform's check, the words of the patch's own refusal: tfk8s.specs.user_node), and it holds
one more tenant's Jupyter and TensorBoard (the tenant's check)."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from tfk8s.errors import UserNodeTooSmall
from tfk8s.settings.platform import UserNodeSettings
from tfk8s.settings.quantities import parse_quantity
from tfk8s.specs.quota import format_amount
from tfk8s.specs.user_node import patch_taints


def check_taints(settings: UserNodeSettings, node: Mapping[str, Any]) -> None:
    """UserNodeTaken, naming the key and the fix, when the node's taints belong to someone else."""
    patch_taints(settings, node)


def check_room(node: str, status: Any, tenants: int, each: Mapping[str, Decimal], key: str) -> None:
    """UserNodeTooSmall unless the node's allocatable pods, CPU and memory hold `tenants` tenants'
    apps, `each` being one tenant's (`pods`, and `cpu` and `memory` in base units).

    Only that node runs them, and the scheduler leaves a pod it has no room for Pending, so `pulumi
    up` would wait out its timeout: kubelet's default max-pods is 110 (55 tenants with a Jupyter
    and a TensorBoard each), and Jupyter and TensorBoard request the platform's container defaults
    (1 CPU and 2Gi each by default: 16 CPUs hold 7 tenants). What else runs there (daemons that
    tolerate the taint) is not counted: the check refuses only what can never fit. A resource the
    node does not report passes.
    """
    allocatable = (status or {}).get("allocatable") or {}
    short = []
    for resource, per_tenant in each.items():
        reported = allocatable.get(resource)
        if reported is None or tenants * per_tenant <= parse_quantity(str(reported)):
            continue
        needed, has = format_amount(resource, tenants * per_tenant), format_amount(resource, parse_quantity(str(reported)))
        where = f"where node {node!r} allows {has} (status.allocatable.{resource})"
        short.append(f"{needed} {_NAMES[resource]} with this one, {where}")
    if short:
        raise UserNodeTooSmall(
            f"{key}: the tenants' Jupyter and TensorBoard pods all run on the User Node; they need "
            + "; ".join(short)
            + ". Raise that node's kubelet maxPods or give it more CPU and memory, lower the platform stack's "
            "tfk8s:platform.containerDefaults (the apps' size), or put the tenant on another platform stack."
        )


_NAMES = {"pods": "pods", "cpu": "CPUs", "memory": "of memory"}
