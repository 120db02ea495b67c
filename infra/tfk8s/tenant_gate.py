"""A tenant's TensorBoard gate, as tfk8s asks it: GET its own routes (tfk8s_train.gate_routes) with
the tenant's token in the `Authorization` header (never in the address, where logs and proxies
would keep it), and what its answers mean.

Two callers ask it: the user's command (`tfk8s status`, `tfk8s logs`: tfk8s.cli) and the experiment
stack's readiness during an `up` (tfk8s.stack_kinds.progress). Each is a `Caller`: how long it waits, and
what its user should do when the gate refuses the token or does not answer. Every failure is a
GateError that says what happened and that fix; none carries the token.
"""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from tfk8s.errors import Tfk8sError

# Every answer of the gate's own routes starts so; anything else came from TensorBoard.
GATE_TEXT = b"tfk8s:"
STATUS = "/tfk8s/status"

Opener = Callable[[urllib.request.Request, float], Any]  # urlopen's shape: a response with .status, .headers, .read()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is answered as a refusal, never followed: urllib would send the request's headers,
    the token's among them, on to wherever the answer points."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def opener(request: urllib.request.Request, timeout: float) -> Any:
    return _OPENER.open(request, timeout=timeout)  # http(s) alone: the callers check the URL


@dataclass(frozen=True)
class Gate:
    url: str  # the gate's base URL, without a trailing slash
    token: str = field(repr=False)
    experiment: str  # the experiment's directory on the log volume


@dataclass(frozen=True, kw_only=True)
class Caller:
    """Who asks: the seconds it waits for the connection, and again for each read of the answer
    (urllib's timeout), and the fixes it gives its user."""

    timeout: float
    token_refused: str  # after "refused the token (401): it is not this tenant's."
    unreachable: str  # after "nothing answers at <url> (<reason>):"


class GateError(Tfk8sError):
    """The gate did not give what was asked; `status` is its HTTP status (None: no answer), `own`
    whether the answer was the gate's own (a refusal of its routes) rather than TensorBoard's."""

    def __init__(self, message: str, status: int | None = None, own: bool = False) -> None:
        super().__init__(message)
        self.status, self.own = status, own


def get(gate: Gate, path: str, query: dict[str, str], caller: Caller, open_url: Opener = opener) -> Any:
    """The open response to GET `path` at the gate, or a GateError."""
    url = f"{gate.url}{path}" + (f"?{urlencode(query)}" if query else "")
    request = urllib.request.Request(url, headers={"Authorization": f"token {gate.token}"})
    try:
        return open_url(request, caller.timeout)
    except urllib.error.HTTPError as error:
        body = error.read(4096)
        raise refusal(gate, error.code, body, caller) from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as error:
        raise unanswered(gate, getattr(error, "reason", error), caller) from None


def unanswered(gate: Gate, reason: object, caller: Caller) -> GateError:
    return GateError(f"nothing answers at {gate.url} ({reason}): {caller.unreachable}")


def refusal(gate: Gate, status: int, body: bytes, caller: Caller) -> GateError:
    text = body.decode("utf-8", "replace").strip()
    if status == 401:
        return GateError(
            f"the TensorBoard gate at {gate.url} refused the token (401): it is not this tenant's. {caller.token_refused}",
            status,
        )
    if 300 <= status < 400:
        return GateError(
            f"the TensorBoard gate at {gate.url} answered with a redirect ({status}); tfk8s does not follow one with "
            "the token. Give the gate's own address (--url, or the tenant's tensorboard URL)",
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


def status(gate: Gate, caller: Caller, open_url: Opener = opener) -> dict[str, Any] | None:
    """The experiment's clusters as the gate summarises them (tfk8s_train.run_status), with the
    gate's `now` and `notes`; None while it has nothing of the experiment on the log volume."""
    try:
        with get(gate, STATUS, {"experiment": gate.experiment}, caller, open_url) as response:
            found = json.loads(response.read())
    except GateError as error:
        if error.status == 404 and error.own:
            return None
        raise
    except (OSError, http.client.HTTPException) as error:  # the answer stopped coming (a read's timeout)
        raise unanswered(gate, error, caller) from None
    except ValueError:
        raise GateError(f"the TensorBoard gate at {gate.url} answered {STATUS} with no JSON") from None
    if not isinstance(found, dict):
        raise GateError(f"the TensorBoard gate at {gate.url} answered {STATUS} with no JSON object")
    experiment: dict[str, Any] = (found.get("experiments") or {}).get(gate.experiment) or {"clusters": {}}
    return {**experiment, "now": found.get("now"), "notes": found.get("notes", [])}
