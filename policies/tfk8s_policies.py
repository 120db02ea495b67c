"""tfk8s's platform rules as CrossGuard policies, checked on every stack kind before it deploys.

The program already builds what these rules ask for; the pack checks the result independently,
from the resources the engine sees, so a change of the program (or a hand-written stack of the
same project) that drops one is stopped at `pulumi preview --policy-pack policies`. Mandatory
rules are what the tenants and isolation design rests on; advisory ones are where teams differ.

Rules read resource inputs (camelCase, as the Kubernetes provider receives them). During
preview a value may be unknown; rules read only fields the program always knows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

Json = Mapping[str, Any]

USER_NODE_KEY = "tfk8s.io/user-node"  # the platform's default taint and label key (userNode.taintKey)
SHARED_CLAIMS = ("tfk8s-data", "tfk8s-log")
WORKLOADS = {
    "kubernetes:apps/v1:Deployment",
    "kubernetes:apps/v1:StatefulSet",
    "kubernetes:apps/v1:DaemonSet",
    "kubernetes:batch/v1:Job",
}
POD = "kubernetes:core/v1:Pod"
NAMESPACE = "kubernetes:core/v1:Namespace"
SERVICE = "kubernetes:core/v1:Service"
CLAIM = "kubernetes:core/v1:PersistentVolumeClaim"
NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
QUOTA = "kubernetes:core/v1:ResourceQuota"
JOB = "kubernetes:batch/v1:Job"
# A queued training cluster (tfk8s.specs.jobset): one JobSet of a replicated Job per role.
JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"


def plain(value: Any) -> Any:
    """The pack's read-only proxies of resource properties as plain dicts and lists (so they compare
    equal to literals). Reads every value: one unknown during preview makes the rule skip the resource."""
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return [plain(v) for v in value]
    return value


def pod_templates(resource_type: str, props: Json) -> list[tuple[str, Json]] | None:
    """Every pod template of a resource, each with where it is ("" for the only one): a workload's
    `spec.template`, each of a JobSet's replicated Jobs' (`replicatedJobs[<name>]`), a pod itself.
    None for a kind that holds no pod (tests/test_policies.py fails when a kind tfk8s declares
    holds one that this does not find)."""
    spec = props.get("spec") or {}
    if resource_type in WORKLOADS:
        return [("", spec.get("template") or {})]
    if resource_type == JOBSET:
        return [
            (f"replicatedJobs[{rj.get('name')}]", ((rj.get("template") or {}).get("spec") or {}).get("template") or {})
            for rj in spec.get("replicatedJobs") or []
        ]
    if resource_type == POD:
        return [("", {"metadata": props.get("metadata") or {}, "spec": spec})]
    return None


def template_labels(template: Json) -> Json:
    return (template.get("metadata") or {}).get("labels") or {}


def containers(spec: Json) -> Iterator[Json]:
    yield from spec.get("initContainers") or []
    yield from spec.get("containers") or []


def is_training(labels: Json) -> bool:
    return labels.get("app.kubernetes.io/name") == "tensorflow"


# --- mandatory: what every pod must be ------------------------------------------------------


def pod_security_problems(spec: Json) -> list[str]:
    """The `restricted` Pod Security Standard's rules tfk8s's pods are built to."""
    problems = []
    pod = spec.get("securityContext") or {}
    if (pod.get("seccompProfile") or {}).get("type") != "RuntimeDefault":
        problems.append("the pod's securityContext.seccompProfile.type is not RuntimeDefault")
    if pod.get("runAsNonRoot") is not True and pod.get("runAsUser") in (None, 0):
        problems.append("the pod may run as root (set securityContext.runAsNonRoot: true and a runAsUser)")
    for c in containers(spec):
        context = c.get("securityContext") or {}
        name = c.get("name")
        if context.get("allowPrivilegeEscalation") is not False:
            problems.append(f"container {name!r} allows privilege escalation")
        if "ALL" not in ((context.get("capabilities") or {}).get("drop") or []):
            problems.append(f"container {name!r} does not drop ALL capabilities")
        if context.get("privileged"):
            problems.append(f"container {name!r} is privileged")
        if context.get("runAsUser") == 0:
            problems.append(f"container {name!r} runs as root")
    return problems


def resources_problems(spec: Json) -> list[str]:
    problems = []
    for c in containers(spec):
        resources = c.get("resources") or {}
        for kind in ("requests", "limits"):
            missing = [r for r in ("cpu", "memory") if r not in (resources.get(kind) or {})]
            if missing:
                problems.append(f"container {c.get('name')!r} sets no {kind} of {', '.join(missing)}")
    return problems


def image_problems(spec: Json) -> list[str]:
    problems = []
    for c in containers(spec):
        image = str(c.get("image") or "")
        last = image.rsplit("/", 1)[-1]  # a registry's port is not a tag
        tag = last.rpartition(":")[2] if ":" in last else ""
        if "@sha256:" not in image and tag in ("", "latest"):
            problems.append(f"container {c.get('name')!r} runs {image!r}: pin a tag other than latest, or a digest")
    return problems


def placement_problems(labels: Json, spec: Json) -> list[str]:
    """Training pods keep off the User Node: its label must be absent from their node."""
    if not is_training(labels):
        return []
    problems = []
    for t in spec.get("tolerations") or []:
        if t.get("key") == USER_NODE_KEY or (t.get("operator") == "Exists" and not t.get("key")):
            problems.append(f"a training pod tolerates the User Node taint ({dict(t)})")
    if USER_NODE_KEY in (spec.get("nodeSelector") or {}):
        problems.append("a training pod selects the User Node")
    terms = (
        ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    ).get("nodeSelectorTerms") or []
    keeps_off = bool(terms) and all(
        any(e.get("key") == USER_NODE_KEY and e.get("operator") == "DoesNotExist" for e in term.get("matchExpressions") or [])
        for term in terms
    )
    if not keeps_off:
        problems.append(f"a training pod does not require its node to lack the label {USER_NODE_KEY} (the User Node's)")
    return problems


def _pod_rule(check: Callable[[Json, Json], list[str]]) -> Callable[[ResourceValidationArgs, ReportViolation], None]:
    """`check(labels, spec)` on every pod template of a resource."""

    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        if pod_templates(args.resource_type, {}) is None:
            return
        for where, template in pod_templates(args.resource_type, plain(args.props)) or []:
            for problem in check(template_labels(template), template.get("spec") or {}):
                report_violation(f"{args.name}{f' {where}' if where else ''}: {problem}")

    return validate


# --- mandatory: namespaces, volumes, Services -----------------------------------------------


def namespace_problems(props: Json) -> list[str]:
    labels = (props.get("metadata") or {}).get("labels") or {}
    problems = []
    for mode in ("enforce", "warn", "audit"):
        if labels.get(f"pod-security.kubernetes.io/{mode}") != "restricted":
            problems.append(f"label pod-security.kubernetes.io/{mode} is not restricted")
    return problems


def claim_problems(props: Json) -> list[str]:
    name = (props.get("metadata") or {}).get("name")
    modes = (props.get("spec") or {}).get("accessModes") or []
    if name in SHARED_CLAIMS and modes != ["ReadWriteMany"]:
        return [f"the shared volume {name} has access modes {modes}: every task mounts it, so ReadWriteMany"]
    return []


def service_problems(props: Json) -> list[str]:
    spec = props.get("spec") or {}
    if spec.get("type") in ("NodePort", "LoadBalancer") and spec.get("externalTrafficPolicy") != "Local":
        return [
            f"a {spec.get('type')} Service without externalTrafficPolicy: Local answers on every node: user-facing "
            "Services answer on the User Node alone"
        ]
    return []


def _props_rule(
    check: Callable[[Json], list[str]], resource_type: str
) -> Callable[[ResourceValidationArgs, ReportViolation], None]:
    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        if args.resource_type == resource_type:
            for problem in check(plain(args.props)):
                report_violation(f"{args.name}: {problem}")

    return validate


# --- mandatory: what a stack must hold together ---------------------------------------------


def _selects(selector: Json, labels: Json) -> bool:
    return all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items())


def isolation_problems(resources: list[tuple[str, str, Json]]) -> list[str]:
    """Every namespace a stack creates denies all traffic by default and has a quota; every pod
    template of a stack is selected by a NetworkPolicy of its namespace that is not the default deny.
    `resources` are (type, name, props)."""
    problems = []
    policies = [props for t, _, props in resources if t == NETWORK_POLICY]
    for t, name, props in resources:
        if t != NAMESPACE:
            continue
        namespace = (props.get("metadata") or {}).get("name")
        mine = [p for p in policies if (p.get("metadata") or {}).get("namespace") == namespace]
        deny_all = [
            p
            for p in mine
            if (p.get("spec") or {}).get("podSelector") == {}
            and set((p.get("spec") or {}).get("policyTypes") or []) == {"Ingress", "Egress"}
            and not (p.get("spec") or {}).get("ingress")
            and not (p.get("spec") or {}).get("egress")
        ]
        if not deny_all:
            problems.append(f"namespace {namespace} ({name}) has no NetworkPolicy denying all ingress and egress by default")
        if not [r for r, _, p in resources if r == QUOTA and (p.get("metadata") or {}).get("namespace") == namespace]:
            problems.append(f"namespace {namespace} ({name}) has no ResourceQuota")
    for t, name, props in resources:
        namespace = (props.get("metadata") or {}).get("namespace")
        for where, template in pod_templates(t, props) or []:
            allowing = [
                p
                for p in policies
                if (p.get("metadata") or {}).get("namespace") == namespace
                and (p.get("spec") or {}).get("podSelector")
                and _selects((p.get("spec") or {}).get("podSelector") or {}, template_labels(template))
            ]
            if not allowing:
                problems.append(
                    f"{name}{f' {where}' if where else ''}: no NetworkPolicy of its stack selects its pods (what may they "
                    "reach, and who them?)"
                )
    return problems


def user_node_service_problems(resources: list[tuple[str, str, Json]]) -> list[str]:
    """A NodePort or LoadBalancer Service selects only pods pinned to the User Node."""
    problems = []
    for t, name, props in resources:
        spec = props.get("spec") or {}
        if t != SERVICE or spec.get("type") not in ("NodePort", "LoadBalancer"):
            continue
        selected = [
            template
            for wt, _, wp in resources
            for _, template in pod_templates(wt, wp) or []
            if _selects({"matchLabels": spec.get("selector") or {}}, template_labels(template))
        ]
        for template in selected:
            if USER_NODE_KEY not in ((template.get("spec") or {}).get("nodeSelector") or {}):
                problems.append(f"{name}: a user-facing Service selects pods that are not pinned to the User Node")
    return problems


def _stack_rule(
    check: Callable[[list[tuple[str, str, Json]]], list[str]],
) -> Callable[[StackValidationArgs, ReportViolation], None]:
    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        resources = [(r.resource_type, r.name, plain(r.props)) for r in args.resources]
        for problem in check(resources):
            report_violation(problem)

    return validate


# --- advisory ------------------------------------------------------------------------------


def job_cleanup_problems(props: Json) -> list[str]:
    spec = props.get("spec") or {}
    if spec.get("ttlSecondsAfterFinished") is None:
        return ["no run.ttlSecondsAfterFinished: the finished Job and its pods stay until the experiment is destroyed"]
    return []


def job_deadline_problems(props: Json) -> list[str]:
    if (props.get("spec") or {}).get("activeDeadlineSeconds") is None:
        return ["no run.activeDeadlineSeconds: a hung run holds its quota until someone notices"]
    return []


MANDATORY, ADVISORY = EnforcementLevel.MANDATORY, EnforcementLevel.ADVISORY

POLICIES = [
    ResourceValidationPolicy(
        name="pod-security-restricted",
        description="Every pod passes the restricted Pod Security Standard (non-root, no escalation, no capabilities, seccomp).",
        enforcement_level=MANDATORY,
        validate=_pod_rule(lambda labels, spec: pod_security_problems(spec)),
    ),
    ResourceValidationPolicy(
        name="container-resources",
        description="Every container sets CPU and memory requests and limits (quotas count them; nothing is sized by accident).",
        enforcement_level=MANDATORY,
        validate=_pod_rule(lambda labels, spec: resources_problems(spec)),
    ),
    ResourceValidationPolicy(
        name="no-latest-image",
        description="Every image is pinned to a tag other than latest, or to a digest (a run is reproducible).",
        enforcement_level=MANDATORY,
        validate=_pod_rule(lambda labels, spec: image_problems(spec)),
    ),
    ResourceValidationPolicy(
        name="training-pods-off-the-user-node",
        description="Training pods never tolerate, select or land on the User Node.",
        enforcement_level=MANDATORY,
        validate=_pod_rule(placement_problems),
    ),
    ResourceValidationPolicy(
        name="namespace-pod-security-labels",
        description="Every namespace enforces, warns and audits the restricted Pod Security Standard.",
        enforcement_level=MANDATORY,
        validate=_props_rule(namespace_problems, NAMESPACE),
    ),
    ResourceValidationPolicy(
        name="shared-volumes-read-write-many",
        description="A user's data and log volumes are ReadWriteMany: every task of every experiment mounts them.",
        enforcement_level=MANDATORY,
        validate=_props_rule(claim_problems, CLAIM),
    ),
    ResourceValidationPolicy(
        name="user-facing-services-local",
        description="NodePort and LoadBalancer Services use externalTrafficPolicy: Local (they answer where their pod runs).",
        enforcement_level=MANDATORY,
        validate=_props_rule(service_problems, SERVICE),
    ),
    StackValidationPolicy(
        name="namespaces-isolated",
        description=(
            "Every namespace denies traffic by default and has a quota; every pod is selected by a NetworkPolicy "
            "allowing what it needs."
        ),
        enforcement_level=MANDATORY,
        validate=_stack_rule(isolation_problems),
    ),
    StackValidationPolicy(
        name="user-facing-services-on-the-user-node",
        description="User-facing Services select only pods pinned to the User Node.",
        enforcement_level=MANDATORY,
        validate=_stack_rule(user_node_service_problems),
    ),
    ResourceValidationPolicy(
        name="jobs-cleaned-up",
        description="Training Jobs are deleted some time after they finish (run.ttlSecondsAfterFinished).",
        enforcement_level=ADVISORY,
        validate=_props_rule(job_cleanup_problems, JOB),
    ),
    ResourceValidationPolicy(
        name="jobs-deadline",
        description="Training Jobs have a deadline (run.activeDeadlineSeconds).",
        enforcement_level=ADVISORY,
        validate=_props_rule(job_deadline_problems, JOB),
    ),
]
