"""Each queued training cluster's Workload, for the experiment stack's `readiness` on a queueing platform
(issue 38): read during a real `up`, never in a preview, with the credentials the program already
reads the tenant's Secret with (tfk8s.kube.secrets: the kubeconfig's identity, over the program's
kept-alive connection), which may `get` and `list` workloads.kueue.x-k8s.io in the tenant's
namespace on a queueing platform (tfk8s.specs.experimenter_rights.experimenter_rules) and nothing more of Kueue.

One LIST of the namespace's Workloads per experiment, in a thread of its own (as tfk8s.stack_kinds.progress
reads the gate), bounded by TIMEOUT_SECONDS. It never fails the `up`: what cannot be read is
`{"unknown": "<why, and the fix>"}` for each JobSet, and readiness then says what the JobSet alone
says (tfk8s.specs.queue_readiness).

    found = queue_status.read(tenant.namespace, jobset_names, platform, read_whole, after=jobset_uids)
    # found: None in a preview; else an Output of {jobset name: facts | {"unknown": why}}
    queue_readiness.queued_cluster_readiness(..., status=status, queue=None if found is None else found[name])
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

import pulumi

from tfk8s import pulumi_internals
from tfk8s.kube import secrets
from tfk8s.kube.api_error import KubeApiError
from tfk8s.kube.api_paths import WORKLOAD
from tfk8s.settings.contract import PlatformFacts
from tfk8s.specs import workloads
from tfk8s.stack_kinds import progress

# One LIST of one namespace's Workloads, from the API server `pulumi up` is talking to anyway: it
# answers in milliseconds (a tenant has a few experiments' Workloads). One that has not answered
# within a second is busy or gone, and readiness would only hold the `up` by waiting longer.
TIMEOUT_SECONDS = 1.0

Found = dict[str, dict[str, Any]]


def unknown(jobsets: Sequence[str], why: str) -> Found:
    return {name: {"unknown": why} for name in jobsets}


def _kubectl(namespace: str) -> str:
    return f"`kubectl get workloads -n {namespace}`"


def read_now(namespace: str, jobsets: Sequence[str], read_whole: secrets.Get, now: datetime | None = None) -> Found:
    """Each JobSet's Workload facts (tfk8s.specs.workloads.facts) or `unknown`, read now (blocking; never raises)."""
    try:
        return _read(namespace, jobsets, read_whole, now)
    except Exception as error:  # noqa: BLE001 -- readiness reports; it never fails the `up`
        return unknown(jobsets, f"Kueue's Workloads could not be read ({type(error).__name__}): {_kubectl(namespace)} says more")


def _read(namespace: str, jobsets: Sequence[str], read_whole: secrets.Get, now: datetime | None) -> Found:
    path = WORKLOAD.list_path(namespace, {})
    try:
        listed = read_whole(path)
    except KubeApiError as error:
        if error.status == 403:
            return unknown(
                jobsets,
                f"the identity running `pulumi up` may not list Kueue's Workloads (workloads.kueue.x-k8s.io) in namespace "
                f"{namespace!r}: the platform's experimenter role grants it on a queueing platform. Ask the platform team to "
                "`pulumi up` the platform stack, then `pulumi up --refresh` this one",
            )
        return unknown(
            jobsets, f"Kueue's Workloads could not be listed ({error}): `pulumi up --refresh` again, or {_kubectl(namespace)}"
        )
    if listed is None:
        return unknown(
            jobsets,
            f"this cluster serves no Kueue Workloads ({WORKLOAD.api_version}): is Kueue running? "
            "(`hack/cluster.sh start --queueing` beside the local cluster; elsewhere ask the platform team)",
        )
    items = [i for i in listed.get("items") or [] if isinstance(i, Mapping)]
    found = workloads.by_jobset(items, jobsets, now)
    none_yet = (
        "no Workload for this JobSet yet: Kueue makes one as soon as it sees the JobSet, and this read may have come "
        f"first. `pulumi up --refresh` again; if it stays, is Kueue running? ({_kubectl(namespace)})"
    )
    return {name: facts if facts is not None else {"unknown": none_yet} for name, facts in found.items()}


def bounded(work: Callable[[], Found], late: Callable[[], Found], seconds: float) -> asyncio.Future[Found]:
    """`work()` in a thread of its own (tfk8s.stack_kinds.progress.in_a_thread), or `late()` once `seconds`
    have passed without it; a late answer is dropped. `work` must not raise."""
    future = progress.in_a_thread(work, "tfk8s-queue-status")
    loop = asyncio.get_event_loop()

    def give_up() -> None:
        if not future.done():
            future.set_result(late())

    timer = loop.call_later(seconds, give_up)
    future.add_done_callback(lambda _: timer.cancel())
    return future


def read(
    namespace: str,
    jobsets: Sequence[str],
    platform: PlatformFacts,
    read_whole: secrets.Get,
    *,
    after: pulumi.Input[Any] | None = None,
    timeout: float = TIMEOUT_SECONDS,
) -> pulumi.Output[Found] | None:
    """The Workload facts of the JobSets named `jobsets` in `namespace`, by JobSet name, for
    tfk8s.specs.queue_readiness: None in a preview or on a platform that does not queue (no facts at
    all); else an Output of facts or `unknown`, listed once `after` (if given: e.g. the JobSets'
    uids, so the list sees the Workloads of JobSets this `up` creates) has resolved."""
    if pulumi_internals.is_preview() or not platform.queueing.enabled:
        return None
    names = list(jobsets)
    late = (
        f"the API server did not list Kueue's Workloads within {timeout} s (readiness waits no longer): "
        f"`pulumi up --refresh` again, or {_kubectl(namespace)}"
    )

    def start(_: Any = None) -> asyncio.Future[Found]:
        return bounded(lambda: read_now(namespace, names, read_whole), lambda: unknown(names, late), timeout)

    if after is None:
        return pulumi.Output.from_input(start())
    return pulumi.Output.from_input(after).apply(start)
