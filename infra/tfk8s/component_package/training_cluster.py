"""The component package's `tfk8s:index:TrainingCluster`: a training cluster any Pulumi language
declares (package/, docs/guide/package.md), in a tenant's namespace, with the caller's own
Kubernetes credentials.

It is what an experiment stack of this one cluster checks and declares: the tenant's contract read
from the namespace, every check of `tfk8s.program.check_experiment` (access, ownership, quota)
before a resource is declared, then the library's TrainingCluster body (the same children, names
and manifests; tfk8s.components.training_cluster), with its own copy of the trainer package, as a
TrainingCluster outside an Experiment has. Its outputs are the cluster's TF cluster spec and its
readiness from live status.

No `from __future__ import annotations`: Pulumi's component provider infers the package's schema
from the annotations of this class and of its `args` (tfk8s.component_package.args), and cannot read strings.
"""

import json
import os
from collections.abc import Iterator, Mapping
from typing import Any

import pulumi
from pydantic import ValidationError

from tfk8s import program, pulumi_internals
from tfk8s.component_package.args import TrainingClusterArgs
from tfk8s.components.experiment import cluster_readiness
from tfk8s.components.training_cluster import TOKEN, TrainingClusterBody, in_tenant
from tfk8s.errors import ClusterLacks, ConfigError, MissingPrerequisite, Refusal
from tfk8s.kube import client as kube_client
from tfk8s.pulumi_errors import shown_by_pulumi
from tfk8s.settings.experiment import LAUNCHER_PACKAGE, ExperimentStack
from tfk8s.settings.problems import schema_problems
from tfk8s.specs.code import installed_launcher_bundle
from tfk8s.stack_kinds import queue_status

PREFIX = "tfk8s:"


def connect(environ: Mapping[str, str]) -> kube_client.Cluster:
    """The caller's cluster, as the experiment program reaches it: the kubeconfig of the environment
    the CLI gave the provider (KUBECONFIG), or the pod's own credentials. Tests replace it."""
    return kube_client.connect(environ, kubeconfig_in_config=False)


def as_properties(problems: list[str]) -> list[str]:
    """Findings keyed as the stack file's (`tfk8s:clusters[0].workers.count`), keyed as the
    resource's properties instead (`cluster.workers.count`)."""
    return [p.replace(f"{PREFIX}clusters[0]", "cluster").replace(PREFIX, "") for p in problems]


def settings(args: Mapping[str, Any]) -> ExperimentStack:
    """The arguments as an experiment stack of one cluster, checked as a stack file is: errors
    name the property's path (`cluster.workers.count`) and the fix, before anything is declared."""
    unknown = list(_not_plain(args, ""))
    if unknown:
        raise ConfigError(
            [
                f"{path}: must be a value known before the deployment (it decides which objects exist and their "
                "names), not another resource's output or a secret: give it as a literal or from plain config"
                for path in unknown
            ]
        )
    given = {"kind": "experiment", "namespace": args.get("namespace"), "clusters": [_whole(args.get("cluster"))]}
    if args.get("experiment") is not None:
        given["experiment"] = args["experiment"]
    try:
        # As JSON, as a stack file is read: lists for tuples, and the models' strict types.
        stack = ExperimentStack.model_validate_json(json.dumps(given))
    except ValidationError as error:
        raise ConfigError(as_properties(schema_problems(ExperimentStack, error))) from None
    code = stack.clusters[0].code
    if code.source == "configmap" and code.path != LAUNCHER_PACKAGE:
        raise ConfigError(
            [
                f"cluster.code.path: the package ships no directory of yours ({code.path!r}): serve the code "
                "(code.source: url) or bake it into the image (code.source: image), or run it from an experiment stack"
            ]
        )
    return stack


def _not_plain(value: Any, path: str) -> Iterator[str]:
    """The paths of the values the engine sent as Outputs: another resource's output, or a secret
    (the provider hands the component both as Outputs, whatever the schema's `plain` says)."""
    if isinstance(value, pulumi.Output):
        yield path or "properties"
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _not_plain(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            yield from _not_plain(item, f"{path}[{i}]")


# Kubernetes settings of the program's own: its resources would use them, while the checks use the
# environment's kubeconfig (`connect`): two identities, or two clusters.
KUBERNETES_CONFIG = ("kubernetes:kubeconfig", "kubernetes:context", "kubernetes:cluster")


def refuse_other_credentials(opts: pulumi.ResourceOptions | None) -> None:
    """Refuse a Kubernetes provider of the program's own, or Kubernetes config in its stack: the
    checks (the contract, access, ownership, quota) read the cluster with the environment's
    kubeconfig, and the cluster's objects must be written with the very same credentials."""
    problems = [
        f"{key}: set in the stack's config; the package checks and writes with the kubeconfig of the environment: "
        "remove it and set KUBECONFIG (and its current context) instead"
        for key in KUBERNETES_CONFIG
        if pulumi_internals.raw_config(key) is not None
    ]
    providers = (opts.providers if opts is not None else None) or {}
    named = providers.keys() if isinstance(providers, Mapping) else [getattr(p, "package", "") for p in providers]
    if "kubernetes" in named or (opts is not None and opts.provider is not None):
        problems.append(
            "options.providers: a Kubernetes provider of the program's own; the package checks and writes with the "
            "kubeconfig of the environment: remove the option and set KUBECONFIG instead"
        )
    if problems:
        raise ConfigError(problems)


# (dry run, namespace, experiment, cluster) -> the resource declaring it, in this provider process:
# one deployment's clusters (a preview's and an update's are told apart by the dry run).
_DECLARED: dict[tuple[bool, str, str, str], str] = {}


def refuse_twice_in_one_program(name: str, namespace: str, experiment: str, cluster: str) -> None:
    """Refuse a second TrainingCluster of one program with the same experiment and cluster name: the
    two would declare the same objects, and neither exists yet for the ownership check to find."""
    key = (pulumi_internals.is_preview(), namespace, experiment, cluster)
    first = _DECLARED.setdefault(key, name)
    if first != name:
        raise ConfigError(
            [
                f"cluster.name: TrainingCluster {first!r} of this program already declares cluster {cluster!r} of "
                f"experiment {experiment!r} in {namespace}: give {name!r} another cluster.name or experiment"
            ]
        )


def _whole(value: Any) -> Any:
    """Numbers as the models take them: Pulumi sends every number as a double, and the component
    provider makes only top-level integer properties ints again (a worker count of 2.0 is 2)."""
    if isinstance(value, dict):
        return {k: _whole(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_whole(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


class TrainingCluster(TrainingClusterBody):
    """Distributed TensorFlow (parameter servers, workers, a chief) in a tenant's namespace and volumes."""

    cluster_spec: pulumi.Output[dict[str, list[str]]]
    """The TF cluster spec: each role's task addresses (ps, worker, chief), as TF_CONFIG gives them."""
    readiness: pulumi.Output[dict[str, Any]]
    """Each role's live status: ready, pending, failed or done, with why."""
    ready: pulumi.Output[bool]
    """Whether every task of the cluster is up (or the run is done)."""

    def __init__(self, name: str, args: TrainingClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        # Every check first: a refused cluster registers nothing, not even this component; the
        # refusal reaches the SDK as one message (tfk8s.pulumi_errors).
        with shown_by_pulumi():
            stack = settings(args)
            refuse_other_credentials(opts)
            cluster = connect(os.environ)
            api = cluster.api
            read = (lambda path: api.get(path, metadata_only=True)) if api is not None else None
            read_whole = (lambda path: api.get(path, metadata_only=False)) if api is not None else None
            try:
                checked = program.check_experiment(
                    stack,
                    cluster.version,
                    read,
                    os.environ,
                    program.PROJECT_ROOT,
                    read_whole,
                    api.post if api is not None else None,
                    installed_launcher_bundle("experiment"),
                    standalone=True,
                )
            # Their messages name the stack file's keys: name the properties instead.
            except (ConfigError, ClusterLacks) as error:
                raise type(error)(as_properties(error.problems)) from None
            except (Refusal, MissingPrerequisite) as error:
                raise type(error)(as_properties([str(error)])[0]) from None
            tenant, settings_ = checked.tenant, stack.clusters[0]
            refuse_twice_in_one_program(name, tenant.namespace, checked.experiment, settings_.name)
        assert read_whole is not None  # check_experiment refuses without it

        super().__init__(TOKEN, name, {}, opts)
        self._declare(
            name,
            in_tenant(tenant, checked.experiment, settings_, checked.platform, checked.owner, checked.launcher),
        )
        queue = None
        if self.queued:
            queue = queue_status.read(tenant.namespace, [self.names.cluster], checked.platform, read_whole, after=self.run_uid)
        self.cluster_spec = pulumi.Output.from_input(self.spec)
        self.readiness = cluster_readiness(settings_, self, queue)
        self.ready = self.readiness.apply(lambda r: bool(r.get("ready")))
        self.register_outputs({"cluster_spec": self.cluster_spec, "readiness": self.readiness, "ready": self.ready})
