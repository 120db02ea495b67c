"""How a tenant's browser sessions at its Jupyter and TensorBoard are scoped (pure builders).

Every tenant's apps answer on NodePorts of one User Node: one host name for all of them, and a
browser sends a host's cookies to every port of it. So each app's session cookie is named after
the tenant, bound to the tenant's own secret, and expires: another tenant's app receives it but can
never use it as its own session (README "Security model" says what that does not cover).
"""

from __future__ import annotations

# How long a browser session lasts at a tenant's apps before they ask for the token again.
SESSION_SECONDS = 12 * 3600


def gate_args(tenant: str, *, listen: int, backend: str) -> list[str]:
    """The TensorBoard gate's flags (tfk8s_train.token_gate): its cookie is `tfk8s-tensorboard-<tenant>`."""
    return ["--listen", str(listen), "--backend", backend, "--tenant", tenant, "--session-max-age", str(SESSION_SECONDS)]
