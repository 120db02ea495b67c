"""What RBAC leaves open in tenants' namespaces, closed by the API server itself.

A tenant's identities hold the experimenter role in their namespace (tfk8s.specs.experimenter_rights): enough to run
experiments, and, through kubectl, more than experiments need. RBAC grants verbs on kinds; it cannot
say "a Job, but not one that tolerates the User Node's taint", "a RoleBinding, but not to everyone",
"this Deployment, but not the tenant's Jupyter". Found by trying, with a tenant's own certificate:
a Job that tolerates the User Node's taint and selects its label ran there; a RoleBinding of the
experimenter role to `system:authenticated` let every other tenant in; a tenant could scale her
Jupyter onto the shared User Node without bound, or put `externalIPs` on a Service to intercept
another tenant's NodePort (CVE-2020-8554). The platform owns these ValidatingAdmissionPolicies
(Kubernetes >= 1.30), each bound with `Deny`, in every namespace labelled as one of its tenants'
(`TENANT_NAMESPACE`, which the tenant stack sets and a tenant cannot change: no tenant may update
namespaces):

  * placement: a pod, or the pod template of any workload kind, may not name a node (`nodeName`),
    tolerate the User Node's or the control plane's taints (or every taint), select their labels
    or the User Node by host name, nor ask for a priority class the platform does not allow;
  * on a platform that queues (`platform.queueing.enabled`), the same for every replicated Job of a
    JobSet, which must also wait in the tenant's LocalQueue (`jobset-placement`);
  * services: ClusterIP only (no NodePort, LoadBalancer, ExternalName) and no `externalIPs`;
  * bindings: a RoleBinding binds a Role of the namespace to service accounts of the namespace,
    never a ClusterRole (the experimenter role among them) nor a user or group;
  * scale: `deployments/scale` only scales down (the PS retire themselves that way);
  * the tenant stack's objects (labelled `tfk8s.io/stack-kind: tenant`: quota, network policies,
    Jupyter and TensorBoard, their Services, the experimenters binding, the guard) are created,
    changed and deleted only by the platform team;
  * pod storage: every emptyDir has a `sizeLimit` and every container an ephemeral-storage limit
    (the namespace's LimitRange gives one to containers that set none, tfk8s.specs.quota).

Who the rules bind: every request except the platform team's and Kubernetes' own controllers'.
The platform team is whoever may register tenants (`create` on the platform's Tenant kind), asked of
the API server's own authorizer; controllers (the controller-manager and the scheduler, and each of
the controller-manager's own controllers by its account in kube-system, `CONTROLLER_ACCOUNTS`; no
other kube-system account: a CNI's or an add-on's is not exempt) only act on what someone else
wrote: a tenant's Deployment was checked when she wrote it, the Jupyter Deployment was written by
the platform. The pod-storage rule binds everyone, controllers included: it is about the pod itself.

Pure: `policies` returns each policy's spec; tfk8s.components.tenant_admission declares them with
their bindings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tfk8s.kube.api_paths import JOBSET
from tfk8s.settings.contract import PlatformKind
from tfk8s.settings.platform import PlacementSettings, UserNodeSettings
from tfk8s.settings.queueing import QueueingSettings
from tfk8s.specs.admission_placement import cel, jobset_validations, placement_validations, pod_spec_variables
from tfk8s.specs.labels import TENANT_NAMESPACE
from tfk8s.specs.ownership import STACK_KIND

# ValidatingAdmissionPolicy: GA (admissionregistration.k8s.io/v1, on by default) since 1.30.
POLICY_SINCE = (1, 30)


def policy_supported(version: tuple[int, int]) -> bool:
    return version >= POLICY_SINCE


# kube-controller-manager's controllers, as they authenticate with --use-service-account-credentials
# (kubeadm's default, CIS 1.3.3): each its own account in kube-system, named by Kubernetes' bootstrap
# RBAC policy (k8s.io/kubernetes plugin/pkg/auth/authorizer/rbac/bootstrappolicy, 1.34.4: every
# `system:controller:<name>` role of controller_policy.go and namespace_policy.go). Only they, of
# kube-system's accounts, are exempt: the same process as the controller-manager's own identity.
CONTROLLER_ACCOUNTS = (
    "attachdetach-controller",
    "bootstrap-signer",
    "certificate-controller",
    "cloud-provider",
    "clusterrole-aggregation-controller",
    "cronjob-controller",
    "daemon-set-controller",
    "deployment-controller",
    "device-taint-eviction-controller",
    "disruption-controller",
    "endpoint-controller",
    "endpointslice-controller",
    "endpointslicemirroring-controller",
    "ephemeral-volume-controller",
    "expand-controller",
    "generic-garbage-collector",
    "horizontal-pod-autoscaler",
    "job-controller",
    "kube-apiserver-serving-clustertrustbundle-publisher",
    "legacy-service-account-token-cleaner",
    "namespace-controller",
    "node-controller",
    "persistent-volume-binder",
    "pod-garbage-collector",
    "podcertificaterequestcleaner",
    "pv-protection-controller",
    "pvc-protection-controller",
    "replicaset-controller",
    "replication-controller",
    "resource-claim-controller",
    "resourcequota-controller",
    "root-ca-cert-publisher",
    "route-controller",
    "selinux-warning-controller",
    "service-account-controller",
    "service-cidrs-controller",
    "service-controller",
    "statefulset-controller",
    "storage-version-garbage-collector",
    "storage-version-migrator-controller",
    "token-cleaner",
    "ttl-after-finished-controller",
    "ttl-controller",
    "validatingadmissionpolicy-status-controller",
    "volumeattributesclass-protection-controller",
)
EPHEMERAL = "ephemeral-storage"
# The workload kinds whose pod template is at spec.template (CronJobs one level deeper).
TEMPLATE_KINDS = (
    ("apps", ("deployments", "replicasets", "statefulsets", "daemonsets")),
    ("batch", ("jobs",)),
    ("", ("replicationcontrollers",)),
)


def namespace_labels(group: str) -> dict[str, str]:
    """The label that puts a tenant's namespace under its platform's policies."""
    return {TENANT_NAMESPACE: group}


def exempt(tenants: PlatformKind) -> list[dict[str, str]]:
    """matchConditions: the request is neither the platform team's nor a controller's."""
    controllers = cel(
        [
            "system:kube-controller-manager",
            "system:kube-scheduler",
            *(f"system:serviceaccount:kube-system:{account}" for account in CONTROLLER_ACCOUNTS),
        ]
    )
    return [
        {
            "name": "not-the-platform-team",
            "expression": f"!authorizer.group({cel(tenants.group)}).resource({cel(tenants.plural)}).check('create').allowed()",
        },
        {"name": "not-a-controller", "expression": f"!(request.userInfo.username in {controllers})"},
    ]


def _rule(groups: Sequence[str], resources: Sequence[str], operations: Sequence[str]) -> dict[str, Any]:
    return {"apiGroups": list(groups), "apiVersions": ["*"], "resources": list(resources), "operations": list(operations)}


def _policy(
    group: str,
    rules: list[dict[str, Any]],
    validations: list[dict[str, str]],
    *,
    conditions: list[dict[str, str]],
    variables: list[dict[str, str]] | None = None,
    object_selector: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "resourceRules": rules,
            "namespaceSelector": {"matchLabels": namespace_labels(group)},
            **({"objectSelector": object_selector} if object_selector else {}),
        },
        "matchConditions": conditions,
        **({"variables": variables} if variables else {}),
        "validations": validations,
    }


@dataclass(frozen=True)
class Fixed:
    """A policy whose rules no setting changes: what it matches and what it refuses."""

    rules: list[dict[str, Any]]
    validations: list[dict[str, str]]
    everyone: bool = False  # binds the platform team and controllers too (it is about the object itself)
    object_selector: dict[str, Any] = field(default_factory=dict)


WRITES = ("CREATE", "UPDATE")
FIXED: dict[str, Fixed] = {
    "services": Fixed(
        [_rule([""], ["services"], WRITES)],
        [
            {
                "expression": "object.spec.?externalIPs.orValue([]).size() == 0",
                "message": "spec.externalIPs is refused in tfk8s tenant namespaces: it would capture traffic for "
                "addresses that are not the tenant's (CVE-2020-8554)",
            },
            {
                "expression": "object.spec.?type.orValue('ClusterIP') == 'ClusterIP'",
                "message": "only ClusterIP Services may be made by tenants: what users reach from outside (Jupyter, "
                "TensorBoard) is the platform's, on the User Node",
            },
        ],
    ),
    "bindings": Fixed(
        [_rule(["rbac.authorization.k8s.io"], ["rolebindings"], WRITES)],
        [
            {
                "expression": "object.roleRef.kind == 'Role'",
                "message": "a tenant's RoleBinding binds a Role of its namespace, never a ClusterRole: who may act "
                "for the tenant is the tenant stack's tfk8s:tenant.identities, set by the platform team",
            },
            {
                "expression": "object.?subjects.orValue([]).all(s, s.kind == 'ServiceAccount' && "
                "s.?namespace.orValue('') == request.namespace)",
                "message": "a tenant's RoleBinding names service accounts of its own namespace only; people and "
                "groups are the tenant stack's tfk8s:tenant.identities, set by the platform team",
            },
        ],
    ),
    "scale": Fixed(
        [_rule(["apps"], ["deployments/scale"], ("UPDATE",))],
        [
            {
                "expression": "object.?spec.?replicas.orValue(0) <= oldObject.?spec.?replicas.orValue(0)",
                "message": "scaling up through deployments/scale is refused in tfk8s tenant namespaces: experiments "
                "size their clusters in their stack files, and Jupyter and TensorBoard are the platform's",
            },
        ],
    ),
    "tenant-objects": Fixed(
        [_rule(["*"], ["*"], ("CREATE", "UPDATE", "DELETE"))],
        [
            {
                "expression": "false",
                "messageExpression": "'the tenant stack owns ' + request.resource.resource + ' ' + request.name + "
                "': only the platform team changes it (pulumi up of the tenant stack)'",
            }
        ],
        object_selector={"matchExpressions": [{"key": STACK_KIND, "operator": "In", "values": ["tenant", "platform"]}]},
    ),
    "pod-storage": Fixed(
        [_rule([""], ["pods"], ("CREATE",))],
        [
            {
                "expression": "object.spec.?volumes.orValue([]).all(v, !has(v.emptyDir) || has(v.emptyDir.sizeLimit))",
                "message": "every emptyDir needs a sizeLimit in tfk8s tenant namespaces: scratch space is bounded",
            },
            {
                "expression": "(object.spec.containers + object.spec.?initContainers.orValue([])).all(c, "
                f"{cel(EPHEMERAL)} in c.?resources.?limits.orValue({{}}))",
                "message": f"every container needs a {EPHEMERAL} limit in tfk8s tenant namespaces (the namespace's "
                "LimitRange gives one to containers that set none)",
            },
        ],
        everyone=True,
    ),
}


def policies(
    group: str,
    tenants: PlatformKind,
    user_node: UserNodeSettings,
    placement: PlacementSettings,
    *,
    queueing: bool = False,
    kueue: str = QueueingSettings.model_fields["controller"].default,
) -> dict[str, dict[str, Any]]:
    """Each policy's spec, by a short name (the Pulumi resources' names); `queueing`: the platform's
    `queueing.enabled`, whose experiments are JobSets (the jobset-placement and jobset-resume
    policies), `kueue` the user name Kueue's controller acts as (`queueing.controller`)."""
    conditions = exempt(tenants)
    placement_checks = placement_validations(user_node, placement)
    template_rules = [_rule([g], rs, WRITES) for g, rs in TEMPLATE_KINDS]
    found = {
        "pod-placement": _policy(
            group,
            [_rule([""], ["pods"], WRITES)],
            placement_checks,
            conditions=conditions,
            variables=pod_spec_variables("object.spec"),
        ),
        "template-placement": _policy(
            group,
            template_rules,
            placement_checks,
            conditions=conditions,
            variables=pod_spec_variables("object.spec.template.spec"),
        ),
        "cronjob-placement": _policy(
            group,
            [_rule(["batch"], ["cronjobs"], WRITES)],
            placement_checks,
            conditions=conditions,
            variables=pod_spec_variables("object.spec.jobTemplate.spec.template.spec"),
        ),
        **{
            name: _policy(
                group,
                fixed.rules,
                fixed.validations,
                conditions=[] if fixed.everyone else conditions,
                object_selector=fixed.object_selector or None,
            )
            for name, fixed in FIXED.items()
        },
    }
    if queueing:
        found |= _queueing_policies(group, conditions, user_node, placement, kueue)
    return found


def _queueing_policies(
    group: str, conditions: list[dict[str, str]], user_node: UserNodeSettings, placement: PlacementSettings, kueue: str
) -> dict[str, dict[str, Any]]:
    """A queueing platform's: its experiments' JobSets placed as pods are, and resumed by Kueue alone."""
    return {
        "jobset-placement": _policy(
            group,
            [_rule([JOBSET.group], [JOBSET.plural], WRITES)],
            jobset_validations(user_node, placement),
            conditions=conditions,
        ),
        # Kueue suspends a queued JobSet at its creation (its webhook) and resumes it when it admits
        # the workload; a tenant who resumed her own would run beside the queue's capacity and order.
        "jobset-resume": _policy(
            group,
            [_rule([JOBSET.group], [JOBSET.plural], ("UPDATE",))],
            [
                {
                    "expression": "!(oldObject.?spec.?suspend.orValue(false) && !object.?spec.?suspend.orValue(false))",
                    "message": "spec.suspend: only Kueue resumes a suspended JobSet in a tfk8s tenant namespace, when "
                    "it admits the workload (platform.queueing.controller); wait for the queue",
                }
            ],
            conditions=[*conditions, {"name": "not-kueue", "expression": f"request.userInfo.username != {cel(kueue)}"}],
        ),
    }
