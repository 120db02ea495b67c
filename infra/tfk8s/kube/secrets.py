"""One value of a Secret, read with the caller's own Kubernetes credentials.

How a tenant's token reaches whoever asks her TensorBoard gate for progress: `tfk8s status`
(tfk8s.cli.discovery) and the experiment stack's readiness (tfk8s.stack_kinds.progress) read it from
the tenant's Secret with the kubeconfig of the user running them (her identities may `get` that one
Secret: tfk8s.specs.tenant_access), never from a stack's outputs. The value is returned, never
logged or put in a message.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Mapping
from typing import Any, Literal

from tfk8s.errors import Tfk8sError
from tfk8s.kube.api_error import KubeApiError
from tfk8s.kube.api_paths import SECRET

# GET an API path: the object, None when it does not exist (404), a KubeApiError when the request
# failed (tfk8s.kube.client.KubeApi.get, and the program's `read_whole`).
Get = Callable[[str], Mapping[str, Any] | None]

Reason = Literal["forbidden", "absent", "no-key", "failed"]


class SecretUnreadable(Tfk8sError):
    """Why the value could not be had: `reason` (`forbidden`: the credentials may not get the
    Secret; `absent`: no such Secret; `no-key`: it holds no such key; `failed`: the request failed),
    `where` names the Secret. The message says what happened; the caller adds the fix."""

    def __init__(self, message: str, *, where: str, reason: Reason) -> None:
        super().__init__(message)
        self.where, self.reason = where, reason


def where(name: str, namespace: str) -> str:
    return f"Secret {name} in namespace {namespace!r}"


def read_value(get: Get, name: str, namespace: str, key: str) -> str:
    """The value under `key` of Secret `name` (its data is base64), or SecretUnreadable."""
    found = where(name, namespace)
    try:
        secret = get(SECRET.path(name, namespace))
    except KubeApiError as error:
        reason: Reason = "forbidden" if error.status == 403 else "failed"
        raise SecretUnreadable(f"{found} could not be read: {error}", where=found, reason=reason) from None
    if secret is None:
        raise SecretUnreadable(f"no {found}", where=found, reason="absent")
    try:
        return base64.b64decode((secret.get("data") or {})[key], validate=True).decode()
    except (KeyError, TypeError, binascii.Error, UnicodeDecodeError):
        raise SecretUnreadable(f"{found} holds no `{key}`", where=found, reason="no-key") from None
