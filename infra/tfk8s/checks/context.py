"""Checks of a valid stack file that need context: the cluster's Kubernetes version, the project's
files and, for experiments, the facts of the stacks they build on (a tenant's are `tfk8s.checks.tenant`).
Run once, before any resource exists.

The schema (`tfk8s.settings`) checks what a value is on its own; these check what it means here.
Every problem found is reported together, as a `ConfigError` naming its key and the fix.
"""

from __future__ import annotations

import json
from pathlib import Path

from tfk8s.checks import shipped_code
from tfk8s.errors import ConfigError
from tfk8s.settings import NAMESPACE
from tfk8s.settings.contract import PlatformFacts
from tfk8s.settings.experiment import ClusterSettings, ExperimentStack, Placement
from tfk8s.settings.node_keys import CONTROL_PLANE, HOSTNAME_LABEL, KUBERNETES_TAINTS
from tfk8s.settings.platform import PlatformSettings, PlatformStack
from tfk8s.settings.types import MAX_NAME_LENGTH, floating_tag, service_name
from tfk8s.specs import backends, quota
from tfk8s.specs import cluster_spec as cs
from tfk8s.specs.tenant_admission import policy_supported

# Linux's MAX_ARG_STRLEN (128 KiB) is the longest single environment string a process can be started
# with; 1 KiB of it is left for what the launcher adds when it writes TF_CONFIG (the task's part).
ENV_STRING_LIMIT_BYTES = 127 * 1024
# The longest notebook host an in-graph notebook cluster names as its chief (jupyter-tf:<port>).
NOTEBOOK_HOST_BOUND = "jupyter-tf:65535"


def check_platform(stack: PlatformStack, server_version: tuple[int, int] | None) -> PlatformStack:
    """Context checks of a platform stack; returns it with the Kubernetes version resolved."""
    problems: list[str] = []
    platform, key = stack.platform, f"{NAMESPACE}:platform"
    configured = platform.version
    # The server's version, when it can be read, is the truth: objects follow it, not the stack file.
    kube = server_version or configured
    if server_version and configured and configured != server_version:
        problems.append(
            f"{key}.kubernetesVersion: is {platform.kubernetes_version} but the cluster serves "
            f"{server_version[0]}.{server_version[1]}: fix it, or remove the key to use the server's version"
        )
    if kube is None:
        problems.append(
            f"{key}.kubernetesVersion: the cluster did not say which Kubernetes it is (its /version needs credentials "
            f"tfk8s cannot use): set it, e.g. `pulumi config set --path --type string '{key}.kubernetesVersion' 1.34`"
        )
    problems += backends.problems(platform.storage, kube, f"{key}.storage")
    problems += _network_problems(platform, key) + _placement_keys_problems(platform, key) + _quota_problems(platform, key)
    problems += _monitoring_problems(platform, key)
    if platform.gitops.preview_identity and kube is not None and not policy_supported(kube):
        problems.append(
            f"{key}.gitops.previewIdentity: Kubernetes {kube[0]}.{kube[1]} has no ValidatingAdmissionPolicy (1.30+), and "
            "without one the preview identity could write what it may only dry-run: upgrade the control plane, or set it false"
        )
    if not platform.images.allow_latest:
        images = {
            "tensorflow": platform.images.tensorflow,
            "jupyter": platform.images.jupyter,
            "tensorboard": platform.images.tensorboard,
        }
        problems += [_floating_problem(image, f"{key}.images.{name}") for name, image in images.items() if floating_tag(image)]
    if problems:
        raise ConfigError(problems)
    assert kube is not None
    return stack.model_copy(update={"platform": platform.model_copy(update={"kubernetes_version": f"{kube[0]}.{kube[1]}"})})


def _floating_problem(image: str, key: str) -> str:
    """What the policy pack's no-latest-image refuses in GitOps, refused wherever the program runs."""
    return (
        f"{key}: {image!r} is {floating_tag(image)}: a run on it could not be repeated; pin a tag other than latest "
        f"or a digest (e.g. tensorflow/tensorflow:2.21.0), or ask the platform team to set "
        f"{NAMESPACE}:platform.images.allowLatest: true"
    )


def _network_problems(platform: PlatformSettings, key: str) -> list[str]:
    """The API server's addresses and ports go together: either half alone is a policy that opens
    nothing. And where policies are enforced, the apps' ingress names the pod network to keep out."""
    problems = []
    api, api_key = platform.network.api_server, f"{key}.network.apiServer"
    if api.cidrs and not api.ports:
        problems.append(
            f"{api_key}.ports: cidrs are set ({', '.join(api.cidrs)}) but no port, so PS and Jupyter pods could reach none "
            f"of them: set {api_key}.ports too, e.g. [6443]"
        )
    if api.ports and not api.cidrs:
        problems.append(
            f"{api_key}.ports: without cidrs the API server's addresses and ports are both read from the cluster, and "
            f"these would be ignored: set {api_key}.cidrs too, or remove ports"
        )
    if platform.network.policy_enforced and not platform.network.pod_cidrs:
        # A tenant may write her own policies and open her pods' egress: then only the apps' ingress,
        # which refuses the pod network, keeps her training code from other tenants' Jupyter.
        problems.append(
            f"{key}.network.podCidrs: is empty while the cluster enforces policies (policyEnforced), so every tenant's "
            "Jupyter and TensorBoard would answer any pod, another tenant's code among them: set the cluster's pod "
            'ranges, e.g. ["10.244.0.0/16"] (docs/clusters/ says where each kind of cluster keeps them), or '
            "policyEnforced: false where the CNI enforces no NetworkPolicy"
        )
    return problems


def _monitoring_problems(platform: PlatformSettings, key: str) -> list[str]:
    """Prometheus cannot run where the platform keeps its storage Secret: no pod may run there."""
    monitoring, storage = platform.monitoring, platform.storage
    secret = backends.backend_of(storage).secret
    if monitoring.namespace is None or secret is None or monitoring.namespace != secret.namespace(storage):
        return []
    return [
        f"{key}.monitoring.namespace: {monitoring.namespace!r} is where the platform keeps its storage Secret "
        f"({key}.storage.{secret.namespace_setting}), where no pod may run: name the namespace of your Prometheus"
    ]


def _placement_keys_problems(platform: PlatformSettings, key: str) -> list[str]:
    """The User Node's taint is also its label: neither list may name it."""
    taint, allowed = platform.user_node.taint_key, platform.placement
    return [
        f"{key}.placement.{field}[{i}]: {name!r} is the User Node's {what} (userNode.taintKey), where training pods never "
        "run: remove it"
        for field, what, names in (
            ("tolerationKeys", "taint", allowed.toleration_keys),
            ("nodeSelectorKeys", "label", allowed.node_selector_keys),
        )
        for i, name in enumerate(names)
        if name == taint
    ]


def _quota_problems(platform: PlatformSettings, key: str) -> list[str]:
    """Every tenant's default quota holds its own objects: Jupyter and TensorBoard, sized by
    containerDefaults, and the rest (tfk8s.specs.quota.TENANT_OWN_COUNTS)."""
    shortfalls = quota.own_shortfalls(
        platform.default_quota, platform.container_defaults, gated=platform.tensorboard_requires_token
    )
    return [
        f"{key}.defaultQuota.{s.setting}: every tenant's own objects take {s.need} ({s.what}) but the default "
        f"quota is {s.have}: raise it to at least {s.need}, plus what experiments need"
        + (f", or lower {key}.containerDefaults.{s.setting}" if s.setting in ("cpu", "memory") else "")
        for s in shortfalls
    ]


def experiment_name(stack: ExperimentStack, stack_name: str) -> str:
    return stack.experiment or stack_name


def check_experiment(stack: ExperimentStack, stack_name: str, facts: PlatformFacts, project_root: Path) -> None:
    """Context checks of an experiment against the project's files and its platform's facts."""
    problems: list[str] = []
    experiment = experiment_name(stack, stack_name)
    if stack.experiment is None and (problem := _name_problem(experiment)):
        problems.append(
            f"{NAMESPACE}:experiment: the stack name {problem}; set `tfk8s:experiment` to a short name for this experiment"
        )
    names = [c.name for c in stack.clusters]
    for i, c in enumerate(stack.clusters):
        key = f"{NAMESPACE}:clusters[{i}]"
        if c.name in names[:i]:
            problems.append(f"{key}.name: duplicate cluster name {c.name!r}: cluster names must be unique per experiment")
        qualified = f"{experiment}-{c.name}"
        if len(qualified) > MAX_NAME_LENGTH:
            problems.append(
                f"{key}.name: '{experiment}-{c.name}' (experiment-cluster, which names its Services and Jobs) is "
                f"{len(qualified)} characters; at most {MAX_NAME_LENGTH}: shorten the cluster or tfk8s:experiment name"
            )
        if c.ps.gpus and not facts.allow_ps_gpus:
            problems.append(
                f"{key}.ps.gpus: parameter servers hold variables and need no GPU; remove it, or ask the platform "
                f"team to set {NAMESPACE}:platform.allowPsGpus: true if you really mean it"
            )
        if c.replication == "between-graph" and "in_graph_client" in c.model_fields_set:
            problems.append(
                f"{key}.inGraphClient: applies to in-graph replication alone (every between-graph worker is its own "
                f"client): remove it, or set {key}.replication: in-graph"
            )
        problems += _placement_problems(c.ps, facts, f"{key}.ps")
        problems += _placement_problems(c.workers, facts, f"{key}.workers")
        problems += _spec_size_problems(c, experiment, facts.ports.tensorflow, key)
        problems += _priority_problems(c, facts, key)
        if c.scratch is not None and facts.scratch_storage_class is None:
            problems.append(
                f"{key}.scratch: the platform offers no class for scratch volumes (its "
                f"storage backend is {backends.scratchless_platforms()}): remove it, or ask the platform "
                f"team to set {NAMESPACE}:platform.storage.scratchClassName"
            )
        if c.image is not None and not facts.images.allow_latest and floating_tag(c.image):
            problems.append(_floating_problem(c.image, f"{key}.image"))
        problems += shipped_code.problems(c.code, facts.ports, f"{key}.code", project_root)
    if problems:
        raise ConfigError(problems)


def _priority_problems(cluster: ClusterSettings, facts: PlatformFacts, key: str) -> list[str]:
    """A run's priority is one its platform offers."""
    queueing, priority = facts.queueing, cluster.run.priority
    if priority is None:
        return []
    if not queueing.enabled:
        return [
            f"{key}.run.priority: this platform does not queue experiments (platform.queueing.enabled is false), so "
            "there is no priority to wait at: remove it, or ask the platform team to turn queueing on"
        ]
    if priority not in queueing.priority_classes:
        offered = ", ".join(sorted(queueing.priority_classes)) or "none"
        return [
            f"{key}.run.priority: {priority!r} is no priority class of this platform (it offers: {offered}): "
            "name one of them, or remove it to wait at the default"
        ]
    return []


def _spec_size_problems(cluster: ClusterSettings, experiment: str, port: int, key: str) -> list[str]:
    """Every task gets the whole cluster spec in one environment string (TFK8S_CLUSTER_SPEC, then
    TF_CONFIG), which Linux caps at 128 KiB: beyond it, no task of the cluster could start."""
    spec = cs.cluster_spec(cluster, port, NOTEBOOK_HOST_BOUND, experiment=experiment)
    size = len(json.dumps(spec, sort_keys=True))
    if size <= ENV_STRING_LIMIT_BYTES:
        return []
    tasks = sum(len(hosts) for hosts in spec.values())
    fits = int(ENV_STRING_LIMIT_BYTES / (size / tasks)) - cluster.ps.count
    return [
        f"{key}.workers.count: the cluster spec of {tasks} tasks is {size} bytes; each task receives it in one environment "
        f"string, at most {ENV_STRING_LIMIT_BYTES} bytes: at most about {fits} workers with these names (shorter "
        "experiment or cluster names fit a few more); split the work into several clusters"
    ]


def _placement_problems(placement: Placement, facts: PlatformFacts, key: str) -> list[str]:
    """Training pods stay off the User Node and the control plane, and where the platform allows."""
    problems = []
    node, allowed = facts.user_node, facts.placement
    for j, t in enumerate(placement.tolerations):
        shown = t.model_dump(by_alias=True, exclude_unset=True)
        if t.key == node.taint_key or (t.operator == "Exists" and t.key is None):
            problems.append(
                f"{key}.tolerations[{j}]: {shown} tolerates the User Node taint {node.taint_key!r}: training pods must "
                "never run on the User Node; tolerate specific taints instead"
            )
        elif t.key is not None and t.key.startswith(CONTROL_PLANE):
            problems.append(f"{key}.tolerations[{j}]: {shown} tolerates the control plane's taint: remove it")
        elif t.key is not None and t.key.startswith(KUBERNETES_TAINTS):
            problems.append(
                f"{key}.tolerations[{j}]: {shown} tolerates a taint Kubernetes puts on a node in trouble (cordoned, not "
                "ready, under pressure), where training pods must not stay: remove it"
            )
        elif allowed.toleration_keys and t.key not in allowed.toleration_keys:
            problems.append(
                f"{key}.tolerations[{j}]: the platform lets training pods tolerate {allowed.toleration_keys} alone, not "
                f"{t.key!r}: remove it, or ask the platform team to add it to {NAMESPACE}:platform.placement.tolerationKeys"
            )
    selector = placement.node_selector
    if node.taint_key in selector or selector.get(HOSTNAME_LABEL) == node.name:
        problems.append(
            f"{key}.nodeSelector: {dict(selector)} selects the User Node {node.name!r}, where training pods never run "
            "(they would stay Pending): select your training nodes' labels instead"
        )
    elif control_plane := sorted(k for k in selector if k.startswith(CONTROL_PLANE)):
        problems.append(
            f"{key}.nodeSelector: {control_plane} selects the control plane, where training pods never run (they would "
            "stay Pending): select your training nodes' labels instead"
        )
    elif allowed.node_selector_keys and (others := sorted(set(selector) - set(allowed.node_selector_keys))):
        problems.append(
            f"{key}.nodeSelector: the platform lets training pods select on {allowed.node_selector_keys} alone, not "
            f"{others}: remove them, or ask the platform team to add them to {NAMESPACE}:platform.placement.nodeSelectorKeys"
        )
    return problems


def _name_problem(name: str) -> str | None:
    try:
        service_name(name)
    except ValueError as error:
        return str(error)
    return None
