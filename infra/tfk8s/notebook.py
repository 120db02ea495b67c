"""What the user's Jupyter pod needs to be the in-graph client of its notebook-driven clusters.

`training/master_client.ipynb` runs as the chief: it needs the cluster spec, the trainer package,
the data, and the cluster's log volume, because its done marker (`<log>/.tfk8s/<run>/done/chief-0`)
is what retires the parameter servers and workers. So per notebook-driven cluster the pod mounts
that cluster's data claim read-only at /data/<cluster> and its log claim at /logs/<cluster>, and
`TFK8S_CLUSTERS` maps each cluster to {spec, runId, dataDir, logDir}. With exactly one such
cluster the single-cluster variables the notebook reads (TFK8S_CLUSTER_SPEC, TFK8S_RUN_ID,
TFK8S_DATA_DIR, TFK8S_LOG_DIR) are set too, so it runs unmodified.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pulumi

from tfk8s.pods import LAUNCHER_DIR, Json, key_of
from tfk8s.training_cluster import TrainingCluster


@dataclass
class NotebookClient:
    env: list[Json] = field(default_factory=list)
    volumes: list[Json] = field(default_factory=list)
    mounts: list[Json] = field(default_factory=list)


def notebook_client(
    clusters: dict[str, TrainingCluster], launcher_config_map: pulumi.Input[str], launcher_files: list[str]
) -> NotebookClient:
    """Env, volumes and mounts for Jupyter; empty when no cluster is driven from the notebook."""
    client = NotebookClient()
    layouts: dict[str, Any] = {}
    for name, cluster in clusters.items():
        data_dir, log_dir = f"/data/{name}", f"/logs/{name}"
        layouts[name] = {
            "spec": cluster.spec,
            "runId": cluster.run_id,
            "training": cluster.training,
            "dataDir": data_dir,
            "logDir": log_dir,
        }
        client.volumes += [
            {"name": f"data-{name}", "persistentVolumeClaim": {"claimName": cluster.data_claim.metadata.name, "readOnly": True}},
            {"name": f"log-{name}", "persistentVolumeClaim": {"claimName": cluster.log_claim.metadata.name}},
        ]
        client.mounts += [
            {"name": f"data-{name}", "mountPath": data_dir, "readOnly": True},
            {"name": f"log-{name}", "mountPath": log_dir},
        ]
    if not clusters:
        return client
    client.volumes.append(
        {
            "name": "tfk8s-train",
            "configMap": {
                "name": launcher_config_map,
                "items": [{"key": key_of(f), "path": f} for f in launcher_files],
            },
        }
    )
    client.mounts.append({"name": "tfk8s-train", "mountPath": f"{LAUNCHER_DIR}/tfk8s_train", "readOnly": True})
    client.env += [
        {"name": "PYTHONPATH", "value": LAUNCHER_DIR},
        {"name": "TFK8S_CLUSTERS", "value": json.dumps(layouts, sort_keys=True)},
    ]
    if len(layouts) == 1:
        (layout,) = layouts.values()
        client.env += [
            {"name": "TFK8S_CLUSTER_SPEC", "value": json.dumps(layout["spec"], sort_keys=True)},
            {"name": "TFK8S_RUN_ID", "value": layout["runId"]},
            {"name": "TFK8S_TRAINING", "value": layout["training"]},
            {"name": "TFK8S_DATA_DIR", "value": layout["dataDir"]},
            {"name": "TFK8S_LOG_DIR", "value": layout["logDir"]},
        ]
    return client
