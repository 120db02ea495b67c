"""The program's own requests to the API server (tfk8s.kube.client.KubeApi): one kept-alive connection
for a run's dozen reads, a new one when the server closed it, the same answers as before."""

from __future__ import annotations

import pytest
from api_echo import Server
from tfk8s.kube.api_error import KubeApiError
from tfk8s.kube.client import KubeApi


def _api(server: Server, prefix: str = "") -> KubeApi:
    return KubeApi(f"http://127.0.0.1:{server.server_address[1]}{prefix}", {}, {})


def test_a_runs_reads_share_one_connection(server: Server) -> None:
    api = _api(server)
    answers = [api.get(f"/api/v1/namespaces/n{i}", metadata_only=True) for i in range(5)]
    assert [a["path"] for a in answers if a] == [f"/api/v1/namespaces/n{i}" for i in range(5)]
    assert all(a and a["accept"].startswith("application/json;as=PartialObjectMetadata") for a in answers)
    assert server.connections == 1


def test_a_connection_the_server_closed_is_replaced(server: Server) -> None:
    server.close_after_first = True
    api = _api(server)
    assert [api.get(f"/p{i}") for i in range(3)] == [{"path": f"/p{i}", "accept": "application/json"} for i in range(3)]
    assert server.connections == 3


def test_absent_is_none_and_refused_names_the_status(server: Server) -> None:
    api = _api(server)
    assert api.get("/missing") is None
    with pytest.raises(KubeApiError) as refused:
        api.get("/forbidden")
    assert refused.value.status == 403 and "GET /forbidden: HTTP 403" in str(refused.value)
    assert api.get("/after")  # the connection survives an error answer


def test_a_servers_path_prefix_is_kept(server: Server) -> None:
    answer = _api(server, "/k8s/clusters/c-1").get("/version")
    assert answer and answer["path"] == "/k8s/clusters/c-1/version"


def test_no_server_is_an_error_without_status() -> None:
    with pytest.raises(KubeApiError) as failed:
        KubeApi("http://127.0.0.1:9", {}, {}).get("/version")
    assert failed.value.status is None


def test_a_kubeconfig_users_impersonation_is_sent_as_kubectl_sends_it(server: Server) -> None:
    """The reads and reviews ask as the identity the provider will act as: `as`, `as-uid`, each of
    `as-groups` in a header of its own, `as-user-extra` percent-encoded; none without them."""
    user = {
        "token": "t",
        "as": "system:serviceaccount:tfk8s-gitops:tfk8s-exp",
        "as-uid": "u-1",
        "as-groups": ["tenants", "system:authenticated"],
        "as-user-extra": {"scopes/x": ["a", "b"]},
    }
    api = KubeApi(f"http://127.0.0.1:{server.server_address[1]}", {}, user)
    assert (api.get("/version") or {})["impersonation"] == [
        ["Impersonate-User", "system:serviceaccount:tfk8s-gitops:tfk8s-exp"],
        ["Impersonate-Uid", "u-1"],
        ["Impersonate-Group", "tenants"],
        ["Impersonate-Group", "system:authenticated"],
        ["Impersonate-Extra-scopes%2Fx", "a"],
        ["Impersonate-Extra-scopes%2Fx", "b"],
    ]
    assert "impersonation" not in (_api(server).get("/version") or {})
