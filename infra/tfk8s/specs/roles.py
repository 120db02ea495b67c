"""The roles of a training cluster's tasks and every trait that sets them apart, in one table (pure).

Like the replica types of kubeflow's training-operator, each with its restart policy and pod
template, a role says how the pods of its tasks differ: the pod builders (tfk8s.specs.pods,
tfk8s.components.training_cluster) read these traits and never test a role's name.

The chief of in-graph replication is one of two clients: a chief Job of the cluster (CHIEF_ROLE),
or the user's Jupyter notebook (`inGraphClient: notebook`). The notebook is no pod of the cluster,
so it has no row here: it is the chief's address in the cluster spec (tfk8s.specs.cluster_spec), its pod
is the platform's (tfk8s.components.user_env), and it writes the chief's done marker itself.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from tfk8s.settings.experiment import ClusterSettings, Placement, PsSettings, Resources, WorkerSettings
from tfk8s.specs.cluster_spec import CHIEF, PS, WORKER

# The volumes a TensorFlow pod may mount (tfk8s.specs.pods builds them).
Volume = Literal["data", "log", "launcher", "code", "scratch"]

# How a task stops once its run is over:
#   scale-to-zero: a Deployment would restart it, so its launcher scales that Deployment to zero
#                  (a service account allowed to, and the Job it watches, in its environment);
#   exit:          it exits and its Job counts it (a server among them is stopped by the launcher's
#                  done-marker barrier, see tfk8s_train.launch);
#   jobset:        its JobSet deletes its Job once the run succeeds or fails (tfk8s.specs.jobset):
#                  nothing to scale, so no service account.
Retirement = Literal["scale-to-zero", "exit", "jobset"]
# The container every role's pod runs its task in (beside init containers that fetch its code).
TASK_CONTAINER = "tensorflow"


@dataclass(frozen=True, kw_only=True)
class Role:
    # The TensorFlow job name: the cluster spec's key, TFK8S_JOB_NAME, and the pods' `role` label.
    name: str
    # "Always" for a Deployment's pods (the only policy it allows); "Never" for Job pods, whose
    # retries are the Job's (tfk8s.specs.run_policy), counted per index; "OnFailure" for a PS in a
    # JobSet's Job, restarted in place like a Deployment's (tfk8s.specs.jobset).
    restart_policy: Literal["Always", "Never", "OnFailure"]
    # Scratch among them only when the cluster has a scratch volume (see `mounts`).
    volumes: frozenset[Volume]
    # A gRPC server its peers connect to: Ready once its port listens.
    serves: bool
    # Whose settings size it: `ps` or `workers` (count, CPU, memory, GPUs, retries).
    sized_by: Literal["ps", "workers"]
    # False: never a GPU, whatever its settings say.
    gets_gpus: bool
    # Whose nodeSelector and tolerations place it: `ps`, `workers`, or none (the scheduler's choice).
    placed_by: Literal["ps", "workers"] | None
    # Exactly one task: its index (0) is written out, and its Job has no retries to share.
    one_task: bool
    retirement: Retirement

    def settings(self, cluster: ClusterSettings) -> PsSettings | WorkerSettings:
        return cluster.ps if self.sized_by == "ps" else cluster.workers

    def count(self, cluster: ClusterSettings) -> int:
        return 1 if self.one_task else self.settings(cluster).count

    def resources(self, cluster: ClusterSettings) -> Resources:
        own = self.settings(cluster).resources
        return own if self.gets_gpus else own.model_copy(update={"gpus": 0})

    def placement(self, cluster: ClusterSettings) -> Placement | None:
        """The node selector and tolerations of this role's pods in `cluster`."""
        if self.placed_by is None:
            return None
        return cluster.ps if self.placed_by == "ps" else cluster.workers

    def mounts(self, cluster: ClusterSettings) -> frozenset[Volume]:
        """The volumes of this role's pods in `cluster`."""
        return self.volumes if cluster.scratch is not None else self.volumes - {"scratch"}


# Parameter servers hold variables only: no data, no scratch. One Deployment per task, so a PS
# that dies is restarted and keeps its DNS name (its Service). GPUs as `ps` says (the platform
# decides whether PS may have any: tfk8s.checks.context).
PS_ROLE = Role(
    name=PS,
    restart_policy="Always",
    volumes=frozenset({"log", "launcher", "code"}),
    serves=True,
    sized_by="ps",
    gets_gpus=True,
    placed_by="ps",
    one_task=False,
    retirement="scale-to-zero",
)

# A PS inside a queued cluster's JobSet (tfk8s.specs.jobset): one Indexed Job for every PS, since
# Kueue gangs Jobs, never Deployments. Its container is restarted in place (OnFailure), as a
# Deployment would restart it, and the JobSet deletes it when the workers are done.
JOBSET_PS_ROLE = replace(PS_ROLE, restart_policy="OnFailure", retirement="jobset")

# Workers: one Indexed Job, one pod template for every task (the index is JOB_COMPLETION_INDEX).
WORKER_ROLE = Role(
    name=WORKER,
    restart_policy="Never",
    volumes=frozenset({"data", "log", "launcher", "code", "scratch"}),
    serves=True,
    sized_by="workers",
    gets_gpus=True,
    placed_by="workers",
    one_task=False,
    retirement="exit",
)

# The in-graph chief Job only coordinates: a client nobody connects to, with a worker's CPU and
# memory but no GPU. It goes where the PS go (their nodeSelector and tolerations): like them it
# needs CPU and memory, never an accelerator, and the PS's pool is where a platform keeps those; a
# GPU pool's node, the workers' placement, would idle its GPUs under it. Unplaced, it could land on
# no node at all where every pool is tainted.
CHIEF_ROLE = Role(
    name=CHIEF,
    restart_policy="Never",
    volumes=frozenset({"data", "log", "launcher", "code", "scratch"}),
    serves=False,
    sized_by="workers",
    gets_gpus=False,
    placed_by="ps",
    one_task=True,
    retirement="exit",
)
