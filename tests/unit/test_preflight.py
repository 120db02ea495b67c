"""The cluster preflight (tfk8s.kube.client.connect): a missing or silent cluster is one message
naming the kubeconfig and the fix."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from tfk8s.errors import ClusterUnreachable
from tfk8s.kube.client import connect


def kubeconfig(path: Path, server: str) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "current-context": "here",
                "contexts": [{"name": "here", "context": {"cluster": "c"}}],
                "clusters": [{"name": "c", "cluster": {"server": server}}],
            }
        )
    )
    return path


@pytest.fixture
def listening() -> Iterator[int]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    yield server.getsockname()[1]
    server.close()


def test_a_missing_kubeconfig_names_the_file_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(
        ClusterUnreachable, match=r"the kubeconfig .*/nope does not exist; start the local cluster \(`make cluster`\)"
    ):
        connect({"KUBECONFIG": str(tmp_path / "nope")}, kubeconfig_in_config=False)


def test_a_silent_api_server_is_named(tmp_path: Path) -> None:
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()  # nothing listens there now
    path = kubeconfig(tmp_path / "config", f"https://127.0.0.1:{port}")
    with pytest.raises(ClusterUnreachable, match=rf"API server https://127.0.0.1:{port} \(from {path}\) does not answer"):
        connect({"KUBECONFIG": str(path)}, kubeconfig_in_config=False)


def test_a_listening_server_passes_and_files_merge_first_wins(tmp_path: Path, listening: int) -> None:
    first = kubeconfig(tmp_path / "a", f"https://127.0.0.1:{listening}")
    second = kubeconfig(tmp_path / "b", "https://127.0.0.1:1")
    connect({"KUBECONFIG": f"{first}:{tmp_path / 'missing'}:{second}"}, kubeconfig_in_config=False)


def test_in_cluster_credentials_and_provider_config_are_trusted(tmp_path: Path) -> None:
    connect({"KUBECONFIG": "", "HOME": str(tmp_path), "KUBERNETES_SERVICE_HOST": "10.0.0.1"}, kubeconfig_in_config=False)
    connect({"KUBECONFIG": str(tmp_path / "nope")}, kubeconfig_in_config=True)
    with pytest.raises(ClusterUnreachable):
        connect({"HOME": str(tmp_path)}, kubeconfig_in_config=False)  # ~/.kube/config missing, not in a pod
