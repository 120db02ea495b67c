"""What an experiment's identity must be allowed in its tenant's namespace: one table (pure).

A tenant's users run `pulumi up`/`destroy` of their experiments with their own Kubernetes identity,
bound in the tenant's namespace to a Role with exactly these rules (`experimenter_rules`, rendered
by `rules_for_role`; the platform's experimenter ClusterRole, tfk8s.components.guard). The table
follows what an experiment stack does, not what it declares:
  * the program reads before declaring anything (tfk8s.program: the namespace's owner, the
    ownership of every fixed name, the quota and the experiment's own pods, Services and claims);
  * the provider (pulumi-kubernetes 4, server-side apply) PATCHes every object it creates or
    updates, GETs it on update and refresh, DELETEs it on destroy and replace, and watches while it
    waits: the object's own kind (waitFor conditions, deletion), the events of the object (every
    await), and per kind what its await reads (tfk8s.kube.awaits says which awaits are skipped);
  * the API server lets a Role grant only what its creator holds, so the PS retirement Role an
    experiment creates (tfk8s.components.training_cluster) needs its rules in this table too.
Whether the current credentials hold them: tfk8s.checks.access.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tfk8s.kube.api_paths import JOBSET
from tfk8s.settings.contract import PlatformKind

# What the provider does to an object it manages: apply (patch, and create when it is new), GET on
# update and refresh, DELETE on destroy and replace, and list+watch of the kind until the object is
# ready or gone.
MANAGED = ("create", "patch", "get", "list", "watch", "delete")
# What an await or the quota check only reads, through a namespace-wide list+watch (an informer).
WATCHED = ("list", "watch")
# What a person reads with kubectl: one object (get) as well as the list.
READ = ("get", "list", "watch")
# What the provider does to an object it only deletes: GET on refresh, DELETE, list+watch until gone.
RETIRE = ("get", "list", "watch", "delete")


@dataclass(frozen=True, kw_only=True)
class Permission:
    """One rule of the table: `verbs` on `resource` of `api_group` ("" is the core group)."""

    api_group: str
    resource: str
    """The plural, with the subresource after a slash: "deployments/scale"."""
    verbs: tuple[str, ...]
    needed_for: str
    """Who needs it and what for: the rule's comment, and the reason a refusal gives."""
    resource_names: tuple[str, ...] = ()
    """Only these objects; empty: any object."""
    namespaced: bool = True
    """False for a cluster-scoped resource: a ClusterRole's rule, checked without a namespace."""

    @property
    def shown(self) -> str:
        """As kubectl names it: `configmaps`, `deployments.apps/scale`, `storageclasses.storage.k8s.io 'x'`."""
        resource, _, sub = self.resource.partition("/")
        name = f"{resource}.{self.api_group}" if self.api_group else resource
        names = " " + ", ".join(repr(n) for n in self.resource_names) if self.resource_names else ""
        return f"{name}/{sub}{names}" if sub else f"{name}{names}"


def experimenter_rules(layouts: PlatformKind, *, queueing: bool = False) -> tuple[Permission, ...]:
    """What an experiment's `pulumi preview/up/refresh/destroy` needs in its tenant's namespace.

    `queueing`: the platform's `queueing.enabled`, where a training cluster is one JobSet and its
    task Services (tfk8s.components.queued_cluster) instead of PS Deployments, worker and chief Jobs
    and the PS's retirement account, Role and RoleBinding. Then an experiment creates none of those:
      * it may still read and delete them (RETIRE), and nothing more: a platform that starts to
        queue has experiments declared before, whose next `up` replaces their Deployments and Jobs
        by a JobSet and whose `destroy` deletes them. Without `create` and `patch` on Jobs and
        Deployments a tenant has no way to run pods but a JobSet, which the platform's admission
        policies keep in her queue (tfk8s.components.tenant_admission, jobset-placement);
      * what only the PS retirement needed goes: `patch` on deployments/scale (granted to the PS
        by its Role) and `bind` on roles (the `preview` of its RoleBinding); so do the watches of
        the provider's awaits of kinds it no longer creates: replicasets (the Deployment await)
        and endpoints (the Job Services' await: every task Service skips its await).
    It also reads its clusters' Workloads (tfk8s.stack_kinds.queue_status: `queueing_rules`).
    Deleting waits on the deleted object's own kind alone (pulumi-kubernetes `await.Deletion`: a
    watch of that kind, a GET, and the object's events), so RETIRE holds no other kind.
    """

    return (
        *_read_first(),
        *_created(layouts, queueing),
        *_granted_on(queueing),
        *_observed(queueing),
        *(queueing_rules() if queueing else ()),
    )


# What the table grants a tenant's people and no program of hers uses: `kubectl logs` of a failed task.
FOR_PEOPLE = frozenset({"pods/log"})


def program_rules(layouts: PlatformKind, *, queueing: bool = False) -> tuple[Permission, ...]:
    """What the program itself needs (`preview`/`up`/`refresh`/`destroy`): the table but what only
    people use; what an experiment's `up` checks it holds (tfk8s.program), and all a pull request's
    preview identity holds (tfk8s.specs.preview_identity)."""
    return tuple(p for p in experimenter_rules(layouts, queueing=queueing) if p.resource not in FOR_PEOPLE)


def _rule(group: str, resource: str, verbs: tuple[str, ...], needed_for: str) -> Permission:
    return Permission(api_group=group, resource=resource, verbs=verbs, needed_for=needed_for)


def _unqueued(queueing: bool, group: str, resource: str, needed_for: str) -> Permission:
    """A kind only a training cluster of a platform that does not queue creates."""
    if queueing:
        return _rule(
            group, resource, RETIRE, f"{needed_for}, to replace or destroy those of clusters declared before the platform queued"
        )
    return _rule(group, resource, MANAGED, needed_for)


def _read_first() -> tuple[Permission, ...]:
    """Read before anything is declared (tfk8s.program)."""
    return (
        _rule("", "namespaces", ("get",), "the program, which reads the namespace's owner before declaring anything"),
        _rule("", "resourcequotas", ("get",), "the quota check, which reads the tenant's quota"),
    )


def _created(layouts: PlatformKind, queueing: bool) -> tuple[Permission, ...]:
    """What an experiment creates (its golden manifests hold exactly these kinds)."""
    rbac = "rbac.authorization.k8s.io"
    services = "each cluster's task Services" if queueing else "each cluster's PS and Job Services"
    return (
        _rule("", "configmaps", MANAGED, "the experiment's trainer package and each cluster's code"),
        _rule("", "services", MANAGED, f"{services}; the quota check lists them"),
        _rule(
            "", "persistentvolumeclaims", MANAGED, "scratch claims; listed by the quota check, watched by the Deployment await"
        ),
        _unqueued(queueing, "", "serviceaccounts", "each cluster's PS retirement account"),
        _unqueued(queueing, "apps", "deployments", "each cluster's PS Deployments"),
        _unqueued(queueing, "batch", "jobs", "each cluster's worker and chief Jobs (their waitFor condition watches them)"),
        _unqueued(queueing, rbac, "roles", "each cluster's PS retirement Role"),
        _unqueued(queueing, rbac, "rolebindings", "each cluster's PS retirement RoleBinding"),
        # Its pods are the Job controller's, from the Jobs JobSet's controller makes: the tenant's
        # identities need no right on either. No await (tfk8s.kube.awaits.QUEUED_NO_AWAIT); a
        # refresh GETs the JobSet for readiness. Server-side apply is authorized as `patch`.
        *(
            (_rule(JOBSET.group, JOBSET.plural, MANAGED, "each cluster's JobSet, which Kueue queues and admits"),)
            if queueing
            else ()
        ),
        _rule(layouts.group, layouts.plural, MANAGED, "each cluster's Layout, which the tenant's Jupyter reads"),
        # A tenant's identities can thus open their own namespace, never another's: a policy selects
        # pods of its own namespace only, and another tenant's pods still deny what theirs do not allow.
        _rule("networking.k8s.io", "networkpolicies", MANAGED, "each cluster's NetworkPolicy (gRPC among its own pods)"),
    )


def _granted_on(queueing: bool) -> tuple[Permission, ...]:
    """What only the PS retirement Role needs its creator to hold: nothing on a platform that queues."""
    if queueing:
        return ()
    return (
        # Not used by the program: the PS retirement Role grants it, and a Role may grant only what
        # its creator holds (without it, creating that Role is Forbidden as an escalation).
        _rule("apps", "deployments/scale", ("patch",), "the PS retirement Role, which grants it to the PS"),
        # A RoleBinding's creator must hold its Role's rules, which the API server reads from the
        # Role; in `preview` (a dry run) a new Role does not exist, and the dry-run create of its
        # binding fails with NotFound unless the creator may `bind` Roles. Roles only, so no
        # ClusterRole can be bound; the Roles of a tenant's namespace grant nothing its experimenters lack.
        _rule(
            "rbac.authorization.k8s.io",
            "roles",
            ("bind",),
            "`preview` of the PS retirement RoleBinding, whose Role does not exist yet",
        ),
    )


def _observed(queueing: bool) -> tuple[Permission, ...]:
    """Only read, by the quota check and the provider's awaits, and by the tenant's people when
    readiness says a pod failed: `kubectl get pod`, `describe` (its events) and `logs` tell why.
    Never pods/exec or pods/attach: Jupyter and TensorBoard hold the tenant's token."""
    awaits = (
        ()
        if queueing
        else (
            _rule("apps", "replicasets", WATCHED, "the provider's Deployment await"),
            _rule("", "endpoints", WATCHED, "the provider's await of the Jobs' headless Services (PS Services skip it)"),
        )
    )
    return (
        _rule(
            "",
            "pods",
            READ,
            "the quota check (the experiment's own pods); the Deployment await and Job refresh; kubectl get pods",
        ),
        _rule("", "pods/log", ("get",), "kubectl logs: why a training task failed"),
        *awaits,
        _rule(
            "", "events", READ, "every await of the provider, which reports the warnings of what it waits for; kubectl describe"
        ),
    )


def queueing_rules() -> tuple[Permission, ...]:
    """What an experiment on a queueing platform reads of Kueue: its clusters' Workloads, listed once
    per `up` for readiness (tfk8s.stack_kinds.queue_status), and `kubectl get workload` of one. Read only:
    Kueue alone writes a Workload, and a tenant who could would admit herself."""
    return (
        Permission(
            api_group="kueue.x-k8s.io",
            resource="workloads",
            verbs=("get", "list"),
            needed_for="readiness of queued clusters: their Workloads' state and place in the queue",
        ),
    )


def experimenter_cluster_rules(scratch_class: str | None) -> tuple[Permission, ...]:
    """What an experiment needs outside its namespace: a ClusterRole's rules (none without scratch).

    The provider's claim await GETs the claim's StorageClass to learn its binding mode; without it,
    it warns on every change of the claim and waits for `Bound`, which a WaitForFirstConsumer
    class never reaches before a pod uses the claim, so `up` times out.
    """
    if scratch_class is None:
        return ()
    return (
        Permission(
            api_group="storage.k8s.io",
            resource="storageclasses",
            verbs=("get",),
            resource_names=(scratch_class,),
            namespaced=False,
            needed_for="the provider's scratch claim await, which reads the class's binding mode",
        ),
    )


def rules_for_role(perms: Sequence[Permission]) -> list[dict[str, Any]]:
    """The `rules` of a `k8s.rbac.v1.Role` (or ClusterRole) granting `perms`, one rule each."""
    return [
        {
            "apiGroups": [p.api_group],
            "resources": [p.resource],
            "verbs": list(p.verbs),
            **({"resourceNames": list(p.resource_names)} if p.resource_names else {}),
        }
        for p in perms
    ]
