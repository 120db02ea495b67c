"""The tfk8s program rendered to YAML, for the kubectl side of a benchmark.

Runs a stack's program inline (Automation API) with every Kubernetes resource sent to a provider
with `render_yaml_to_directory`, so kubectl gets exactly the objects `pulumi up` would create.
Reads of live objects (the User Node, whose taints' owners the platform checks) go to the cluster.
The rendered files hold Secrets in plain text: callers write them to a temporary directory.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pulumi
import pulumi.automation as auto
import pulumi_kubernetes as k8s

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
