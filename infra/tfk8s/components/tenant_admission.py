"""What RBAC leaves open in tenants' namespaces, closed by the API server itself.

A tenant's identities hold the experimenter role in their namespace (tfk8s.checks.access): enough to run
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

Pure: `policies` returns each policy's spec; `TenantAdmission` declares them with their bindings.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi

from tfk8s.kube import objects as kube
from tfk8s.kube.api_paths import JOBSET
from tfk8s.schema.contract import PlatformKind
from tfk8s.schema.node_keys import NODE_LOST_TAINTS
from tfk8s.schema.platform import PlacementSettings, QueueingSettings, UserNodeSettings
from tfk8s.specs import jobset
from tfk8s.specs.labels import TENANT_NAMESPACE
from tfk8s.specs.ownership import STACK_KIND, Owner
from tfk8s.specs.queueing import LOCAL_QUEUE_NAME

CONTROL_PLANE_PREFIX = "node-role.kubernetes.io/"
# Taints the node lifecycle controller sets (a cordoned node's, a pressured node's, ...): a tenant's
# pod may tolerate only the two of a node that stopped answering (NODE_LOST_TAINTS, NoExecute: how
# long it waits for it), so her Jobs never run on a node its team cordoned or that runs short.
NODE_CONDITION_PREFIX = "node.kubernetes.io/"
HOSTNAME = "kubernetes.io/hostname"
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


def cel(value: str | Sequence[str]) -> str:
    """A CEL literal: a JSON string is a CEL string, a list of them a CEL list."""
    return json.dumps(value if isinstance(value, str) else list(value))


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


# One placement rule as CEL, of a pod spec expression and of its node affinity terms' expression:
# the pod and template policies give it their variables, the JobSet policy each replicated Job's.
PlacementCheck = Callable[[str, str], str]


def _placement_rules(user_node: UserNodeSettings, placement: PlacementSettings) -> list[tuple[PlacementCheck, str]]:
    """What a pod spec may not ask of placement: each rule's CEL (of the spec and its node terms) and message."""
    node = cel(user_node.name)

    def guarded(key: str) -> str:
        """`key` (a CEL expression) is the User Node's label or taint, or the control plane's."""
        return f"({key} == {cel(user_node.taint_key)} || {key}.startsWith({cel(CONTROL_PLANE_PREFIX)}))"

    condition_ok = (
        f" && (!t.key.startsWith({cel(NODE_CONDITION_PREFIX)}) || "
        f"(t.key in {cel(NODE_LOST_TAINTS)} && t.?effect.orValue('') == 'NoExecute'))"
    )
    allowed_tolerations = (
        f" && (t.key in {cel(placement.toleration_keys)} || t.key in {cel(NODE_LOST_TAINTS)})"
        if placement.toleration_keys
        else ""
    )
    allowed_selectors = f" && k in {cel(placement.node_selector_keys)}" if placement.node_selector_keys else ""
    # Node affinity: the User Node's and the control plane's keys only as DoesNotExist (how
    # training pods stay off the User Node), never the User Node by host name or object name.
    expression_ok = (
        f"(!{guarded('e.key')} || e.operator == 'DoesNotExist') && "
        f"!(e.key == {cel(HOSTNAME)} && e.operator == 'In' && {node} in e.?values.orValue([]))"
    )
    field_ok = f"!(f.key == 'metadata.name' && f.operator == 'In' && {node} in f.?values.orValue([]))"
    fix = "; tfk8s tenant namespaces keep training off the User Node and the control plane"
    return [
        (
            lambda spec, terms: f"{spec}.?nodeName.orValue('') == ''",
            "spec.nodeName is refused: pods are placed by the scheduler" + fix,
        ),
        (
            lambda spec, terms: (
                f"{spec}.?tolerations.orValue([]).all(t, t.?key.orValue('') != '' && !{guarded('t.key')}"
                f"{condition_ok}{allowed_tolerations})"
            ),
            f"a toleration of every taint, of the User Node's ({user_node.taint_key}), the control plane's "
            f"({CONTROL_PLANE_PREFIX}*) or a node condition's other than not-ready and unreachable with NoExecute "
            "(a cordoned or pressured node)"
            + (" or of a key not in platform.placement.tolerationKeys" if allowed_tolerations else "")
            + " is refused"
            + fix,
        ),
        (
            lambda spec, terms: (
                f"{spec}.?nodeSelector.orValue({{}}).all(k, !{guarded('k')} && "
                f"!(k == {cel(HOSTNAME)} && {spec}.nodeSelector[k] == {node}){allowed_selectors})"
            ),
            f"a nodeSelector on the User Node ({user_node.taint_key}, {HOSTNAME}={user_node.name}) or the "
            f"control plane ({CONTROL_PLANE_PREFIX}*)"
            + (" or on a key not in platform.placement.nodeSelectorKeys" if allowed_selectors else "")
            + " is refused"
            + fix,
        ),
        (
            lambda spec, terms: (
                f"{terms}.all(term, term.?matchExpressions.orValue([]).all(e, "
                f"{expression_ok}) && term.?matchFields.orValue([]).all(f, {field_ok}))"
            ),
            f"a node affinity that reaches the User Node ({user_node.taint_key}, {user_node.name}) or the control "
            f"plane ({CONTROL_PLANE_PREFIX}*) is refused (DoesNotExist is how to stay off them)" + fix,
        ),
        (
            lambda spec, terms: f"{spec}.?priorityClassName.orValue('') in {cel(['', *placement.priority_classes])}",
            "only the priority classes in platform.placement.priorityClasses "
            f"({', '.join(placement.priority_classes) or 'none'}) may be asked for in tfk8s tenant namespaces: a higher "
            "priority would preempt other tenants' pods",
        ),
    ]


def _placement_validations(user_node: UserNodeSettings, placement: PlacementSettings) -> list[dict[str, str]]:
    """What a pod spec (`variables.spec`, its node terms `variables.nodeTerms`) may not ask of placement."""
    return [
        {"expression": check("variables.spec", "variables.nodeTerms"), "message": message}
        for check, message in _placement_rules(user_node, placement)
    ]


def _jobset_validations(user_node: UserNodeSettings, placement: PlacementSettings) -> list[dict[str, str]]:
    """The placement rules for every replicated Job's pod template of a JobSet, and its queue.

    A JobSet's pods are created by the Job controller from Jobs JobSet's controller creates: the
    pods by kube-controller-manager, exempt from the pod policy, and the Jobs by JobSet's identity,
    exempt from the template policy wherever it may register tenants (the local cluster runs it
    with the admin's kubeconfig). So the tenant's own write, the JobSet, is where they are checked.
    A replicated Job without a Job spec, or a Job spec without a pod spec, makes no pod.

    Its storage needs no rule here: pod-storage binds every pod at CREATE, controllers' included,
    so the pods of any JobSet are checked already (and the namespace's Pod Security level and
    ResourceQuota apply to them as to every pod).

    Kueue's controller updates the JobSet too (`spec.suspend`, and on admission the `gpu` flavor's
    node labels into the nodeSelector of pods that ask for GPUs: tfk8s.specs.queueing). Where it is
    not exempt (it runs as a service account of its own namespace, not kube-system's) those updates
    pass these rules, unless `platform.placement.nodeSelectorKeys` is set without the flavor's keys.
    """
    pod = "rj.template.spec.template.spec"
    # Parenthesised: `.all` binds tighter than the `+` of the two lists of terms.
    terms = f"({_node_terms(pod)})"
    where = "spec.replicatedJobs[*].template.spec.template.spec: "

    def each_replicated_job(check: str) -> str:
        return f"object.?spec.?replicatedJobs.orValue([]).all(rj, !has(rj.template.spec) || !has({pod}) || ({check}))"

    placement_checks = [
        {"expression": each_replicated_job(check(pod, terms)), "message": where + message}
        for check, message in _placement_rules(user_node, placement)
    ]
    # Without the label, Kueue leaves the JobSet alone (manageJobsWithoutQueueName is off) and JobSet's
    # controller starts it at once: beside the queue, its capacity, priorities and fair share. The
    # tenant's LocalQueue is the only one in her namespace (she may create none: tfk8s.checks.access),
    # and a JobSet may only name a LocalQueue of its own namespace.
    # What this does not close, said plainly: a tenant's pods outside the queue by any other kind. The
    # queued experimenter table gives her identities no create of Jobs, Deployments or pods, so a JobSet
    # is the only workload RBAC leaves them; but no policy here refuses a plain Job or pod, so whatever
    # another binding grants her identities still runs beside Kueue, bounded only by her ResourceQuota
    # (as her claims' storage always is: Kueue counts no storage).
    queue = {
        "expression": f"object.metadata.?labels[?{cel(jobset.QUEUE_NAME_LABEL)}].orValue('') == {cel(LOCAL_QUEUE_NAME)}",
        "message": f"a JobSet in a tfk8s tenant namespace waits in the tenant's queue: it needs the label "
        f"{jobset.QUEUE_NAME_LABEL}: {LOCAL_QUEUE_NAME} (without it Kueue ignores the JobSet, which would start at "
        "once, beside the platform's queue, capacity and fair share)",
    }
    return [*placement_checks, queue]


def _node_terms(spec: str) -> str:
    """A pod spec's node affinity terms, required and preferred, as one CEL list."""
    affinity = f"{spec}.?affinity.?nodeAffinity"
    return (
        f"{affinity}.?requiredDuringSchedulingIgnoredDuringExecution.?nodeSelectorTerms.orValue([]) + "
        f"{affinity}.?preferredDuringSchedulingIgnoredDuringExecution.orValue([]).map(p, p.preference)"
    )


def _pod_spec_variables(path: str) -> list[dict[str, str]]:
    return [{"name": "spec", "expression": path}, {"name": "nodeTerms", "expression": _node_terms(path)}]


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
    writes = ("CREATE", "UPDATE")
    conditions = exempt(tenants)
    placement_checks = _placement_validations(user_node, placement)
    template_rules = [_rule([g], rs, writes) for g, rs in TEMPLATE_KINDS]
    found = {
        "pod-placement": _policy(
            group,
            [_rule([""], ["pods"], writes)],
            placement_checks,
            conditions=conditions,
            variables=_pod_spec_variables("object.spec"),
        ),
        "template-placement": _policy(
            group,
            template_rules,
            placement_checks,
            conditions=conditions,
            variables=_pod_spec_variables("object.spec.template.spec"),
        ),
        "cronjob-placement": _policy(
            group,
            [_rule(["batch"], ["cronjobs"], writes)],
            placement_checks,
            conditions=conditions,
            variables=_pod_spec_variables("object.spec.jobTemplate.spec.template.spec"),
        ),
        "services": _policy(
            group,
            [_rule([""], ["services"], writes)],
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
            conditions=conditions,
        ),
        "bindings": _policy(
            group,
            [_rule(["rbac.authorization.k8s.io"], ["rolebindings"], writes)],
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
            conditions=conditions,
        ),
        "scale": _policy(
            group,
            [_rule(["apps"], ["deployments/scale"], ("UPDATE",))],
            [
                {
                    "expression": "object.?spec.?replicas.orValue(0) <= oldObject.?spec.?replicas.orValue(0)",
                    "message": "scaling up through deployments/scale is refused in tfk8s tenant namespaces: experiments "
                    "size their clusters in their stack files, and Jupyter and TensorBoard are the platform's",
                },
            ],
            conditions=conditions,
        ),
        "tenant-objects": _policy(
            group,
            [_rule(["*"], ["*"], ("CREATE", "UPDATE", "DELETE"))],
            [
                {
                    "expression": "false",
                    "messageExpression": "'the tenant stack owns ' + request.resource.resource + ' ' + request.name + "
                    "': only the platform team changes it (pulumi up of the tenant stack)'",
                }
            ],
            conditions=conditions,
            object_selector={"matchExpressions": [{"key": STACK_KIND, "operator": "In", "values": ["tenant", "platform"]}]},
        ),
        "pod-storage": _policy(
            group,
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
            conditions=[],
        ),
    }
    if queueing:
        found["jobset-placement"] = _policy(
            group,
            [_rule([JOBSET.group], [JOBSET.plural], writes)],
            _jobset_validations(user_node, placement),
            conditions=conditions,
        )
        # Kueue suspends a queued JobSet at its creation (its webhook) and resumes it when it admits
        # the workload; a tenant who resumed her own would run beside the queue's capacity and order.
        found["jobset-resume"] = _policy(
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
        )
    return found


@dataclass(frozen=True, kw_only=True)
class TenantAdmissionArgs:
    group: str
    """The platform's group: its tenant namespaces carry it (`namespace_labels`)."""
    tenants: PlatformKind
    """The platform's Tenant kind: who may create Tenants is the platform team, exempt from the rules."""
    user_node: UserNodeSettings
    placement: PlacementSettings
    owner: Owner
    queueing: bool = False
    """The platform's `queueing.enabled`: its experiments' JobSets are checked too."""
    kueue: str = QueueingSettings.model_fields["controller"].default
    """The user name Kueue's controller acts as (`queueing.controller`): it alone resumes a JobSet."""


class TenantAdmission(pulumi.ComponentResource):
    """The policies of `policies`, each bound with Deny in the platform's tenant namespaces."""

    def __init__(self, name: str, args: TenantAdmissionArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("tfk8s:index:TenantAdmission", name, None, opts)
        meta = {"labels": args.owner.labels(), "annotations": args.owner.annotations()}
        child = pulumi.ResourceOptions(parent=self)
        self.policies: dict[str, Any] = {}
        self.bindings: dict[str, Any] = {}
        shorts = policies(args.group, args.tenants, args.user_node, args.placement, queueing=args.queueing, kueue=args.kueue)
        for short, spec in shorts.items():
            policy = kube.ValidatingAdmissionPolicy(f"{name}-{short}", metadata=meta, spec=spec, opts=child)
            self.policies[short] = policy
            self.bindings[short] = kube.ValidatingAdmissionPolicyBinding(
                f"{name}-{short}",
                metadata=meta,
                spec={"policyName": policy.name, "validationActions": ["Deny"]},
                opts=child,
            )
        self.register_outputs({})
