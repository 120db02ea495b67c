"""What `pulumi up` waits for, as pulumi-kubernetes annotations (see README "What `pulumi up` waits for").

Deployments and PVCs keep the provider's own await (rollout complete, Bound), bounded by
`platform.awaitTimeoutSeconds`; training Jobs get a custom condition; Services get none.
"""

from __future__ import annotations

from tfk8s.settings import PlatformSettings

# Services are not awaited: the provider's Service await sleeps 10 s after every endpoint change
# (it was 70% of a dev `up`), and the Deployment/Job awaits already prove the pods behind them.
SERVICE_NO_AWAIT = {"pulumi.com/skipAwait": "true"}


def timeout(platform: PlatformSettings) -> dict[str, str]:
    return {"pulumi.com/timeoutSeconds": str(platform.await_timeout_seconds)}


def job_wait_for(tasks: int) -> str:
    """`pulumi.com/waitFor` for a training Job: all pods Ready, or any pod already done/failed.

    A JSONPath filter on the Job object, so `up` returns as soon as training runs (it may run
    for days) and still stops at once when a task fails. No '=' may appear in the expression:
    the provider splits `path=value` on it.
    """
    return f"jsonpath={{$[?@.ready > {tasks - 1} || @.failed > 0 || @.succeeded > 0]}}"


def training_job(platform: PlatformSettings, tasks: int) -> dict[str, str]:
    return {"pulumi.com/waitFor": job_wait_for(tasks), **timeout(platform)}
