"""The Kubernetes API as tfk8s reaches it without Pulumi: the cluster of the kubeconfig's current
context (or the pod's own credentials), its credentials, and `KubeApi`, the one HTTP client that
the program's checks, the commands (`tfk8s status`, `logs`, `doctor`) and the component package
read and ask through.

`connect` is the program's first question, before anything is declared: is there a Kubernetes
cluster to talk to, and which version is it? Without it, a stopped or missing cluster surfaces as
the provider's "failed to read resource state due to unreachable cluster" with advice to set
PULUMI_K8S_DELETE_UNREACHABLE, which would drop the stack's resources from its state: the wrong
fix for "the cluster is not started".

It finds the cluster as the default Kubernetes provider does: the `kubernetes:kubeconfig` config
if set (then we trust it), else `KUBECONFIG` (a list of files) or `~/.kube/config`, else in-cluster
credentials (as a GitOps runner pod has). It only opens a TCP connection to the current context's
API server, and reads its `/version` with the kubeconfig's own credentials (client certificate,
token, basic auth, or what its exec plugin prints: tfk8s.kube.exec_credential), so
version-dependent objects follow the server, not a guess.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import re
import socket
import ssl
import tempfile
import threading
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import yaml

from tfk8s.errors import ClusterUnreachable
from tfk8s.kube import exec_credential
from tfk8s.kube.api_error import KubeApiError

CONNECT_TIMEOUT_SECONDS = 3.0
# Request headers in order; a name may repeat (Impersonate-Group).
Headers = list[tuple[str, str]]
# A kubeconfig user's impersonation keys (client-go's), each sent as its header.
IMPERSONATION_KEYS = ("as", "as-uid", "as-groups", "as-user-extra")
METADATA_ONLY = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
FIX = 'start the local cluster (`make cluster`) or point KUBECONFIG at your cluster, then `eval "$(make env)"` again'


def kubeconfig_files(environ: Mapping[str, str]) -> list[Path]:
    listed = environ.get("KUBECONFIG")
    if listed:
        return [Path(p) for p in listed.split(os.pathsep) if p]
    return [Path(environ.get("HOME", str(Path.home()))) / ".kube" / "config"]


@dataclass(frozen=True)
class Cluster:
    """What `connect` learnt: the server's (major, minor) and a reader, when the credentials allow."""

    version: tuple[int, int] | None
    api: KubeApi | None


def connect(environ: Mapping[str, str], kubeconfig_in_config: bool) -> Cluster:
    """Raise ClusterUnreachable with the fix; else the server's version and a reader, if they can be had."""
    if kubeconfig_in_config:
        return Cluster(None, None)
    files = kubeconfig_files(environ)
    present = [f for f in files if f.is_file()]
    if not present:
        if environ.get("KUBERNETES_SERVICE_HOST"):
            return in_cluster(environ)  # in-cluster credentials, as the provider uses them
        shown = os.pathsep.join(str(f) for f in files)
        raise ClusterUnreachable(f"no Kubernetes cluster: the kubeconfig {shown} does not exist; {FIX}")
    documents = [yaml.safe_load(f.read_text()) or {} for f in present]
    server, user, cluster = current_entries(documents)
    if not server:
        raise ClusterUnreachable(f"no current context with a cluster server in {present[0]}; {FIX}")
    url = urlsplit(server)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((url.hostname or "", port), timeout=CONNECT_TIMEOUT_SECONDS).close()
    except OSError as error:
        raise ClusterUnreachable(
            f"the Kubernetes API server {server} (from {present[0]}) does not answer ({error}); {FIX}"
        ) from None
    return _connected(KubeApi(server, cluster, user))


def _connected(api: KubeApi) -> Cluster:
    try:
        body = api.get("/version")
    except KubeApiError:
        return Cluster(None, None)  # credentials tfk8s cannot use: the provider may still
    except exec_credential.ExecCredentialError as error:
        raise ClusterUnreachable(f"the kubeconfig's credentials: {error}") from None  # the provider's plugin would fail alike
    return Cluster(parse_version(body or {}), api)


def current_entries(documents: list[dict[str, Any]]) -> tuple[str | None, dict[str, Any], dict[str, Any]]:
    """(server, user entry, cluster entry) of the current context, the first file winning as in kubectl."""
    backwards = list(reversed(documents))  # later dict entries overwrite earlier ones: walk back to front

    def table(kind: str, field: str) -> dict[str, dict[str, Any]]:
        return {e["name"]: e.get(field) or {} for d in backwards for e in reversed(d.get(kind) or [])}

    current = next((d.get("current-context") for d in documents if d.get("current-context")), None)
    context = table("contexts", "context").get(current or "", {})
    cluster = table("clusters", "cluster").get(context.get("cluster", ""), {})
    return cluster.get("server"), table("users", "user").get(context.get("user", ""), {}), cluster


def _pem(entry: dict[str, Any], key: str, directory: str) -> str | None:
    """A kubeconfig credential as a file path: `key` is a path, `key-data` base64 content."""
    if entry.get(key):
        return str(entry[key])
    if entry.get(f"{key}-data"):
        path = os.path.join(directory, key)
        with open(path, "wb") as out:
            out.write(base64.b64decode(entry[f"{key}-data"]))
        return path
    return None


class KubeApi:
    """Requests with the kubeconfig's own credentials (client certificate, token, basic auth, or
    its exec plugin's: run once, at the first request).

    Reads, and the POSTs of reviews that change nothing (tfk8s.checks.access asks what the credentials
    may do); everything else is the provider's job, except `tfk8s doctor`'s throwaway probe objects
    (tfk8s.doctor.probes, network_probe), which it creates and deletes itself. Every request of a program run goes over one
    kept-alive connection with one TLS context, as kubectl's do: a dozen reads before anything is
    declared would otherwise pay a dozen TCP and TLS handshakes and credential loads. Through the
    proxy the environment names for the server (HTTPS_PROXY, NO_PROXY), as kubectl goes.
    """

    def __init__(self, server: str, cluster: dict[str, Any], user: dict[str, Any]) -> None:
        self.server, self.cluster, self.user = server.rstrip("/"), cluster, user
        self._url = urlsplit(self.server)
        self._tls: ssl.SSLContext | None = None
        self._plugin: exec_credential.Credential | None = None
        self._connection: http.client.HTTPConnection | None = None
        self._lock = threading.Lock()  # one request at a time on the one connection

    def get(self, path: str, *, metadata_only: bool = False) -> dict[str, Any] | None:
        """The JSON at `path`, or None when the object does not exist (404).

        `metadata_only`: the server returns the object's metadata alone (PartialObjectMetadata),
        so an ownership read of a Secret never carries its data.
        """
        accept = f"{METADATA_ONLY},application/json" if metadata_only else "application/json"
        try:
            return self._send("GET", path, {"Accept": accept})
        except KubeApiError as error:
            if error.status == 404:
                return None
            raise

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST `body` as JSON to `path` and return the server's JSON answer (any HTTP error raises)."""
        return self._send("POST", path, {"Content-Type": "application/json"}, json.dumps(body).encode())

    def delete(self, path: str) -> dict[str, Any] | None:
        """DELETE the object at `path` (its dependents in the background); None when it was already gone."""
        body = json.dumps({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}).encode()
        try:
            return self._send("DELETE", path, {"Content-Type": "application/json"}, body)
        except KubeApiError as error:
            if error.status == 404:
                return None
            raise

    def _send(self, method: str, path: str, headers: dict[str, str], data: bytes | None = None) -> dict[str, Any]:
        with self._lock:
            try:
                sent = [*{**self._headers(), **headers}.items(), *self._impersonation()]
                status, reason, body = self._exchange(method, path, sent, data)
            except (OSError, ValueError, ssl.SSLError, http.client.HTTPException) as error:
                raise KubeApiError(f"{method} {path}: {error}") from None
        if status >= 400:
            raise KubeApiError(f"{method} {path}: HTTP {status} {reason}{_status_message(body)}", status)
        try:
            result: dict[str, Any] = json.loads(body)
        except ValueError as error:
            raise KubeApiError(f"{method} {path}: {error}") from None
        return result

    def _exchange(self, method: str, path: str, headers: Headers, data: bytes | None) -> tuple[int, str, bytes]:
        """One request on the kept connection; once more on a new one when the server had closed it
        (an idle keep-alive timeout: these requests change nothing, so a second send is harmless)."""
        try:
            return self._once(method, path, headers, data)
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            return self._once(method, path, headers, data)

    def _once(self, method: str, path: str, headers: Headers, data: bytes | None) -> tuple[int, str, bytes]:
        connection = self._connection or self._connect()
        try:
            # Header by header: impersonation repeats Impersonate-Group, which a dict cannot hold.
            connection.putrequest(method, self._target(path))
            for name, value in headers:
                connection.putheader(name, value)
            if data is not None:
                connection.putheader("Content-Length", str(len(data)))
            connection.endheaders(data)
            response = connection.getresponse()
            body = response.read()
        except BaseException:
            self._close()
            raise
        if response.will_close:
            self._close()
        return response.status, response.reason, body

    def _target(self, path: str) -> str:
        """The request target: the server's own path prefix (a proxying server's) and `path`; the
        whole URL for a plain-HTTP proxy."""
        target = f"{self._url.path}{path}"
        return f"{self._url.scheme}://{self._url.netloc}{target}" if self._proxy() and self._url.scheme == "http" else target

    def _proxy(self) -> tuple[str, int] | None:
        proxy = urllib.request.getproxies().get(self._url.scheme)
        if not proxy or urllib.request.proxy_bypass(self._url.hostname or ""):
            return None
        found = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
        return found.hostname or "", found.port or 80

    def _connect(self) -> http.client.HTTPConnection:
        host, port = self._url.hostname or "", self._url.port or (443 if self._url.scheme == "https" else 80)
        proxy = self._proxy()
        if self._url.scheme == "https":
            connection: http.client.HTTPConnection = http.client.HTTPSConnection(
                *(proxy or (host, port)), timeout=CONNECT_TIMEOUT_SECONDS, context=self._tls_context()
            )
            if proxy:
                connection.set_tunnel(host, port)
        else:
            connection = http.client.HTTPConnection(*(proxy or (host, port)), timeout=CONNECT_TIMEOUT_SECONDS)
        self._connection = connection
        return connection

    def _close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _tls_context(self) -> ssl.SSLContext:
        """The TLS context of every request, made once: inline credentials of the kubeconfig exist
        as files (in a private scratch directory) only while the context loads them."""
        if self._tls is None:
            with tempfile.TemporaryDirectory(prefix="tfk8s-kubeconfig-") as scratch:
                context = ssl.create_default_context(cafile=_pem(self.cluster, "certificate-authority", scratch))
                if self.cluster.get("insecure-skip-tls-verify"):
                    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
                certificate = _pem(self.user, "client-certificate", scratch)
                if certificate:
                    context.load_cert_chain(certificate, _pem(self.user, "client-key", scratch))
                plugin = self._exec()
                if plugin.client_certificate and plugin.client_key:
                    pair = Path(scratch, "exec-certificate"), Path(scratch, "exec-key")
                    pair[0].write_text(plugin.client_certificate)
                    pair[1].write_text(plugin.client_key)
                    context.load_cert_chain(*pair)
            self._tls = context
        return self._tls

    def _exec(self) -> exec_credential.Credential:
        """What the user's exec plugin prints (nothing without one), asked once per KubeApi."""
        if self._plugin is None:
            spec = self.user.get("exec")
            self._plugin = exec_credential.run(spec, self.server, self.cluster) if spec else exec_credential.Credential()
        return self._plugin

    def _impersonation(self) -> Headers:
        """The kubeconfig user's impersonation (`as`, `as-uid`, `as-groups`, `as-user-extra`), as
        kubectl and the provider send it: the reads and reviews ask as the identity the provider
        will act as, not as the credentials' own."""
        user = self.user
        found: Headers = [("Impersonate-User", user["as"])] if user.get("as") else []
        if user.get("as-uid"):
            found.append(("Impersonate-Uid", user["as-uid"]))
        found += [("Impersonate-Group", group) for group in user.get("as-groups") or []]
        found += [
            (f"Impersonate-Extra-{quote(key, safe='')}", value)
            for key, values in (user.get("as-user-extra") or {}).items()
            for value in values
        ]
        return found

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        user = self.user
        token = user.get("token") or (Path(user["tokenFile"]).read_text().strip() if user.get("tokenFile") else None)
        token = token or self._exec().token
        if token:
            headers["Authorization"] = f"Bearer {token}"
        elif user.get("username"):
            basic = base64.b64encode(f"{user['username']}:{user.get('password', '')}".encode()).decode()
            headers["Authorization"] = f"Basic {basic}"
        return headers


def _status_message(body: bytes) -> str:
    """The API server's own words in a refusal (its Status object's message), after a colon; none if it gave none."""
    try:
        message = json.loads(body).get("message")
    except (ValueError, AttributeError):
        return ""
    return f": {message}" if isinstance(message, str) and message else ""


def in_cluster(environ: Mapping[str, str]) -> Cluster:
    account = Path("/var/run/secrets/kubernetes.io/serviceaccount")
    host, port = environ["KUBERNETES_SERVICE_HOST"], environ.get("KUBERNETES_SERVICE_PORT", "443")
    server = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
    token = account / "token"
    return _connected(
        KubeApi(server, {"certificate-authority": str(account / "ca.crt")}, {"tokenFile": str(token)} if token.exists() else {})
    )


def parse_version(body: dict[str, Any]) -> tuple[int, int] | None:
    """`{"major": "1", "minor": "25+"}` (some distributions append "+") -> (1, 25)."""
    major, minor = (re.match(r"\d+", str(body.get(k, ""))) for k in ("major", "minor"))
    return (int(major.group()), int(minor.group())) if major and minor else None
