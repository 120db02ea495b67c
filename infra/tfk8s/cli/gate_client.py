"""The requests `tfk8s` makes of a TensorBoard gate's own routes (tfk8s_train.gate_routes), with the
token in the `Authorization` header (never in the address, where logs and proxies would keep it).
Every failure is a GateError that says what happened and what to do."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any, Protocol
from urllib.parse import quote, urlencode

from tfk8s.cli.discovery import Gate

TIMEOUT_SECONDS = 30
CHUNK = 64 * 1024
# Every answer of the gate's own routes starts so; anything else came from TensorBoard.
GATE_TEXT = b"tfk8s:"

Opener = Callable[[urllib.request.Request, float], Any]  # urlopen's shape: a response with .status, .headers, .read()


def opener(request: urllib.request.Request, timeout: float) -> Any:
    return urllib.request.urlopen(request, timeout=timeout)  # http(s) alone: tfk8s.cli.discovery checks the URL


class Sink(Protocol):
    def write(self, data: bytes, /) -> Any: ...

    def flush(self) -> Any: ...


class GateError(Exception):
    """The gate did not give what was asked; `status` is its HTTP status (None: no answer), `own`
    whether the answer was the gate's own (a refusal of its routes) rather than TensorBoard's."""

    def __init__(self, message: str, status: int | None = None, own: bool = False) -> None:
        super().__init__(message)
        self.status, self.own = status, own


def get(gate: Gate, path: str, query: dict[str, str], open_url: Opener = opener) -> Any:
    """The open response to GET `path` at the gate, or a GateError."""
    url = f"{gate.url}{path}" + (f"?{urlencode(query)}" if query else "")
    request = urllib.request.Request(url, headers={"Authorization": f"token {gate.token}"})
    try:
        return open_url(request, TIMEOUT_SECONDS)
    except urllib.error.HTTPError as error:
        body = error.read(4096)
        raise refusal(gate, error.code, body) from None
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        raise GateError(
            f"nothing answers at {gate.url} ({reason}): is the tenant's TensorBoard running and the User Node reachable "
            "from here? (`pulumi stack output readiness` shows its URL; --url overrides it)"
        ) from None


def refusal(gate: Gate, status: int, body: bytes) -> GateError:
    text = body.decode("utf-8", "replace").strip()
    if status == 401:
        return GateError(
            f"the TensorBoard gate at {gate.url} refused the token (401): it is not this tenant's. "
            "Unset TFK8S_TOKEN to read it from the tenant's Secret, or set the right one",
            status,
        )
    if body.startswith(GATE_TEXT):
        return GateError(text.removeprefix("tfk8s:").strip(), status, own=True)
    if status == 404:
        return GateError(
            f"the TensorBoard at {gate.url} answers, but not /tfk8s/: its gate predates `tfk8s status`, or the platform "
            "runs TensorBoard without its gate (platform.tensorboardRequiresToken: false). `pulumi up` the tenant stack "
            "with this version of tfk8s",
            status,
        )
    return GateError(f"the TensorBoard gate at {gate.url} answered HTTP {status}: {text.splitlines()[0] if text else ''}", status)


def status(gate: Gate, open_url: Opener = opener) -> dict[str, Any] | None:
    """The experiment's clusters as the gate summarises them, or None while it has nothing on the log volume."""
    try:
        with get(gate, "/tfk8s/status", {"experiment": gate.experiment}, open_url) as response:
            found = json.loads(response.read())
    except GateError as error:
        if error.status == 404 and error.own:
            return None
        raise
    except ValueError:
        raise GateError(f"the TensorBoard gate at {gate.url} answered /tfk8s/status with no JSON") from None
    experiment: dict[str, Any] = found.get("experiments", {}).get(gate.experiment, {"clusters": {}})
    return {**experiment, "now": found.get("now"), "notes": found.get("notes", [])}


def logs(gate: Gate, cluster: str, task: str, out: Sink, *, run: str | None, tail: int | None, open_url: Opener = opener) -> str:
    """Copy the task's log to `out`, a block at a time; the run it came from."""
    query = {k: v for k, v in (("run", run), ("tail", None if tail is None else str(tail))) if v is not None}
    path = "/tfk8s/logs/" + "/".join(quote(part, safe="") for part in (gate.experiment, cluster, task))
    with get(gate, path, query, open_url) as response:
        while chunk := response.read(CHUNK):
            out.write(chunk)
        return str(response.headers.get("X-Tfk8s-Run") or run or "")
