"""A user's namespace quota and container defaults: the ResourceQuota and LimitRange specs (pure).

The platform gives each user's namespace one ResourceQuota (`QUOTA_NAME`), from the user's quota
settings over the platform's defaults (schema_platform.Quota), and one LimitRange
(`LIMIT_RANGE_NAME`) that sizes containers that set no resources. The API server then refuses a
pod or claim beyond the quota; an experiment checks before it declares anything whether it fits
(tfk8s.checks.quota), so the refusal comes at preview, with the numbers, instead of pods that
stay Pending without a word.

Each quota setting maps to the ResourceQuota keys it fills. CPU and memory bound both requests
and limits: tfk8s's pods set requests = limits, and bounding limits too keeps a hand-made pod
from bursting past the namespace's share. GPUs are an extended resource, which a quota can only
bound as `requests.` (Kubernetes never overcommits them anyway).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from tfk8s.settings.platform import ContainerDefaults, Quota
from tfk8s.settings.quantities import parse_quantity

QUOTA_NAME = "tfk8s-quota"
LIMIT_RANGE_NAME = "tfk8s-container-defaults"
GPU_RESOURCE = "nvidia.com/gpu"

# Quota setting (its key in the stack file) -> the ResourceQuota `hard` keys it sets.
HARD_KEYS: dict[str, tuple[str, ...]] = {
    "cpu": ("requests.cpu", "limits.cpu"),
    "memory": ("requests.memory", "limits.memory"),
    "gpus": (f"requests.{GPU_RESOURCE}",),
    "storage": ("requests.storage",),
    "pods": ("pods",),
    "services": ("services",),
    "persistentVolumeClaims": ("persistentvolumeclaims",),
    # Object counts (`count/<resource>.<group>`). Not the platform's Layout kind: the quota
    # controller learns a new CRD's resource only at its next discovery sync (up to 30 s, then up to
    # a resync period before the quota is recomputed), and until then admission refuses every
    # Layout with "status unknown for quota"; a tenant created right after its platform (make up)
    # would have no experiment for minutes.
    "configMaps": ("count/configmaps",),
    "secrets": ("count/secrets",),
    "serviceAccounts": ("count/serviceaccounts",),
    "roles": ("count/roles.rbac.authorization.k8s.io",),
    "roleBindings": ("count/rolebindings.rbac.authorization.k8s.io",),
    "networkPolicies": ("count/networkpolicies.networking.k8s.io",),
    "jobs": ("count/jobs.batch",),
    "deployments": ("count/deployments.apps",),
}
# Settings measured in bytes: shown with binary suffixes.
BYTE_SETTINGS = frozenset({"memory", "storage"})
# TensorBoard's token gate (tfk8s.components.user_env), a small Python proxy beside it: sized on its own.
TOKEN_GATE_CPU, TOKEN_GATE_MEMORY = "100m", "128Mi"
# What a tenant holds beyond experiments: Jupyter and TensorBoard (a pod each, on the User Node),
# their Services and the notebook's (jupyter-tf).
TENANT_APP_PODS, TENANT_SERVICES = 2, 3
# What the tenant's own objects count in its quota, at most (tfk8s.components.user_env,
# tfk8s.stack_kinds.tenant; tests/unit/test_quota.py counts what a tenant declares). The quota exists
# before them, so the API server would refuse the one beyond it halfway through the tenant's `up`:
# `own_shortfalls` refuses the quota before anything is declared instead. Kubernetes adds one
# ConfigMap (kube-root-ca.crt) and one ServiceAccount (default) to every namespace.
TENANT_OWN_COUNTS: dict[str, tuple[int, str]] = {
    "pods": (TENANT_APP_PODS, "Jupyter's and TensorBoard's pods"),
    "services": (TENANT_SERVICES, "Jupyter's, TensorBoard's and jupyter-tf"),
    "deployments": (2, "Jupyter's and TensorBoard's"),
    "configMaps": (6, "the trainer package, the notebooks, Jupyter's settings, the contract, the tenant guard, kube-root-ca.crt"),
    "secrets": (1, "the Jupyter token"),
    "serviceAccounts": (2, "Jupyter's and the namespace's default"),
    "roles": (2, "Jupyter's Layout reader and the token reader"),
    "roleBindings": (3, "Jupyter's Layout reader, the token reader and the experimenters"),
    "networkPolicies": (5, "the namespace's default deny, DNS, Jupyter, TensorBoard and PS API policies"),
}


def hard(quota: Quota) -> dict[str, str]:
    """The ResourceQuota's `spec.hard` for `quota`."""
    values = quota.model_dump(by_alias=True)
    return {key: str(values[setting]) for setting, keys in HARD_KEYS.items() for key in keys}


def resource_quota_spec(quota: Quota) -> dict[str, Any]:
    return {"hard": hard(quota)}


def limit_range_spec(defaults: ContainerDefaults) -> dict[str, Any]:
    """Requests = limits for containers that set neither, like tfk8s's own containers: a
    Guaranteed share, and a quota that counts what the pod may really use."""
    amounts = {"cpu": defaults.cpu, "memory": defaults.memory}
    # Node-local disk: a limit for every container, and none above it; requested as 0, since the
    # scheduler would otherwise need every node to report its disk (simulated ones do not).
    disk = {"ephemeral-storage": defaults.ephemeral_storage}
    return {
        "limits": [
            {
                "type": "Container",
                "default": {**amounts, **disk},
                "defaultRequest": {**amounts, "ephemeral-storage": "0"},
                "max": disk,
            }
        ]
    }


_BINARY = (("Ti", Decimal(2**40)), ("Gi", Decimal(2**30)), ("Mi", Decimal(2**20)), ("Ki", Decimal(2**10)))


def _plain(value: Decimal) -> str:
    return format(value.normalize(), "f")  # 5E+2 -> "500", 0.50 -> "0.5"


def format_amount(setting: str, value: Decimal) -> str:
    """An amount of a quota setting as users write it: cores "0.5", counts "12", bytes "2.5Gi"."""
    if setting in BYTE_SETTINGS:
        for suffix, unit in _BINARY:
            scaled = value / unit
            if abs(value) >= unit and scaled == scaled.quantize(Decimal("0.01")):
                return f"{_plain(scaled)}{suffix}"
    return _plain(value)


def amount(text: Any) -> Decimal:
    """A quantity as the API reports it ("500m", "2Gi", "16") in base units; absent is zero."""
    return parse_quantity(str(text)) if text not in (None, "") else Decimal(0)


@dataclass(frozen=True, kw_only=True)
class Shortfall:
    """A quota setting too small for the tenant's own objects."""

    setting: str  # the quota's key in the stack file: "cpu", "memory", "pods", "configMaps", ...
    need: str
    have: str
    what: str  # what takes `need`, for the message


def apps_requests(defaults: ContainerDefaults, *, gated: bool) -> dict[str, Decimal]:
    """What the tenant's own apps take of its quota's `cpu` and `memory`: one container of
    `defaults` each for Jupyter and TensorBoard (tfk8s.components.user_env sizes them so), and the
    token gate beside TensorBoard when `gated`."""
    gate = {"cpu": TOKEN_GATE_CPU, "memory": TOKEN_GATE_MEMORY}
    return {
        setting: 2 * amount(getattr(defaults, setting)) + (amount(gate[setting]) if gated else 0) for setting in ("cpu", "memory")
    }


def own_shortfalls(limits: Quota, defaults: ContainerDefaults, *, gated: bool) -> list[Shortfall]:
    """What the tenant's own objects take that `limits` cannot hold, before any experiment: its
    apps' CPU and memory (`apps_requests`) and its objects of each kind the quota counts
    (`TENANT_OWN_COUNTS`)."""
    gate = {"cpu": TOKEN_GATE_CPU, "memory": TOKEN_GATE_MEMORY}
    found = []
    needs = apps_requests(defaults, gated=gated)
    for setting in ("cpu", "memory"):
        each = amount(getattr(defaults, setting))
        need = needs[setting]
        what = f"Jupyter {format_amount(setting, each)} + TensorBoard {format_amount(setting, each)}"
        what += f" + its token gate {gate[setting]}" if gated else ""
        if need > amount(getattr(limits, setting)):
            found.append(
                Shortfall(
                    setting=setting,
                    need=format_amount(setting, need),
                    have=getattr(limits, setting),
                    what=f"{what}, at containerDefaults.{setting}",
                )
            )
    settings = limits.model_dump(by_alias=True)
    for setting, (need_count, what) in TENANT_OWN_COUNTS.items():
        if need_count > settings[setting]:
            found.append(Shortfall(setting=setting, need=str(need_count), have=str(settings[setting]), what=what))
    return found
