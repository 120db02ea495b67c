"""How a tenant's browser sessions at its Jupyter and TensorBoard are scoped (pure builders).

Every tenant's apps answer on NodePorts of one User Node: one host name for all of them, and a
browser sends a host's cookies to every port of it. So each app's session cookie is named after
the tenant, valid at that app alone, and expires; and the token is no process's environment
variable in Jupyter, whose kernels run the tenant's code and inherit its environment:

  * TensorBoard's gate (tfk8s_train.token_gate): `tfk8s-tensorboard-<tenant>`, an HMAC of the
    tenant's token over the tenant's name and the expiry, checked by the gate.
  * Jupyter: `tfk8s-jupyter-<tenant>` (jupyter_server's IdentityProvider.cookie_name), signed with
    that server's own cookie secret; its expiry is set on the cookie and checked by the server
    (cookie_options, get_secure_cookie_kwargs, tornado's), from a config file on
    JUPYTER_CONFIG_PATH, the first place Jupyter reads config from, whatever the image. The token
    comes from a file of the tenant's Secret (JUPYTER_TOKEN_FILE, read once at start), not
    JUPYTER_TOKEN.

jupyter_server >= 2.19 (jupyterlab 4.6's floor, the `notebook` extra) has all of these.
"""

from __future__ import annotations

import json
from typing import Any

# The Secret holding the tenant's token (Jupyter's and the TensorBoard gate's), and its key: the
# tenant's identities may read it (tfk8s.components.user_env), as `tfk8s status` does (tfk8s.cli).
TOKEN_SECRET, TOKEN_KEY = "tfk8s-jupyter-token", "token"
# How long a browser session lasts at a tenant's apps before they ask for the token again.
SESSION_SECONDS = 12 * 3600
# Where Jupyter finds its config and its token: the pod's own mounts, read-only.
JUPYTER_CONFIG_DIR = "/etc/tfk8s/jupyter"
JUPYTER_TOKEN_DIR, JUPYTER_TOKEN_FILE = "/etc/tfk8s/jupyter-token", "token"


def gate_args(tenant: str, *, listen: int, backend: str, log_root: str) -> list[str]:
    """The TensorBoard gate's flags (tfk8s_train.token_gate): its cookie is `tfk8s-tensorboard-<tenant>`;
    it serves the tenant's progress and task logs from `log_root` (tfk8s_train.gate_routes)."""
    session = ["--tenant", tenant, "--session-max-age", str(SESSION_SECONDS)]
    return ["--listen", str(listen), "--backend", backend, *session, "--log-root", log_root]


def jupyter_server_config(tenant: str) -> dict[str, Any]:
    """jupyter_server's config: the login cookie named after the tenant, expiring at the browser
    (tornado's set_secure_cookie: `expires_days`, `samesite`) and at the server, which refuses a
    cookie signed longer ago (get_secure_cookie: `max_age_days`)."""
    days = SESSION_SECONDS / 86400
    return {
        "IdentityProvider": {
            "cookie_name": f"tfk8s-jupyter-{tenant}",
            "cookie_options": {"expires_days": days, "samesite": "Strict"},
            "get_secure_cookie_kwargs": {"max_age_days": days},
        }
    }


def jupyter_config_files(tenant: str) -> dict[str, str]:
    """The ConfigMap's data: one file Jupyter reads from JUPYTER_CONFIG_PATH."""
    return {"jupyter_server_config.json": json.dumps(jupyter_server_config(tenant), indent=2, sort_keys=True) + "\n"}


def jupyter_env() -> list[dict[str, str]]:
    return [
        {"name": "JUPYTER_CONFIG_PATH", "value": JUPYTER_CONFIG_DIR},
        # A path, not the token: kernels inherit the server's environment (they can still read the
        # file and Jupyter's runtime files, as the tenant's own code may; nothing copies it about).
        {"name": "JUPYTER_TOKEN_FILE", "value": f"{JUPYTER_TOKEN_DIR}/{JUPYTER_TOKEN_FILE}"},
    ]


def jupyter_mounts() -> list[dict[str, Any]]:
    return [
        {"name": "jupyter-config", "mountPath": JUPYTER_CONFIG_DIR, "readOnly": True},
        {"name": "jupyter-token", "mountPath": JUPYTER_TOKEN_DIR, "readOnly": True},
    ]


def jupyter_volumes(*, config_map: Any, secret: Any, key: str) -> list[dict[str, Any]]:
    """The config ConfigMap, and the one key of the token Secret as the file JUPYTER_TOKEN_FILE
    names (read by the pod's user and group alone)."""
    return [
        {"name": "jupyter-config", "configMap": {"name": config_map}},
        {
            "name": "jupyter-token",
            "secret": {"secretName": secret, "items": [{"key": key, "path": JUPYTER_TOKEN_FILE}], "defaultMode": 0o440},
        },
    ]
