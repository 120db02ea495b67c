"""What a request of the Kubernetes API that could not be made raises, whoever made it: the program's
reads (tfk8s.kube.client.KubeApi), and what reads through them (tfk8s.kube.secrets,
tfk8s.stack_kinds.tenant_contract)."""

from __future__ import annotations

from tfk8s.errors import Tfk8sError


class KubeApiError(Tfk8sError):
    """A request tfk8s needed could not be made (for GETs not a 404: that is "absent").

    `status` is the HTTP status when the server answered (403: not allowed, 404: no such API on
    this server), None when it did not.
    """

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status
