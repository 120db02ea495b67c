"""A tenant's browser sessions (tfk8s.specs.app_sessions): every tenant's Jupyter and TensorBoard share the
User Node's host name, so each app's session cookie is named after its tenant and bounded in time,
at Jupyter as at the TensorBoard gate."""

from __future__ import annotations

import copy
import json
from typing import Any

import pulumi
import pytest
from mocked_program import CONFIG_MAP, DEPLOYMENT, after, pod_labels, pod_spec, run_program, stack_config


def sessions(d: Any) -> dict[str, Any]:
    """What the tenant's pods say about sessions: Jupyter's server config, as the Jupyter container
    finds it on JUPYTER_CONFIG_PATH, and the TensorBoard gate's flags."""
    deployments = {pod_labels(r)["app.kubernetes.io/name"]: r for r in d.mocks.of_type(DEPLOYMENT)}
    spec = pod_spec(deployments["jupyter"])
    (jupyter,) = spec["containers"]
    config_dir = {e["name"]: e.get("value") for e in jupyter["env"]}["JUPYTER_CONFIG_PATH"]
    (mount,) = [m for m in jupyter["volumeMounts"] if m["mountPath"] == config_dir]
    (volume,) = [v for v in spec["volumes"] if v["name"] == mount["name"]]
    (config_map,) = [r for r in d.mocks.of_type(CONFIG_MAP) if f"{r.name}-auto" == volume["configMap"]["name"]]
    gate = {c["name"]: c for c in pod_spec(deployments["tensorboard"])["containers"]}["token-gate"]
    args = gate["args"]
    return {
        "jupyter": json.loads(config_map.inputs["data"]["jupyter_server_config.json"])["IdentityProvider"],
        "gate": dict(zip(args[::2], args[1::2], strict=True)),
    }


@pytest.mark.parametrize("tenant", ["alice", "bob"])
def test_each_tenants_apps_name_their_session_cookie_after_the_tenant_and_expire_it_alike(tenant: str) -> None:
    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        d = run_program(copy.deepcopy(stack_config(f"tenant-{tenant}")), stack=f"tenant-{tenant}")

        def check() -> None:
            found = sessions(d)
            jupyter, gate = found["jupyter"], found["gate"]
            assert jupyter["cookie_name"] == f"tfk8s-jupyter-{tenant}"
            assert gate["--tenant"] == tenant  # the gate's cookie: tfk8s-tensorboard-<tenant>
            # 12 h at both apps: at the browser (the cookie's expiry) and at the server (a signed timestamp).
            seconds = int(gate["--session-max-age"])
            assert seconds == 12 * 3600
            assert jupyter["cookie_options"]["expires_days"] * 86400 == seconds
            assert jupyter["get_secure_cookie_kwargs"]["max_age_days"] * 86400 == seconds
            assert jupyter["cookie_options"]["samesite"] == "Strict"

        return after(d, check)

    run()
