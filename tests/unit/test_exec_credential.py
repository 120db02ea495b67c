"""A kubeconfig user's exec plugin (client-go's credential plugin contract), run by tfk8s's own
API client as kubectl runs it: real plugin processes written here, a real HTTP server that sees
the credential (test_kube_api's). The real API server's side: tests/e2e/test_identity.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from api_echo import Server
from tfk8s import errors
from tfk8s.kube import client as kube_client
from tfk8s.kube import exec_credential
from tfk8s.kube.exec_credential import ExecCredentialError

V1 = "client.authentication.k8s.io/v1"
# A plugin that records what it was given (argv, its request, one env value) and prints `answer`.
PLUGIN = """#!{python}
import json, os, sys
info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
with open({record!r}, "w") as out:
    json.dump({{"args": sys.argv[1:], "info": info, "region": os.environ.get("REGION")}}, out)
sys.stderr.write({stderr!r})
print({answer!r})
sys.exit({code})
"""


def plugin(tmp_path: Path, answer: Any, code: int = 0, stderr: str = "") -> tuple[dict[str, Any], Path]:
    """An exec spec of a plugin printing `answer` (JSON unless a string), and the file it records its call in."""
    record = tmp_path / "called.json"
    script = tmp_path / "plugin"
    printed = answer if isinstance(answer, str) else json.dumps(answer)
    script.write_text(PLUGIN.format(python=sys.executable, record=str(record), stderr=stderr, answer=printed, code=code))
    script.chmod(0o755)
    spec = {
        "apiVersion": V1,
        "command": str(script),
        "args": ["token", "--cluster", "c1"],
        "env": [{"name": "REGION", "value": "eu"}],
    }
    return spec, record


def credential(**status: str) -> dict[str, Any]:
    return {"apiVersion": V1, "kind": "ExecCredential", "status": status}


def test_the_plugins_token_is_the_bearer_and_it_runs_once_with_its_args_env_and_request(tmp_path: Path, server: Server) -> None:
    spec, record = plugin(tmp_path, credential(token="t0k3n", expirationTimestamp="2030-01-01T00:00:00Z"))
    spec["provideClusterInfo"] = True
    url = f"http://127.0.0.1:{server.server_address[1]}"
    api = kube_client.KubeApi(url, {"certificate-authority-data": "Q0E="}, {"exec": spec})
    assert (api.get("/version") or {})["authorization"] == "Bearer t0k3n"
    called = json.loads(record.read_text())
    assert called["args"] == ["token", "--cluster", "c1"] and called["region"] == "eu"
    assert called["info"] == {
        "apiVersion": V1,
        "kind": "ExecCredential",
        "spec": {"interactive": False, "cluster": {"server": url, "certificate-authority-data": "Q0E="}},
    }
    record.unlink()
    assert (api.get("/again") or {})["authorization"] == "Bearer t0k3n"
    assert not record.exists(), "the plugin ran again for the second request"


@pytest.mark.parametrize(
    ("answer", "code", "stderr", "message"),
    [
        ({}, 1, "error: token expired; run `aws sso login`\n", r"exited 1: error: token expired; run `aws sso login`"),
        ("not json", 0, "", "printed no ExecCredential JSON"),
        (
            {"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential", "status": {"token": "t"}},
            0,
            "",
            "printed no ExecCredential of client.authentication.k8s.io/v1",
        ),
        (credential(clientCertificateData="PEM"), 0, "", "neither a token nor a client certificate and key"),
    ],
    ids=["fails", "garbage", "other-version", "half-a-certificate"],
)
def test_a_plugin_that_gives_no_credential_is_named_with_why(
    tmp_path: Path, answer: Any, code: int, stderr: str, message: str
) -> None:
    spec, _ = plugin(tmp_path, answer, code, stderr)
    with pytest.raises(ExecCredentialError, match=r"users\[\]\.user\.exec\.command '.*plugin'" + f".*{message}"):
        exec_credential.run(spec, "https://k", {})


def test_an_unknown_api_version_or_a_missing_command_is_refused_before_running_anything(tmp_path: Path) -> None:
    spec, record = plugin(tmp_path, credential(token="t"))
    with pytest.raises(ExecCredentialError, match=r"exec\.apiVersion 'client\.authentication\.k8s\.io/v1alpha1': tfk8s speaks"):
        exec_credential.run({**spec, "apiVersion": "client.authentication.k8s.io/v1alpha1"}, "https://k", {})
    missing = {**spec, "command": "gke-gcloud-auth-plugin-not-here", "installHint": "Install it with gcloud components install."}
    with pytest.raises(ExecCredentialError, match=r"'gke-gcloud-auth-plugin-not-here': not found on PATH \(Install it with"):
        exec_credential.run(missing, "https://k", {})
    assert not record.exists()


def test_a_failing_plugin_stops_the_program_before_anything_is_declared(tmp_path: Path, server: Server) -> None:
    """The provider would run the same plugin and fail alike: say so once, naming it, not later as a 401."""
    spec, _ = plugin(tmp_path, {}, 3, "no credentials\n")
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        json.dumps(
            {
                "current-context": "c",
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{server.server_address[1]}"}}],
                "users": [{"name": "u", "user": {"exec": spec}}],
            }
        )
    )
    with pytest.raises(
        errors.ClusterUnreachable,
        match=r"the kubeconfig's credentials: users\[\]\.user\.exec\.command .* exited 3: no credentials",
    ):
        kube_client.connect({"KUBECONFIG": str(kubeconfig)}, kubeconfig_in_config=False)
