"""Where an experiment's TensorBoard gate answers and the token it asks for, found from what the user
already has: her experiment stack (its outputs and config, through the `pulumi` CLI in her
environment) and her kubeconfig (her tenant's contract and token Secret, which her identities may
read: tfk8s.specs.tenant_access). Flags and environment variables come first:

  URL         --url, $TFK8S_TENSORBOARD_URL, the stack's `readiness.tensorboard` output, the tenant
              contract's `tensorboardUrl` (tfk8s.stack_kinds.tenant_contract)
  token       $TFK8S_TOKEN, the tenant's Secret `tfk8s-jupyter-token` (never printed, never a flag:
              a flag would show in `ps` and the shell's history)
  namespace   --namespace, $TFK8S_NAMESPACE, the stack's `tfk8s:namespace`
  experiment  the stack's `experiment` output (its log directory), else the stack's name

Every failure is a DiscoveryError whose message names what is missing and the fix.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from tfk8s.checks import access
from tfk8s.errors import Tfk8sError
from tfk8s.kube import client as kube_client
from tfk8s.kube import secrets
from tfk8s.specs.app_sessions import TOKEN_KEY, TOKEN_SECRET
from tfk8s.stack_kinds import tenant_contract
from tfk8s.tenant_gate import Gate

NAMESPACE_KEY = "tfk8s:namespace"
PULUMI_TIMEOUT_SECONDS = 120
PULUMI_FIX = (
    "run tfk8s where `pulumi stack output --stack <stack>` works (your environment: "
    'eval "$(hack/env.sh --tenant <you>)", and --cwd the project), or give --url and set TFK8S_TOKEN'
)


class DiscoveryError(Tfk8sError):
    """What could not be found, and the fix."""


class Api(Protocol):
    def get(self, path: str, *, metadata_only: bool = False) -> dict[str, Any] | None: ...

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]: ...


Run = Callable[[Sequence[str]], tuple[int, str, str]]  # pulumi's arguments -> (exit code, stdout, stderr)


def pulumi_runner(cwd: Path) -> Run:
    """`pulumi <args>` in the project at `cwd`, in this environment."""

    def run(args: Sequence[str]) -> tuple[int, str, str]:
        try:
            done = subprocess.run(
                ["pulumi", *args], cwd=cwd, capture_output=True, text=True, timeout=PULUMI_TIMEOUT_SECONDS, check=False
            )
        except FileNotFoundError:
            raise DiscoveryError(f"`pulumi` is not on PATH; {PULUMI_FIX}") from None
        except subprocess.TimeoutExpired:
            raise DiscoveryError(f"`pulumi {' '.join(args)}` took over {PULUMI_TIMEOUT_SECONDS} s; {PULUMI_FIX}") from None
        return done.returncode, done.stdout, done.stderr

    return run


def kube_api(environ: Mapping[str, str]) -> Api:
    """The API server of the kubeconfig's current context, with its credentials (tfk8s.kube.client)."""
    try:
        cluster = kube_client.connect(environ, kubeconfig_in_config=False)
    except Tfk8sError as error:
        raise DiscoveryError(f"{error}; or set TFK8S_TOKEN (and --url)") from None
    if cluster.api is None:
        raise DiscoveryError("the kubeconfig's credentials cannot be used by tfk8s (set KUBECONFIG to yours), or set TFK8S_TOKEN")
    return cluster.api


class Discovery:
    """What `stack` needs to reach its gate; each fact is looked up once, when first needed."""

    def __init__(
        self,
        stack: str,
        *,
        environ: Mapping[str, str],
        run: Run,
        connect: Callable[[], Api],
        url: str | None = None,
        namespace: str | None = None,
    ) -> None:
        self.stack, self.environ, self._run, self._connect = stack, environ, run, connect
        self._url = url or environ.get("TFK8S_TENSORBOARD_URL") or None
        self._namespace = namespace or environ.get("TFK8S_NAMESPACE") or None
        self._outputs: dict[str, Any] | None = None
        self._api: Api | None = None

    def gate(self) -> Gate:
        return Gate(url=self.url(), token=self.token(), experiment=self.experiment())

    def pulumi(self, *args: str) -> str:
        code, out, err = self._run([*args, "--stack", self.stack])
        if code != 0:
            said = (err.strip() or out.strip() or f"exit code {code}").splitlines()[-1]
            raise DiscoveryError(f"`pulumi {' '.join(args)} --stack {self.stack}` failed: {said}; {PULUMI_FIX}")
        return out

    def outputs(self) -> dict[str, Any]:
        if self._outputs is None:
            text = self.pulumi("stack", "output", "--json")
            try:
                found = json.loads(text)
            except ValueError:
                raise DiscoveryError(f"`pulumi stack output --json --stack {self.stack}` printed no JSON; {PULUMI_FIX}") from None
            self._outputs = found if isinstance(found, dict) else {}
        return self._outputs

    def experiment(self) -> str:
        """The experiment's name on the log volume: its stack's `experiment` output, else the stack's name
        (what a stack without `tfk8s:experiment` is named after) when its outputs are not needed."""
        try:
            name = self.outputs().get("experiment")
        except DiscoveryError:
            if self._url and self.environ.get("TFK8S_TOKEN"):
                return self.stack
            raise
        if not isinstance(name, str) or not name:
            raise DiscoveryError(
                f"stack {self.stack!r} has no `experiment` output: is it an experiment stack? `pulumi up` it first"
            )
        return name

    def namespace(self) -> str:
        if self._namespace is None:
            self._namespace = self.pulumi("config", "get", NAMESPACE_KEY).strip()
        return self._namespace

    def api(self) -> Api:
        if self._api is None:
            self._api = self._connect()
        return self._api

    def url(self) -> str:
        url = self._url or self._url_from_stack()
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise DiscoveryError(f"TensorBoard URL {url!r}: must be http(s)://host:port/ (--url, TFK8S_TENSORBOARD_URL)")
        return url.rstrip("/")

    def _url_from_stack(self) -> str:
        readiness = self.outputs().get("readiness")
        linked = readiness.get("tensorboard") if isinstance(readiness, dict) else None
        if isinstance(linked, str) and linked:
            return linked
        namespace = self.namespace()
        try:
            tenant, platform = tenant_contract.read(namespace, self.api().get, self._identity)
        except Tfk8sError as error:  # the contract unreadable, the API's failure among them
            raise DiscoveryError(f"the stack has no TensorBoard URL, nor could its tenant's contract give one: {error}") from None
        if not platform.tensorboard_requires_token:
            raise DiscoveryError(
                "your platform runs TensorBoard without its token gate (platform.tensorboardRequiresToken: false), "
                "and progress and logs are served by the gate alone: ask the platform team to turn the gate on"
            )
        if not tenant.tensorboard_url:
            raise DiscoveryError(
                f"no TensorBoard URL for {namespace!r} yet (its NodePort or the User Node's address is unknown): "
                "`pulumi up --refresh` the stack once TensorBoard runs, or give --url"
            )
        return tenant.tensorboard_url

    def token(self) -> str:
        token = self.environ.get("TFK8S_TOKEN")
        if token:
            return token
        namespace = self.namespace()
        try:
            return secrets.read_value(self.api().get, TOKEN_SECRET, namespace, TOKEN_KEY)
        except secrets.SecretUnreadable as error:
            if error.reason == "forbidden":
                raise DiscoveryError(
                    f"{self._identity()} may not read the token ({error.where}): it is not one of that tenant's "
                    "identities. Use your own tenant's namespace (--namespace), or set TFK8S_TOKEN"
                ) from None
            fix = {
                "absent": ": `pulumi up` the tenant stack first, or fix --namespace",
                "no-key": ": `pulumi up` the tenant stack again",
            }.get(error.reason, "; or set TFK8S_TOKEN")
            raise DiscoveryError(f"{error}{fix}") from None

    def _identity(self) -> str:
        return access.identity(self.api().post)
