"""Each training cluster's progress in the experiment stack's `readiness`, after `pulumi up --refresh`
(docs/guide/status.md): read during a real `up`, never in a preview, from the tenant's TensorBoard
gate as `tfk8s status` reads it (tfk8s.tenant_gate), with the tenant's token, which the identity
running `up` reads from her Secret with its own credentials (tfk8s.kube.secrets).

It never fails the `up`: what cannot be read is `{"unknown": "<why, and the fix>"}`. The token
stays in the thread that asks the gate: it is never exported, logged, or put in a message.

What it costs: nothing without a TensorBoard URL (the local kwok demo's User Node has no address),
not even a request; else one read of the Secret on the program's kept-alive connection and one GET
of the gate, in a thread of their own while the engine registers the experiment's resources, so
readiness waits for them ~1 s at most when the gate does not answer (TIMEOUT_SECONDS).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar
from urllib.parse import urlsplit

import pulumi

from tfk8s import pulumi_internals, tenant_gate
from tfk8s.kube import secrets
from tfk8s.settings.contract import PlatformFacts, TenantFacts
from tfk8s.specs import readiness
from tfk8s.specs.app_sessions import TOKEN_KEY, TOKEN_SECRET

T = TypeVar("T")

# Half a second to connect, and again for the answer (urllib's timeout is per blocking operation):
# the gate runs on the User Node, one hop from where `pulumi up` runs, and answers /tfk8s/status in
# milliseconds (it reads the newest runs' small progress files: tfk8s_train.run_status). A gate
# silent for that long is down or unreachable, and waiting longer would only hold the `up` (the
# project's goal: a new experiment's `up` within 0.1 s of Pulumi's floor); so ~1 s at most, then
# `unknown`. `tfk8s status` waits 30 s (tfk8s.cli.gate_client). The URL's host is the User Node's
# address, its InternalIP unless the platform names another (a name's lookup is not bounded by this).
TIMEOUT_SECONDS = 0.5
CALLER = tenant_gate.Caller(
    timeout=TIMEOUT_SECONDS,
    token_refused=(
        f"The tenant's Secret {TOKEN_SECRET} holds another token than the one her TensorBoard's gate started with "
        "(it was changed since): restart that TensorBoard so its gate reads the Secret again"
    ),
    unreachable=(
        "is the tenant's TensorBoard running, and its User Node reachable from where `pulumi up` runs? "
        f"(readiness waits {TIMEOUT_SECONDS} s for it; `tfk8s status` waits longer)"
    ),
)


def unavailable(platform: PlatformFacts, tenant: TenantFacts, stack: str) -> str | None:
    """Why no gate can be asked, known without asking anything; None when one can."""
    if not platform.tensorboard_requires_token:
        return (
            "this platform runs TensorBoard without its token gate (platform.tensorboardRequiresToken: false), and "
            "progress is served by the gate alone: ask the platform team to turn it on"
        )
    url = tenant.tensorboard_url
    if not url:
        return (
            f"tenant {tenant.name!r} has no TensorBoard URL: its User Node has no address (the local kwok demo's has "
            "none: set tfk8s:platform.userNode.address in the platform stack), or its TensorBoard no NodePort yet. "
            f"`pulumi up` the tenant stack once it has one, then this one; or `tfk8s status --stack {stack} --url <URL>`"
        )
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return f"tenant {tenant.name!r}'s TensorBoard URL {url!r} is not http(s)://host:port/: `pulumi up` the tenant stack again"
    return None


def read(
    experiment: str,
    clusters: Sequence[str],
    tenant: TenantFacts,
    stack: str,
    read_whole: secrets.Get,
    open_url: tenant_gate.Opener = tenant_gate.opener,
) -> dict[str, dict[str, Any]]:
    """Each cluster's progress or `unknown`, read now (blocking; never raises). The tenant has a
    TensorBoard URL (`unavailable` said None)."""
    try:
        return _read(experiment, clusters, tenant, stack, read_whole, open_url)
    except Exception as error:  # noqa: BLE001 -- readiness reports; it never fails the `up`
        # Not the error's text: nothing of this read may carry the token out, not even by accident.
        return readiness.unknown_progress(
            clusters, f"progress could not be read ({type(error).__name__}): `tfk8s status --stack {stack}` says why"
        )


def _read(
    experiment: str,
    clusters: Sequence[str],
    tenant: TenantFacts,
    stack: str,
    read_whole: secrets.Get,
    open_url: tenant_gate.Opener,
) -> dict[str, dict[str, Any]]:
    try:
        token = secrets.read_value(read_whole, TOKEN_SECRET, tenant.namespace, TOKEN_KEY)
    except secrets.SecretUnreadable as error:
        return readiness.unknown_progress(clusters, _token_fix(error, tenant, stack))
    gate = tenant_gate.Gate(url=str(tenant.tensorboard_url).rstrip("/"), token=token, experiment=experiment)
    try:
        summary = tenant_gate.status(gate, CALLER, open_url)
    except tenant_gate.GateError as error:
        return readiness.unknown_progress(clusters, str(error))
    none_yet = (
        "no progress on the log volume yet: its tasks write it once they start. `pulumi up --refresh` again, "
        f"or follow it with `tfk8s status --stack {stack} --watch`"
    )
    return readiness.clusters_progress(clusters, summary, none_yet)


def _token_fix(error: secrets.SecretUnreadable, tenant: TenantFacts, stack: str) -> str:
    """What to do when the token could not be read, by why."""
    if error.reason == "forbidden":
        return (
            f"the tenant's token ({error.where}) may not be read by the identity running `pulumi up`: it is not one of "
            f"tenant {tenant.name!r}'s identities. Run `up` as one of them, or see progress with "
            f"`tfk8s status --stack {stack}` and TFK8S_TOKEN"
        )
    if error.reason in ("absent", "no-key"):
        return f"{error}: `pulumi up` the tenant stack of {tenant.name!r} again"
    return f"the tenant's token could not be read: {error}. `pulumi up --refresh` again, or `tfk8s status --stack {stack}`"


def progress(
    experiment: str,
    clusters: Sequence[str],
    platform: PlatformFacts,
    tenant: TenantFacts,
    read_whole: secrets.Get,
    open_url: tenant_gate.Opener = tenant_gate.opener,
) -> pulumi.Output[dict[str, dict[str, Any]]] | None:
    """The clusters' progress for readiness: None in a preview (no `progress` at all); `unknown`
    without a request when no gate can be asked; else read in a thread of its own."""
    if pulumi_internals.is_preview():
        return None
    stack = pulumi.get_stack()  # here: the SDK keeps its settings per context
    why = unavailable(platform, tenant, stack)
    if why is not None:
        return pulumi.Output.from_input(readiness.unknown_progress(clusters, why))
    return pulumi.Output.from_input(
        in_a_thread(lambda: read(experiment, clusters, tenant, stack, read_whole, open_url), "tfk8s-progress")
    )


def in_a_thread(work: Callable[[], T], name: str) -> asyncio.Future[T]:
    """`work`'s result, computed in a thread of its own, started now: not in the program's executor,
    whose threads make the engine's requests (hack/langhost/run_program.py sizes it by --parallel),
    so a slow gate holds none of them. `work` must not raise."""
    loop = asyncio.get_event_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(result: T) -> None:
        if not future.done():  # cancelled: the program ended without it
            future.set_result(result)

    def run() -> None:
        result = work()
        try:
            loop.call_soon_threadsafe(settle, result)
        except RuntimeError:  # the loop closed: nobody waits any more
            pass

    threading.Thread(target=run, name=name, daemon=True).start()
    return future
