"""Before a platform declares its queueing objects (tfk8s.components.queueing): does the cluster run
Kueue and JobSet?

`platform.queueing.enabled: true` needs the cluster to serve Kueue's kueue.x-k8s.io/v1beta2
clusterqueues (its Cohorts, ResourceFlavors and WorkloadPriorityClasses come with them) and JobSet's
jobset.x-k8s.io/v1alpha2 jobsets (what queued training clusters become): each group version's
discovery document lists them. Refused here, naming the key and the fix, rather than by the
provider after half the platform exists. Without credentials to read the cluster nothing is checked.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from tfk8s.errors import ClusterLacks
from tfk8s.kube.api_paths import CLUSTER_QUEUE, JOBSET, ApiKind
from tfk8s.settings import NAMESPACE
from tfk8s.settings.platform import PlatformStack

Reader = Callable[[str], Mapping[str, Any] | None]
KEY = f"{NAMESPACE}:platform.queueing"
NEEDED = (CLUSTER_QUEUE, JOBSET)


def served(kind: ApiKind, read_whole: Reader) -> bool:
    listed = read_whole(kind.root) or {}  # absent (404): the group version is not served
    return any(r.get("name") == kind.plural for r in listed.get("resources") or [])


def check_queueing(stack: PlatformStack, read_whole: Reader | None) -> None:
    """`ClusterLacks` when queueing is enabled on a cluster that does not serve what it needs."""
    if not stack.platform.queueing.enabled or read_whole is None:
        return
    missing = [f"{kind.api_version} {kind.plural}" for kind in NEEDED if not served(kind, read_whole)]
    if missing:
        raise ClusterLacks(
            [
                f"{KEY}.enabled: is true, but the cluster serves no {' and no '.join(missing)} (Kueue and JobSet are not "
                "installed): install them (on the local cluster: hack/cluster.sh start --queueing), or set enabled: false"
            ]
        )
