"""What a tenant's identities may do in its namespace (pure): the platform's experimenter role, and
`get` on their Jupyter token's Secret alone. The UserEnvironment declares the bindings
(tfk8s.components.user_env); the platform defines the role (tfk8s.components.guard)."""

from __future__ import annotations

from typing import Any

from tfk8s.settings.tenant import Identities

RBAC = "rbac.authorization.k8s.io"


def subjects(identities: Identities) -> list[dict[str, str]]:
    """RBAC subjects for the tenant's identities: service accounts as such, everyone else as named."""
    found = []
    for user in identities.users:
        if user.startswith("system:serviceaccount:"):
            namespace, _, name = user.removeprefix("system:serviceaccount:").partition(":")
            found.append({"kind": "ServiceAccount", "name": name, "namespace": namespace})
        else:
            found.append({"kind": "User", "apiGroup": RBAC, "name": user})
    found += [{"kind": "Group", "apiGroup": RBAC, "name": group} for group in identities.groups]
    return found


def role_ref(kind: str, name: Any) -> dict[str, Any]:
    """A binding's `roleRef` (`name`: the role's name, or the Pulumi output of it)."""
    return {"apiGroup": RBAC, "kind": kind, "name": name}


def secret_reader_rules(secret: str) -> list[dict[str, Any]]:
    """`get` on the one Secret named `secret`, and on no other."""
    return [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": [secret]}]
