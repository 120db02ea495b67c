"""Checks of a valid stack file that need context: the cluster's Kubernetes version, the project's
files and, for tenants and experiments, the facts of the stacks they build on. Run once, before any resource exists.

The schema (`tfk8s.schema`) checks what a value is on its own; these check what it means here.
Every problem found is reported together, as a `ConfigError` naming its key and the fix.
"""

from __future__ import annotations

import json
from pathlib import Path

from tfk8s import backends
from tfk8s import cluster_spec as cs
from tfk8s.code import code_files
from tfk8s.config_errors import ConfigError
from tfk8s.contract import PlatformFacts
from tfk8s.quantities import parse_quantity
from tfk8s.schema import NAMESPACE
from tfk8s.schema_experiment import ClusterSettings, CodeSettings, ExperimentStack, Placement
from tfk8s.schema_platform import PlatformStack
from tfk8s.schema_tenant import TenantStack
from tfk8s.schema_types import MAX_NAME_LENGTH, service_name

CONFIGMAP_LIMIT_BYTES = 1024 * 1024
# Linux's MAX_ARG_STRLEN (128 KiB) is the longest single environment string a process can be started
# with; 1 KiB of it is left for what the launcher adds when it writes TF_CONFIG (the task's part).
ENV_STRING_LIMIT_BYTES = 127 * 1024
# The longest notebook host an in-graph notebook cluster names as its chief (jupyter-tf:<port>).
NOTEBOOK_HOST_BOUND = "jupyter-tf:65535"
HOSTNAME_LABEL = "kubernetes.io/hostname"
# node-role.kubernetes.io/control-plane (and the older /master): the control plane's nodes.
CONTROL_PLANE_TAINTS = "node-role.kubernetes.io/"


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
    if problems:
        raise ConfigError(problems)
    assert kube is not None
    return stack.model_copy(update={"platform": platform.model_copy(update={"kubernetes_version": f"{kube[0]}.{kube[1]}"})})


def check_tenant(stack: TenantStack, platform: PlatformFacts) -> None:
    """Context checks of a tenant against its platform: its own volumes fit its quota."""
    tenant, key = stack.tenant, f"{NAMESPACE}:tenant"
    quota = tenant.effective_quota(platform.default_quota)
    volumes = parse_quantity(tenant.volumes.data_size) + parse_quantity(tenant.volumes.log_size)
    problems = []
    if volumes > parse_quantity(quota.storage):
        problems.append(
            f"{key}.volumes: the data and log volumes ({tenant.volumes.data_size} + {tenant.volumes.log_size}) do not fit the "
            f"tenant's storage quota ({quota.storage}): shrink them, or raise {key}.quota.storage"
        )
    if quota.persistent_volume_claims < 2:
        problems.append(f"{key}.quota.persistentVolumeClaims: the data and log volumes are 2 claims; allow at least 2")
    for field in ("users", "groups"):
        names = getattr(tenant.identities, field)
        for i, name in enumerate(names):
            if name in names[:i]:
                problems.append(f"{key}.identities.{field}[{i}]: {name!r} is listed twice; remove one")
    if problems:
        raise ConfigError(problems)


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
        problems += _placement_problems(c.ps, facts, f"{key}.ps")
        problems += _placement_problems(c.workers, facts, f"{key}.workers")
        problems += _spec_size_problems(c, experiment, facts.ports.tensorflow, key)
        if c.scratch is not None and facts.scratch_storage_class is None:
            problems.append(
                f"{key}.scratch: the platform offers no class for scratch volumes (its "
                f"storage backend is {backends.scratchless_platforms()}): remove it, or ask the platform "
                f"team to set {NAMESPACE}:platform.storage.scratchClassName"
            )
        problems += _code_problems(c.code, f"{key}.code", project_root)
    if problems:
        raise ConfigError(problems)


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
        elif t.key is not None and t.key.startswith(CONTROL_PLANE_TAINTS):
            problems.append(f"{key}.tolerations[{j}]: {shown} tolerates the control plane's taint: remove it")
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


def _code_problems(code: CodeSettings, key: str, project_root: Path) -> list[str]:
    if code.source == "url" and not code.url:
        return [f"{key}.url: source 'url' needs an http(s) URL to fetch the training script from"]
    if code.source != "configmap" or code.path is None:
        return []
    # Only the project's own files are shipped: an absolute path, a '..' or a symlink out of the
    # project would put the operator's files (a kubeconfig among them) into a ConfigMap and the state.
    root = project_root.resolve()
    directory = (project_root / code.path).resolve()
    if Path(code.path).is_absolute() or not directory.is_relative_to(root):
        return [f"{key}.path: {code.path!r} is outside the project: give a directory of this repository, relative to its root"]
    if not directory.is_dir():
        return [f"{key}.path: {code.path!r} is not a directory of the project ({directory})"]
    size = 0
    for path in code_files(directory):
        name = path.relative_to(directory).as_posix()
        if not path.resolve().is_relative_to(root):
            return [f"{key}.path: {code.path}/{name} links outside the project: copy the file in, or remove the link"]
        size += path.stat().st_size
        if size > CONFIGMAP_LIMIT_BYTES * 0.9:
            return [
                f"{key}.path: {code.path!r} holds more than {int(CONFIGMAP_LIMIT_BYTES * 0.9)} bytes; a ConfigMap carries "
                "at most 1 MiB: bake the code into the image (source: image) or serve it (source: url)"
            ]
        try:
            path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            return [
                f"{key}.path: {code.path}/{name} is not UTF-8 text; a code ConfigMap ships text files alone: remove it, "
                "or bake binary files into the image (source: image)"
            ]
    return []
