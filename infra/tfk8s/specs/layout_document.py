"""A training cluster's Layout document, published in its namespace for the user's Jupyter (in-graph from the notebook).

The platform deploys Jupyter once per user; experiments come and go. So instead of baking cluster
specs into the Jupyter pod (which would need a platform redeploy per experiment), each experiment
creates one Layout per cluster, and the notebook reads them at run time (`tfk8s_train.layouts`)
with a service account that may only read Layouts in the user's own namespace. The Layout kind is
the platform's own: tfk8s.components.guard declares it, `contract.PlatformKind` is its name in the contract.
The directories are relative to the user's volumes, which Jupyter mounts whole (data at /data,
logs at /logs) and training pods mount per run.
"""

from __future__ import annotations

from tfk8s.settings.experiment import ClusterSettings


def log_sub_path(experiment: str, cluster: str) -> str:
    """A run's directory in the user's log volume; TensorBoard names the run after it."""
    return f"{experiment}/{cluster}"


def spec(
    *,
    experiment: str,
    cluster: ClusterSettings,
    spec: dict[str, list[str]],
    run_id: str,
    run_uid: object,
    log_sub_path: str,
) -> dict[str, object]:
    """The Layout's spec. `run_uid` (the uid of the Job whose servers wait for the notebook, a
    Pulumi output) names the current run's directory, where the notebook writes its done marker."""
    return {
        "experiment": experiment,
        "cluster": cluster.name,
        "spec": spec,
        "runId": run_id,
        "runUid": run_uid,
        "replication": cluster.replication,
        "training": cluster.training,
        "inGraphClient": cluster.in_graph_client if cluster.replication == "in-graph" else None,
        "dataSubPath": cluster.data_sub_path or "",
        "logSubPath": log_sub_path,
    }
