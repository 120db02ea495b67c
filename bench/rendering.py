"""The tfk8s program rendered to YAML, for the kubectl side of a benchmark, and applied as
`pulumi up` creates its objects.

Runs a stack's program inline (Automation API) with every Kubernetes resource sent to a provider
with `render_yaml_to_directory`, so kubectl gets exactly the objects `pulumi up` would create.
Reads of live objects (the User Node, whose taints' owners the platform checks) go to the cluster.
The rendered files hold Secrets in plain text: callers write them to a temporary directory.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
import pulumi.automation as auto
import pulumi_kubernetes as k8s
import yaml

ROOT = Path(__file__).resolve().parents[1]
LIVE_READS = {"kubernetes:core/v1:Node"}
# A patch renders as its target's kind and name, so in the same directory it would overwrite the
# file of the object it patches (a PS Deployment): patches go to PATCHES_DIR under `out`.
PATCHES = {"kubernetes:apps/v1:DeploymentPatch"}
PATCHES_DIR = "patches"


def render(work: Path, out: Path, stack_config: dict[str, Any], declare: Callable[[], None]) -> None:
    """Run `declare()` as the program of a `render` stack in `work`, with `stack_config` as its config."""
    kubeconfig = os.environ.pop("KUBECONFIG")  # the rendering provider must not find a cluster
    # This stack's state is thrown away; checkpoints after every step cost minutes at 1,800 resources.
    os.environ["PULUMI_SKIP_CHECKPOINTS"] = "true"

    def program() -> None:
        renderer = k8s.Provider("render", render_yaml_to_directory=str(out))
        patches = k8s.Provider("render-patches", render_yaml_to_directory=str(out / PATCHES_DIR))
        live = k8s.Provider("live", kubeconfig=kubeconfig)

        def to_renderer(args: pulumi.ResourceTransformationArgs) -> pulumi.ResourceTransformationResult | None:
            if not args.type_.startswith("kubernetes:"):
                return None
            provider = live if args.type_ in LIVE_READS else patches if args.type_ in PATCHES else renderer
            return pulumi.ResourceTransformationResult(
                args.props, pulumi.ResourceOptions.merge(args.opts, pulumi.ResourceOptions(provider=provider))
            )

        pulumi.runtime.register_stack_transformation(to_renderer)
        declare()

    try:
        stack = auto.create_or_select_stack("render", project_name="tfk8s", program=program, work_dir=str(work))
        stack.set_all_config(
            {k: auto.ConfigValue(json.dumps(v) if not isinstance(v, str) else v) for k, v in stack_config.items()}
        )
        stack.up(color="never")
    finally:
        os.environ["KUBECONFIG"] = kubeconfig
        del os.environ["PULUMI_SKIP_CHECKPOINTS"]


def render_experiment(work: Path, out: Path, stack_name: str) -> None:
    """The objects of the experiment stack `stack_name` of the project copy `work`, as `pulumi up
    -s <stack_name>` would create them (its stack file's config, its experiment name), into `out`."""
    from tfk8s import program
    from tfk8s.kube import client as kube_client
    from tfk8s.settings.experiment import ExperimentStack
    from tfk8s.stack_kinds.config import load

    cluster = {**os.environ}  # rendering hides KUBECONFIG from the provider; the contract read needs it
    config = yaml.safe_load((work / "stacks" / f"Pulumi.{stack_name}.yaml").read_text())["config"]

    def declare() -> None:
        stack = load()
        assert isinstance(stack, ExperimentStack)
        # The names `pulumi up -s <stack_name>` gives (an experiment is named after its stack by default).
        stack = stack.model_copy(update={"experiment": config.get("tfk8s:experiment", stack_name)})
        api = kube_client.connect(cluster, kubeconfig_in_config=False).api
        assert api is not None, "the bench's cluster is not readable with its kubeconfig"
        # The tenant's contract is read from the cluster; no ownership reads (read=None): the
        # rendered objects are applied by kubectl, not adopted.
        program.run_experiment(stack, None, None, os.environ, ROOT, read_whole=lambda path: api.get(path))

    render(work, out, config, declare)


# The order kubectl applies a rendered directory's objects in: what others refer to first.
ORDER = [
    "Namespace",
    "StorageClass",
    "PersistentVolume",
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "Secret",
    "ConfigMap",
    "PersistentVolumeClaim",
    "Service",
    "Deployment",
    "Job",
    "Node",
]

Kubectl = Callable[..., str]  # kubectl(*args) -> its stdout, against the bench's cluster


@dataclass(frozen=True)
class RenderedExperiment:
    """An experiment's rendered objects (`render_experiment`), applied with `kubectl apply
    --server-side` in the order `pulumi up` creates them, and deleted again.

    A run is its Job's uid (tfk8s.components.training_cluster): the Layout is given it as a value
    and each PS Deployment is patched with the Job as its owner, once the Job exists, with kubectl
    as with pulumi. So `apply` sends everything else first (the PS read the uid themselves), then
    reads the uid, then those, applied by a field manager of their own as the patches are. Each
    apply makes a new Job, so a new run (a run directory of its own on the log volume)."""

    out: Path
    docs: list[dict[str, Any]]  # everything but the patches, in ORDER
    patches: list[dict[str, Any]]

    @classmethod
    def load(cls, out: Path) -> RenderedExperiment:
        objects = [f for f in sorted(out.rglob("*.yaml")) if PATCHES_DIR not in f.relative_to(out).parts]
        docs = [d for f in objects for d in yaml.safe_load_all(f.read_text()) if d]
        docs.sort(key=lambda d: ORDER.index(d["kind"]) if d["kind"] in ORDER else len(ORDER))
        patches = [d for f in sorted((out / PATCHES_DIR).rglob("*.yaml")) for d in yaml.safe_load_all(f.read_text()) if d]
        return cls(out, docs, patches)

    @property
    def namespaces(self) -> list[str]:
        return sorted({d["metadata"]["namespace"] for d in self.docs if d["metadata"].get("namespace")})

    @property
    def jobs(self) -> list[dict[str, Any]]:
        return [d for d in self.docs if d["kind"] == "Job"]

    @property
    def kinds(self) -> list[str]:
        """The kinds of its objects, as kubectl names them (`Kind.version.group`)."""
        return sorted({f"{d['kind']}.{_version_group(d['apiVersion'])}".rstrip(".") for d in self.docs})

    def _run_job_of(self, doc: dict[str, Any]) -> str:
        if doc["kind"] == "Deployment":
            return str(doc["metadata"]["ownerReferences"][0]["name"])
        cluster = doc["metadata"]["name"].removesuffix("-layout")
        return f"{cluster}-chief" if any(j["metadata"]["name"] == f"{cluster}-chief" for j in self.jobs) else f"{cluster}-worker"

    def _with_uid(self, doc: dict[str, Any], uids: dict[str, str]) -> dict[str, Any]:
        doc, uid = copy.deepcopy(doc), uids[self._run_job_of(doc)]
        if doc["kind"] == "Layout":
            doc["spec"]["runUid"] = uid
        for owner in doc["metadata"].get("ownerReferences", []):
            owner["uid"] = uid
        return doc

    def apply(self, kubectl: Kubectl) -> dict[str, str]:
        """Applies it; the uid of each Job (by name): its run."""
        layouts = [d for d in self.docs if d["kind"] == "Layout"]
        first = self.out / "first.yaml"
        first.write_text(yaml.safe_dump_all([d for d in self.docs if not any(d is a for a in layouts)]))
        kubectl("apply", "--server-side", "--force-conflicts", "-f", str(first))
        uids = {
            j["metadata"]["name"]: kubectl(
                "get", "job", j["metadata"]["name"], "-n", j["metadata"]["namespace"], "-o", "jsonpath={.metadata.uid}"
            ).strip()
            for j in self.jobs
        }
        rest = self.out / "after-job.yaml"
        rest.write_text(yaml.safe_dump_all([self._with_uid(d, uids) for d in layouts + self.patches]))
        kubectl("apply", "--server-side", "--field-manager=tfk8s-run", "-f", str(rest))
        return uids

    def delete(self, kubectl: Kubectl) -> None:
        """Deletes its objects and waits until they are gone (not their pods: see the caller)."""
        owned = self.out / "owned.yaml"
        owned.write_text(yaml.safe_dump_all(self.docs))
        kubectl("delete", "--wait=true", "-f", str(owned), "--ignore-not-found")


def _version_group(api_version: str) -> str:
    """`apps/v1` -> `v1.apps`; the core group's `v1` -> `` (kubectl takes the bare kind there)."""
    group, _, version = api_version.rpartition("/")
    return f"{version}.{group}" if group else ""
