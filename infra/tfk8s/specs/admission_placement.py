"""Where a tenant's pods may not go, as CEL: the placement rules the platform's admission policies
(tfk8s.specs.tenant_admission) apply to a pod, to every workload's pod template and to every
replicated Job of a JobSet: never a named node, the User Node or the control plane, only the
platform's tolerations, node selector keys and priority classes.

Each rule is a function of two CEL expressions, a pod spec and its node affinity terms, so one
rule serves the pod and template policies (through their variables) and the JobSet policy (each
replicated Job's template). Pure.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from tfk8s.settings.node_keys import NODE_LOST_TAINTS
from tfk8s.settings.platform import PlacementSettings, UserNodeSettings
from tfk8s.specs import jobset
from tfk8s.specs.queueing import LOCAL_QUEUE_NAME

CONTROL_PLANE_PREFIX = "node-role.kubernetes.io/"
# Taints the node lifecycle controller sets (a cordoned node's, a pressured node's, ...): a tenant's
# pod may tolerate only the two of a node that stopped answering (NODE_LOST_TAINTS, NoExecute: how
# long it waits for it), so her Jobs never run on a node its team cordoned or that runs short.
NODE_CONDITION_PREFIX = "node.kubernetes.io/"
HOSTNAME = "kubernetes.io/hostname"


def cel(value: str | Sequence[str]) -> str:
    """A CEL literal: a JSON string is a CEL string, a list of them a CEL list."""
    return json.dumps(value if isinstance(value, str) else list(value))


# One placement rule as CEL, of a pod spec expression and of its node affinity terms' expression:
# the pod and template policies give it their variables, the JobSet policy each replicated Job's.
PlacementCheck = Callable[[str, str], str]


Rule = tuple[PlacementCheck, str]  # a rule's CEL and the message it refuses with
FIX = "; tfk8s tenant namespaces keep training off the User Node and the control plane"


def guarded(user_node: UserNodeSettings, key: str) -> str:
    """`key` (a CEL expression) is the User Node's label or taint, or the control plane's."""
    return f"({key} == {cel(user_node.taint_key)} || {key}.startsWith({cel(CONTROL_PLANE_PREFIX)}))"


def placement_rules(user_node: UserNodeSettings, placement: PlacementSettings) -> list[Rule]:
    """What a pod spec may not ask of placement: each rule's CEL (of the spec and its node terms) and message."""
    return [
        (
            lambda spec, terms: f"{spec}.?nodeName.orValue('') == ''",
            "spec.nodeName is refused: pods are placed by the scheduler" + FIX,
        ),
        _tolerations(user_node, placement),
        _node_selector(user_node, placement),
        _node_affinity(user_node),
        (
            lambda spec, terms: f"{spec}.?priorityClassName.orValue('') in {cel(['', *placement.priority_classes])}",
            "only the priority classes in platform.placement.priorityClasses "
            f"({', '.join(placement.priority_classes) or 'none'}) may be asked for in tfk8s tenant namespaces: a higher "
            "priority would preempt other tenants' pods",
        ),
    ]


def _tolerations(user_node: UserNodeSettings, placement: PlacementSettings) -> Rule:
    condition_ok = (
        f" && (!t.key.startsWith({cel(NODE_CONDITION_PREFIX)}) || "
        f"(t.key in {cel(NODE_LOST_TAINTS)} && t.?effect.orValue('') == 'NoExecute'))"
    )
    allowed = (
        f" && (t.key in {cel(placement.toleration_keys)} || t.key in {cel(NODE_LOST_TAINTS)})"
        if placement.toleration_keys
        else ""
    )
    return (
        lambda spec, terms: (
            f"{spec}.?tolerations.orValue([]).all(t, t.?key.orValue('') != '' && !{guarded(user_node, 't.key')}"
            f"{condition_ok}{allowed})"
        ),
        f"a toleration of every taint, of the User Node's ({user_node.taint_key}), the control plane's "
        f"({CONTROL_PLANE_PREFIX}*) or a node condition's other than not-ready and unreachable with NoExecute "
        "(a cordoned or pressured node)"
        + (" or of a key not in platform.placement.tolerationKeys" if allowed else "")
        + " is refused"
        + FIX,
    )


def _node_selector(user_node: UserNodeSettings, placement: PlacementSettings) -> Rule:
    node = cel(user_node.name)
    allowed = f" && k in {cel(placement.node_selector_keys)}" if placement.node_selector_keys else ""
    return (
        lambda spec, terms: (
            f"{spec}.?nodeSelector.orValue({{}}).all(k, !{guarded(user_node, 'k')} && "
            f"!(k == {cel(HOSTNAME)} && {spec}.nodeSelector[k] == {node}){allowed})"
        ),
        f"a nodeSelector on the User Node ({user_node.taint_key}, {HOSTNAME}={user_node.name}) or the "
        f"control plane ({CONTROL_PLANE_PREFIX}*)"
        + (" or on a key not in platform.placement.nodeSelectorKeys" if allowed else "")
        + " is refused"
        + FIX,
    )


def _node_affinity(user_node: UserNodeSettings) -> Rule:
    # The User Node's and the control plane's keys only as DoesNotExist (how training pods stay off
    # the User Node), never the User Node by host name or object name.
    node = cel(user_node.name)
    expression_ok = (
        f"(!{guarded(user_node, 'e.key')} || e.operator == 'DoesNotExist') && "
        f"!(e.key == {cel(HOSTNAME)} && e.operator == 'In' && {node} in e.?values.orValue([]))"
    )
    field_ok = f"!(f.key == 'metadata.name' && f.operator == 'In' && {node} in f.?values.orValue([]))"
    return (
        lambda spec, terms: (
            f"{terms}.all(term, term.?matchExpressions.orValue([]).all(e, "
            f"{expression_ok}) && term.?matchFields.orValue([]).all(f, {field_ok}))"
        ),
        f"a node affinity that reaches the User Node ({user_node.taint_key}, {user_node.name}) or the control "
        f"plane ({CONTROL_PLANE_PREFIX}*) is refused (DoesNotExist is how to stay off them)" + FIX,
    )


def placement_validations(user_node: UserNodeSettings, placement: PlacementSettings) -> list[dict[str, str]]:
    """What a pod spec (`variables.spec`, its node terms `variables.nodeTerms`) may not ask of placement."""
    return [
        {"expression": check("variables.spec", "variables.nodeTerms"), "message": message}
        for check, message in placement_rules(user_node, placement)
    ]


def jobset_validations(user_node: UserNodeSettings, placement: PlacementSettings) -> list[dict[str, str]]:
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
    terms = f"({node_terms(pod)})"
    where = "spec.replicatedJobs[*].template.spec.template.spec: "

    def each_replicated_job(check: str) -> str:
        return f"object.?spec.?replicatedJobs.orValue([]).all(rj, !has(rj.template.spec) || !has({pod}) || ({check}))"

    placement_checks = [
        {"expression": each_replicated_job(check(pod, terms)), "message": where + message}
        for check, message in placement_rules(user_node, placement)
    ]
    # Without the label, Kueue leaves the JobSet alone (manageJobsWithoutQueueName is off) and JobSet's
    # controller starts it at once: beside the queue, its capacity, priorities and fair share. The
    # tenant's LocalQueue is the only one in her namespace (she may create none: tfk8s.specs.experimenter_rights),
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


def node_terms(spec: str) -> str:
    """A pod spec's node affinity terms, required and preferred, as one CEL list."""
    affinity = f"{spec}.?affinity.?nodeAffinity"
    return (
        f"{affinity}.?requiredDuringSchedulingIgnoredDuringExecution.?nodeSelectorTerms.orValue([]) + "
        f"{affinity}.?preferredDuringSchedulingIgnoredDuringExecution.orValue([]).map(p, p.preference)"
    )


def pod_spec_variables(path: str) -> list[dict[str, str]]:
    return [{"name": "spec", "expression": path}, {"name": "nodeTerms", "expression": node_terms(path)}]
