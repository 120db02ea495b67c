"""The identity a pull request's preview runs as: it may look, and dry-run, and nothing else (pure).

A pull request's program is its author's code, run by the preview workflow before anyone merged
it. With the team's credentials it could change the cluster or read any Secret; with this identity
(`platform.gitops.previewIdentity`) the API server itself holds it to what a preview does:

  * RBAC: in each tenant's namespace (the tenant stack binds the preview ClusterRole there, as
    it binds the experimenter role to its people) what an experiment's `pulumi preview` reads and
    writes: what the program needs of the experimenter's table (tfk8s.specs.experimenter_rights:
    `program_rules`), which holds no Secret, no pods/exec or pods/attach, and not pods/log (a tenant's
    logs are hers). Nothing outside tenants' namespaces, and no impersonation: a preview is asked as
    this identity, never as a stack's own;
  * admission: `dry_run_only` refuses every create, update, delete and connect it sends that is not
    a dry run (pulumi-kubernetes previews with server-side apply dry runs, `dryRun=All`, which
    persist nothing and reach no webhook with side effects). A dry run's answer is the object as it
    would be, which the identity may read anyway: no Secret is among its kinds.

The tenants' own admission policies bind it as they bind a tenant's people, so a preview is refused
what her `up` would be.
"""

from __future__ import annotations

from typing import Any

from tfk8s.settings.tenant import GITOPS_NAMESPACE, PREVIEW_ACCOUNT, SERVICE_ACCOUNT_PREFIX

USER = f"{SERVICE_ACCOUNT_PREFIX}{GITOPS_NAMESPACE}:{PREVIEW_ACCOUNT}"
WRITES = ("CREATE", "UPDATE", "DELETE", "CONNECT")


def subject() -> dict[str, str]:
    """The RoleBinding subject a tenant binds the preview role to."""
    return {"kind": "ServiceAccount", "name": PREVIEW_ACCOUNT, "namespace": GITOPS_NAMESPACE}


def dry_run_only() -> dict[str, Any]:
    """A ValidatingAdmissionPolicy's spec: any write of the preview identity's that is not a dry run,
    on any kind or subresource in any namespace, is refused (failurePolicy Fail: an error refuses too)."""
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "resourceRules": [{"apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*/*"], "operations": list(WRITES)}]
        },
        "matchConditions": [{"name": "the-preview-identity", "expression": f"request.userInfo.username == '{USER}'"}],
        "validations": [
            {
                "expression": "request.dryRun == true",
                "messageExpression": (
                    f"'{USER}, the identity of pull requests\\' previews, may only dry-run: ' + request.operation + "
                    "' of ' + request.resource.resource + ' refused (run `pulumi up` from the merged branch)'"
                ),
                "reason": "Forbidden",
            }
        ],
    }
