"""What `tfk8s` asks of a TensorBoard gate (tfk8s.tenant_gate), as the user's command: its patience,
the fixes it gives her (her TFK8S_TOKEN, --url), and `tfk8s logs`' copy of a task's log."""

from __future__ import annotations

from typing import Any, Protocol
from urllib.parse import quote

from tfk8s import tenant_gate
from tfk8s.tenant_gate import Gate, Opener, opener

# A user waits for her answer: a busy gate reading a large log volume is still worth it.
TIMEOUT_SECONDS = 30
CHUNK = 64 * 1024
CALLER = tenant_gate.Caller(
    timeout=TIMEOUT_SECONDS,
    token_refused="Unset TFK8S_TOKEN to read it from the tenant's Secret, or set the right one",
    unreachable=(
        "is the tenant's TensorBoard running and the User Node reachable from here? "
        "(`pulumi stack output readiness` shows its URL; --url overrides it)"
    ),
)


class Sink(Protocol):
    def write(self, data: bytes, /) -> Any: ...

    def flush(self) -> Any: ...


def status(gate: Gate, open_url: Opener = opener) -> dict[str, Any] | None:
    """The experiment's clusters as the gate summarises them, or None while it has nothing on the log volume."""
    return tenant_gate.status(gate, CALLER, open_url)


def logs(gate: Gate, cluster: str, task: str, out: Sink, *, run: str | None, tail: int | None, open_url: Opener = opener) -> str:
    """Copy the task's log to `out`, a block at a time; the run it came from."""
    query = {k: v for k, v in (("run", run), ("tail", None if tail is None else str(tail))) if v is not None}
    path = "/tfk8s/logs/" + "/".join(quote(part, safe="") for part in (gate.experiment, cluster, task))
    with tenant_gate.get(gate, path, query, CALLER, open_url) as response:
        while chunk := response.read(CHUNK):
            out.write(chunk)
        return str(response.headers.get("X-Tfk8s-Run") or run or "")
