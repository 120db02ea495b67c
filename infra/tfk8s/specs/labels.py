"""The one source of labels: every selector is built from the labels of what it selects."""

from __future__ import annotations

PART_OF = "tfk8s"
USER = "tfk8s.io/user"
EXPERIMENT = "tfk8s.io/experiment"
CLUSTER = "tfk8s.io/cluster"
ROLE = "tfk8s.io/role"
INDEX = "tfk8s.io/index"
# The training run a pod belongs to (cluster_spec.run_id): a PS's Service selects only the current
# run, so new workers can never reach a PS of an earlier run that has not stopped yet; on worker and
# chief pods it makes a new run id a new Job template, so the Job is replaced.
RUN = "tfk8s.io/run"
# On every tenant namespace, its value the platform's group: the namespaces the platform's admission
# policies select, and those its monitoring namespace keeps out (tfk8s.specs.network_policy).
TENANT_NAMESPACE = "tfk8s.io/platform"


def of_component(component: str) -> dict[str, str]:
    """What every object of `component` tfk8s makes carries, whoever's it is: every tenant's training
    pods select as `of_component("tensorflow")` (the platform's scrape, tfk8s.specs.monitoring)."""
    return {"app.kubernetes.io/name": component, "app.kubernetes.io/part-of": PART_OF}


def labels(
    user: str,
    component: str,
    *,
    experiment: str | None = None,
    cluster: str | None = None,
    role: str | None = None,
    index: int | None = None,
    run: str | None = None,
) -> dict[str, str]:
    """Kubernetes recommended labels plus ours; `selector_of` picks the identifying subset."""
    result = {**of_component(component), "app.kubernetes.io/managed-by": "pulumi", USER: user}
    if experiment is not None:
        result[EXPERIMENT] = experiment
    if cluster is not None:
        result["app.kubernetes.io/instance"] = f"{experiment}-{cluster}" if experiment else cluster
        result[CLUSTER] = cluster
    if role is not None:
        result["app.kubernetes.io/component"] = role
        result[ROLE] = role
    if index is not None:
        result[INDEX] = str(index)
    if run is not None:
        result[RUN] = run
    return result


_IDENTIFYING = ("app.kubernetes.io/name", USER, EXPERIMENT, CLUSTER, ROLE, INDEX, RUN)


def selector_of(pod_labels: dict[str, str]) -> dict[str, str]:
    """The identifying subset of `pod_labels`: stable across upgrades, unique per workload."""
    return {k: v for k, v in pod_labels.items() if k in _IDENTIFYING}
