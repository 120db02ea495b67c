"""Whether the current credentials hold what an experiment's identity needs in its tenant's
namespace (the table: tfk8s.specs.experimenter_rights).

Checked on a 1.34 API server: a server-side apply that creates an object is authorized as `patch`
and `create` (also under dry-run, so `preview` needs both), and `get` on `namespaces` in a
RoleBinding's namespace grants GET of that namespace alone.

`missing` asks the API server what the current credentials may do; `refusals` turns the answer into
messages that name the identity, the namespace, the verbs and the fix. Pure: the requests go
through a `post` function (tfk8s.kube.client.KubeApi.post), so tests need neither Pulumi nor a cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tfk8s.specs.experimenter_rights import Permission

Post = Callable[[str, dict[str, Any]], dict[str, Any]]

ACCESS_REVIEW = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
RULES_REVIEW = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews"
# GA in Kubernetes 1.28; older servers answer 404 and refusals say "the kubeconfig's identity".
SUBJECT_REVIEW = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
UNKNOWN_IDENTITY = "the kubeconfig's identity"


@dataclass(frozen=True)
class _Check:
    """One question to the API server: may I `verb` this resource (this object)?"""

    group: str
    resource: str
    verb: str
    name: str | None
    namespaced: bool


def _checks(perm: Permission, verb: str) -> list[_Check]:
    return [_Check(perm.api_group, perm.resource, verb, n, perm.namespaced) for n in perm.resource_names or (None,)]


def _granted_by(rule: dict[str, Any], check: _Check) -> bool:
    """RBAC's own matching: `*` wildcards, `*/sub` for a subresource, resourceNames restricting."""
    resource, _, sub = check.resource.partition("/")
    resources = rule.get("resources") or []
    names = rule.get("resourceNames") or []
    return (
        bool({check.verb, "*"} & set(rule.get("verbs") or []))
        and bool({check.group, "*"} & set(rule.get("apiGroups") or []))
        and ("*" in resources or check.resource in resources or (bool(sub) and f"*/{sub}" in resources))
        and (not names or check.name in names)
    )


def _listed_rules(post: Post, namespace: str) -> list[dict[str, Any]]:
    """The resource rules the API server lists for these credentials in `namespace`; none if it will not say."""
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "spec": {"namespace": namespace}}
    try:
        return list((post(RULES_REVIEW, body).get("status") or {}).get("resourceRules") or [])
    except Exception:  # a shortcut only: without it every check is asked one by one
        return []


def _allowed(post: Post, namespace: str, check: _Check) -> bool:
    resource, _, sub = check.resource.partition("/")
    attributes: dict[str, Any] = {"verb": check.verb, "group": check.group, "resource": resource}
    attributes.update({k: v for k, v in (("subresource", sub), ("name", check.name)) if v})
    if check.namespaced:
        attributes["namespace"] = namespace
    spec = {"resourceAttributes": attributes}
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "spec": spec}
    return bool((post(ACCESS_REVIEW, body).get("status") or {}).get("allowed"))


def missing(post: Post, namespace: str, perms: Sequence[Permission]) -> list[tuple[Permission, str]]:
    """Every (permission, verb) of `perms` the current credentials lack in `namespace`, in table order.

    One SelfSubjectRulesReview first: with RBAC it lists every rule that applies in the namespace,
    so a full grant costs one request. It is only trusted to say yes: what its rules do not show
    (a rule of another authorizer, which makes the review `incomplete`; a cluster-scoped resource,
    which a namespace's rules cannot grant) is asked with one SelfSubjectAccessReview per distinct
    question, the API server's own authorization decision. Errors of those reviews propagate.
    """
    rules = _listed_rules(post, namespace)
    answers: dict[_Check, bool] = {}
    result = []
    for perm in perms:
        for verb in perm.verbs:
            checks = _checks(perm, verb)
            for check in checks:
                if check not in answers:
                    listed = check.namespaced and any(_granted_by(rule, check) for rule in rules)
                    answers[check] = listed or _allowed(post, namespace, check)
            if not all(answers[c] for c in checks):
                result.append((perm, verb))
    return result


def identity(post: Post) -> str:
    """The credentials as refusals name them, `user 'alice' (groups tfk8s-users)`, from a
    SelfSubjectReview; UNKNOWN_IDENTITY where the server has none (before 1.28) or will not say."""
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    try:
        user = (post(SUBJECT_REVIEW, body).get("status") or {}).get("userInfo") or {}
    except Exception:  # a name for messages only: never a reason to fail
        return UNKNOWN_IDENTITY
    if not user.get("username"):
        return UNKNOWN_IDENTITY
    # Every authenticated identity has system:authenticated: it tells no one apart.
    groups = [g for g in user.get("groups") or [] if g != "system:authenticated"]
    return f"user {user['username']!r}" + (f" (groups {', '.join(groups)})" if groups else "")


def _verbs(verbs: Sequence[str]) -> str:
    return verbs[0] if len(verbs) == 1 else f"{', '.join(verbs[:-1])} or {verbs[-1]}"


def refusals(missed: Sequence[tuple[Permission, str]], identity_hint: str, namespace: str, key: str) -> list[str]:
    """One message naming the identity, where, every missing verb and the fix (once): a refusal
    for a namespace that is not the identity's lists the whole table, and a reader needs the fix
    once. With one permission missing, it says what that permission is needed for too.

    `key` is the config key the message starts with (as other refusals do: `tfk8s:user`).
    """
    if not missed:
        return []
    verbs: dict[Permission, list[str]] = {}
    for perm, verb in missed:
        verbs.setdefault(perm, []).append(verb)
    fix = (
        f"ask the platform team to add {identity_hint} to the tenant's identities (tfk8s:tenant.identities) "
        "and `pulumi up` the tenant stack"
    )

    def where(perm: Permission) -> str:
        return "" if perm.namespaced else " cluster-wide"

    lacks = "; ".join(f"{_verbs(vs)} {perm.shown}{where(perm)}" for perm, vs in verbs.items())
    why = (
        f" (needed for {next(iter(verbs)).needed_for})"
        if len(verbs) == 1
        else f" ({len(verbs)} of the experimenter role's rules)"
    )
    place = f" in namespace {namespace!r}" if any(perm.namespaced for perm in verbs) else ""
    return [f"{key}: {identity_hint} may not {lacks}{place}{why}; {fix}"]
