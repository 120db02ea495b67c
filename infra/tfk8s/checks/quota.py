"""Does an experiment fit in its user's quota? The arithmetic, before anything is declared (pure).

What an experiment asks of its namespace is a function of its settings: per training cluster,
each role's task count x the role's resources (tfk8s.specs.roles: PS, workers, and the chief Job of an
in-graph cluster driven by a chief, with a worker's CPU and memory but no GPU), one pod per task,
one Service per PS and one headless Service per Job, and one claim of `scratch.size` per cluster
with a scratch volume. tfk8s's pods set requests = limits, so one number serves both.

The room it has is the live ResourceQuota's `hard - used`, plus what this experiment itself uses
now: an update replaces its own pods, Services and claims, so they must not count against it. Its
own use is summed from its live objects, listed by the experiment's label. (A rerun briefly runs
the old pods next to the new ones; the quota's defaults leave room for that.)

On a platform that queues (`queued`), an experiment waits for what the tenant's other experiments
use of CPU, memory and GPUs: Kueue admits it when they are free, never past the quota less what
the tenant's own apps hold (tfk8s.specs.queueing borrows up to that). So those are refused only
past it; what is created at once, queued or not (a Service per task, scratch claims), and the
number of pods, which no queue counts, still need room now.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from tfk8s.kube.api_paths import PERSISTENT_VOLUME_CLAIM, POD, RESOURCE_QUOTA, SERVICE
from tfk8s.settings import NAMESPACE
from tfk8s.settings.experiment import ClusterSettings
from tfk8s.specs import quota
from tfk8s.specs.cluster_spec import has_chief_job
from tfk8s.specs.labels import CLUSTER, EXPERIMENT
from tfk8s.specs.roles import CHIEF_ROLE, PS_ROLE, WORKER_ROLE, Role

Reader = Callable[[str], Mapping[str, Any] | None]


@dataclass(frozen=True, kw_only=True)
class Part:
    """One line of what an experiment asks: `count` x `each` of a setting, from one place in its stack file."""

    cluster_index: int
    cluster: str
    noun: str  # "workers", "PS", "chief", "PS Services", "scratch claim"
    count: int
    each: Decimal
    key: str  # the cluster's key a refusal names: "workers.count" ("" for the cluster itself)
    lower: str  # what the user can lower: "workers.count or workers.cpu"

    @property
    def total(self) -> Decimal:
        return self.count * self.each

    @property
    def path(self) -> str:
        return f"{NAMESPACE}:clusters[{self.cluster_index}]" + (f".{self.key}" if self.key else "")


# Quota setting -> its parts, in the order of the stack file.
Demand = dict[str, list[Part]]

_NOUNS = {PS_ROLE.name: "PS", WORKER_ROLE.name: "workers", CHIEF_ROLE.name: "chief"}


# What a queued experiment waits for rather than needs now: what its tenant's ClusterQueue counts
# (tfk8s.specs.queueing.resource_groups). Not `pods`: Kueue is not given that count to wait for.
WAITED_FOR = frozenset({"cpu", "memory", "gpus"})


def _role_parts(i: int, cluster: ClusterSettings, role: Role, queued: bool) -> dict[str, Part]:
    n, sized, by = role.count(cluster), role.resources(cluster), role.sized_by  # by: "ps" | "workers"

    def part(noun: str, count: int, each: Decimal, key: str, lower: str) -> Part:
        return Part(cluster_index=i, cluster=cluster.name, noun=noun, count=count, each=each, key=key, lower=lower)

    def sized_part(setting: str, each: Decimal) -> Part:
        if role.one_task:  # the chief: its count is no setting, only its (worker-sized) resources shrink
            return part(_NOUNS[role.name], n, each, f"{by}.{setting}", f"{by}.{setting}")
        return part(_NOUNS[role.name], n, each, f"{by}.count", f"{by}.count or {by}.{setting}")

    pods = part(_NOUNS[role.name], n, Decimal(1), f"{by}.count", f"{by}.count")
    if role.one_task:
        pods = part(
            _NOUNS[role.name], n, Decimal(1), "inGraphClient", "inGraphClient (a notebook-driven cluster has no chief pod)"
        )
    # One Service per PS task (on a queueing platform, per task); one headless Service per Job,
    # whatever its task count.
    if role is PS_ROLE or (queued and not role.one_task):
        services = part(f"{_NOUNS[role.name]} Services", n, Decimal(1), f"{by}.count", f"{by}.count")
    elif queued:  # the chief's own
        services = part("chief Service", 1, Decimal(1), "inGraphClient", "inGraphClient")
    else:
        services = part(f"{role.name} Service", 1, Decimal(1), "", "the number of clusters")
    return {
        "cpu": sized_part("cpu", quota.amount(sized.cpu)),
        "memory": sized_part("memory", quota.amount(sized.memory)),
        "gpus": sized_part("gpus", Decimal(sized.gpus)),
        "pods": pods,
        "services": services,
    }


def experiment_demand(clusters: Sequence[ClusterSettings], *, queued: bool = False) -> Demand:
    """What the experiment's clusters ask of the namespace, setting by setting (tfk8s.specs.quota.HARD_KEYS);
    `queued`: on a platform that queues, where every task has a Service (tfk8s.specs.jobset)."""
    demand: Demand = {setting: [] for setting in quota.HARD_KEYS}
    for i, cluster in enumerate(clusters):
        roles = [PS_ROLE, WORKER_ROLE, *([CHIEF_ROLE] if has_chief_job(cluster) else [])]
        for role in roles:
            for setting, part in _role_parts(i, cluster, role, queued).items():
                if part.total:
                    demand[setting].append(part)
        if cluster.scratch is not None:
            size = quota.amount(cluster.scratch.size)
            for setting, each, key in (("storage", size, "scratch.size"), ("persistentVolumeClaims", Decimal(1), "scratch")):
                demand[setting].append(
                    Part(cluster_index=i, cluster=cluster.name, noun="scratch claim", count=1, each=each, key=key, lower=key)
                )
    return demand


def _pod_amounts(pod: Mapping[str, Any]) -> dict[str, Decimal]:
    """A pod's requests and limits as its quota counts them: per resource, the larger of its
    containers' sum and its largest init container (a request left unset defaults to the limit)."""
    spec = pod.get("spec") or {}
    result: dict[str, Decimal] = {}
    for kind in ("requests", "limits"):
        for resource in ("cpu", "memory", quota.GPU_RESOURCE):

            def of(container: Mapping[str, Any], kind: str = kind, resource: str = resource) -> Decimal:
                amounts = container.get("resources") or {}
                given = (amounts.get(kind) or {}).get(resource)
                if given is None and kind == "requests":
                    given = (amounts.get("limits") or {}).get(resource)
                return quota.amount(given)

            running = sum((of(c) for c in spec.get("containers") or []), Decimal(0))
            init = max((of(c) for c in spec.get("initContainers") or []), default=Decimal(0))
            result[f"{kind}.{resource}"] = max(running, init)
    return result


def own_usage(
    pods: Sequence[Mapping[str, Any]], services: Sequence[Mapping[str, Any]], claims: Sequence[Mapping[str, Any]]
) -> dict[str, Decimal]:
    """What an experiment's live objects take from its quota, keyed like the ResourceQuota's `used`."""
    used: dict[str, Decimal] = {}

    def add(key: str, value: Decimal) -> None:
        used[key] = used.get(key, Decimal(0)) + value

    # A finished pod no longer counts against a quota.
    for pod in (p for p in pods if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")):
        add("pods", Decimal(1))
        for key, value in _pod_amounts(pod).items():
            add(key, value)
    add("services", Decimal(len(services)))
    for claim in claims:
        add("persistentvolumeclaims", Decimal(1))
        add(
            "requests.storage",
            quota.amount((((claim.get("spec") or {}).get("resources") or {}).get("requests") or {}).get("storage")),
        )
    return used


@dataclass(frozen=True, kw_only=True)
class Room:
    """One ResourceQuota key as the experiment sees it: the hard limit, what is used, and its own share of that."""

    hard: Decimal
    used: Decimal
    own: Decimal

    @property
    def left(self) -> Decimal:
        return self.hard - self.used + self.own


def rooms(live_quota: Mapping[str, Any], own: Mapping[str, Decimal]) -> dict[str, Room]:
    """Per ResourceQuota key, the room left. `status.hard` is what the API server enforces; a quota
    the controller has not reconciled yet has only `spec.hard`, and nothing used."""
    status = live_quota.get("status") or {}
    hard = status.get("hard") or (live_quota.get("spec") or {}).get("hard") or {}
    used = status.get("used") or {}
    return {
        key: Room(hard=quota.amount(value), used=quota.amount(used.get(key)), own=own.get(key, Decimal(0)))
        for key, value in hard.items()
    }


def _breakdown(setting: str, parts: list[Part], several_clusters: bool) -> str:
    def line(p: Part) -> str:
        prefix = f"{p.cluster}: " if several_clusters else ""
        counted = setting in ("pods", "services", "persistentVolumeClaims")
        return f"{prefix}{p.count} {p.noun}" + ("" if counted else f" x {quota.format_amount(setting, p.each)}")

    return ", ".join(line(p) for p in parts)


def refusals(
    demand: Demand, room: Mapping[str, Room], user: str, *, queued: bool = False, apps: Mapping[str, Decimal] | None = None
) -> list[str]:
    """One message per quota setting the experiment asks more of than its user has left; `queued`:
    of CPU, memory and GPUs, more than the whole quota less `apps`, what the tenant's own Jupyter
    and TensorBoard take of it (by quota setting: `cpu`, `memory`), which her queue never lends
    (tfk8s.specs.queueing.resource_groups)."""
    apps = apps or {}
    several = len({p.cluster_index for parts in demand.values() for p in parts}) > 1
    problems = []
    for setting, parts in demand.items():
        asked = sum((p.total for p in parts), Decimal(0))
        enforced = [room[key] for key in quota.HARD_KEYS[setting] if key in room]
        waits = queued and setting in WAITED_FOR
        if waits:
            enforced = [Room(hard=r.hard, used=apps.get(setting, Decimal(0)), own=Decimal(0)) for r in enforced]
        if not asked or not enforced:
            continue
        tightest = min(enforced, key=lambda r: r.left)
        if asked <= tightest.left:
            continue
        biggest = max(parts, key=lambda p: p.total)

        def fmt(value: Decimal, setting: str = setting) -> str:
            return quota.format_amount(setting, value)

        own = f", {fmt(tightest.own)} of it this experiment's own" if tightest.own else ""
        left = fmt(max(tightest.left, Decimal(0)))
        held = f", {fmt(tightest.used)} of it her Jupyter's and TensorBoard's" if tightest.used else ""
        has = (
            f"tenant {user}'s whole quota is {fmt(tightest.hard)}{held} (a queued experiment waits for the rest, never for more)"
            if waits
            else f"tenant {user}'s quota has {left} of {fmt(tightest.hard)} left (used {fmt(tightest.used)}{own})"
        )
        problems.append(
            f"{biggest.path}: the experiment asks {setting} {fmt(asked)} ({_breakdown(setting, parts, several)}), "
            f"{has}: lower {biggest.lower}, or ask the platform team to raise tfk8s:tenant.quota.{setting} of tenant {user}"
        )
    return problems


def _items(listing: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    return list((listing or {}).get("items") or [])


def live_room(read: Reader, namespace: str, experiment: str, cluster: str | None = None) -> dict[str, Room] | None:
    """The room the user's quota leaves this experiment (or, `cluster`, this one cluster of it: the
    component package's, which knows no other cluster of its experiment), read live (`read` returns
    whole objects); None when the namespace has no tfk8s quota (a platform from before quotas: nothing
    to refuse)."""
    live_quota = read(RESOURCE_QUOTA.path(quota.QUOTA_NAME, namespace))
    if live_quota is None:
        return None
    mine = {EXPERIMENT: experiment, **({CLUSTER: cluster} if cluster is not None else {})}
    own = own_usage(
        _items(read(POD.list_path(namespace, mine))),
        _items(read(SERVICE.list_path(namespace, mine))),
        _items(read(PERSISTENT_VOLUME_CLAIM.list_path(namespace, mine))),
    )
    return rooms(live_quota, own)
