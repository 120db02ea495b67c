"""What `pulumi up` waits for, as pulumi-kubernetes annotations (see docs/concepts/architecture.md "What `pulumi up` waits for").

Deployments keep the provider's own await (rollout complete), bounded by
`platform.awaitTimeoutSeconds`; claims of the classes tfk8s creates and training Jobs get custom
conditions; Services get none.
"""

from __future__ import annotations

# Every Service tfk8s declares carries this (tests/unit/test_golden_manifests.py checks every stack
# case): the Deployment/Job awaits already prove the pods behind them, and the provider's Service
# await costs:
# - with a selector, 10 s of sleep after every change of its Endpoints (9.5 of a new tenant's 12 s
#   `up` for the notebook's gRPC Service, 2026-11-25; 70% of a dev `up` before that);
# - headless, an informer on the namespace's Services and Endpoints before it sees the Service
#   exist: 0.27 s, then on a new experiment's critical path (worker Service -> Job).
SKIP_AWAIT = {"pulumi.com/skipAwait": "true"}
SERVICE_NO_AWAIT = SKIP_AWAIT


# The DeploymentPatch that makes a run's Job the owner of its PS (tfk8s.components.training_cluster): it
# changes nothing to wait for, and the provider's await after a patch returns the Deployment as its
# informer last saw it, at times from before the patch: the patch's state then lacked the owner it
# had applied, and the next `up` patched again (3 of 12 patches, new 3-cluster experiments,
# 2026-11-25). Without the await, its state is the API server's answer to the patch. The annotation
# lands on the Deployment too, as the patch's own field; the Deployment's awaits read its own inputs.
PATCH_NO_AWAIT = SKIP_AWAIT

# A training cluster's JobSet on a queueing platform (tfk8s.components.queued_cluster): `pulumi up`
# returns once it is queued, not once Kueue admits it, which may take hours; its readiness then says
# Queued, and a later `up --refresh` moves it on (issue 38). The provider has no await of its own for
# a JobSet, and an await of `waitFor` cannot say "admitted or still queued".
QUEUED_NO_AWAIT = SKIP_AWAIT


def timeout(seconds: int) -> dict[str, str]:
    return {"pulumi.com/timeoutSeconds": str(seconds)}


def job_wait_for(tasks: int) -> str:
    """`pulumi.com/waitFor` for a training Job: all pods Ready, or any pod already done/failed.

    A JSONPath filter on the Job object, so `up` returns as soon as training runs (it may run
    for days) and still stops at once when a task fails. No '=' may appear in the expression:
    the provider splits `path=value` on it.
    """
    return f"jsonpath={{$[?@.ready > {tasks - 1} || @.failed > 0 || @.succeeded > 0]}}"


def training_job(timeout_seconds: int, tasks: int) -> dict[str, str]:
    return {"pulumi.com/waitFor": job_wait_for(tasks), **timeout(timeout_seconds)}


# The provider's own PVC await polls every 0.5-0.6 s, and every pod waits for its claims, so that
# poll sat on the critical path of each `up`; `waitFor` watches instead and sees Bound at once.
# Only for claims of a class that binds Immediately (which backends: tfk8s.specs.backends).
CLAIM_BOUND = "jsonpath={.status.phase}=Bound"


def claim_await(timeout_seconds: int, *, until_bound: bool) -> dict[str, str]:
    if not until_bound:
        return timeout(timeout_seconds)
    return {"pulumi.com/waitFor": CLAIM_BOUND, **timeout(timeout_seconds)}
