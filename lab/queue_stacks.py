"""A platform and its tenants in a project copy of its own, for a local cluster of its own (issue 38):
shared by the queueing e2e tests (tests/e2e/queueing_env.py) and bench/admission.py. The copy has
its own state and passphrase; the stack files are edited as a platform team writes them (typed
values: `config set` would store `true` and numbers as strings). Running `pulumi` is the caller's.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

import toolenv

PLATFORM = "platform-dev"


def own_project(work: Path, kubeconfig: Path) -> tuple[Path, dict[str, str]]:
    """A project copy at `work` with its own state and passphrase, at `kubeconfig`, and the
    environment to run the plain CLI in there (what `make env` prints for it)."""
    work = toolenv.project_copy(work)
    mine = {
        "PULUMI_BACKEND_URL": f"file://{work / 'state'}",
        "KUBECONFIG": str(kubeconfig),
        "PULUMI_CONFIG_PASSPHRASE": secrets.token_urlsafe(16),
    }
    env = {k: v for k, v in os.environ.items() if k != "PULUMI_CONFIG_PASSPHRASE_FILE"} | mine
    return work, env | toolenv.exported(mine)


def edit_stack(work: Path, stack: str, edit: Callable[[dict[str, Any]], None]) -> None:
    """Change the `config` of the stack file of `stack` in the project copy `work`."""
    path = work / "stacks" / f"Pulumi.{stack}.yaml"
    document = yaml.safe_load(path.read_text())
    edit(document["config"])
    path.write_text(yaml.safe_dump(document))


def configure_platform(work: Path, volumes: Path, queueing: dict[str, Any] | None, stack: str = PLATFORM) -> None:
    """The platform's volumes under `volumes` (this machine: kwok's nodes are simulated), and with
    `queueing` (`capacity`, `priorityClasses`, ...) its `queueing` enabled with those settings."""

    def edit(config: dict[str, Any]) -> None:
        platform = config["tfk8s:platform"]
        if queueing is not None:
            platform["queueing"] = {"enabled": True, **queueing}
        platform["storage"]["local"] = {"hostPathRoot": str(volumes)}

    edit_stack(work, stack, edit)


def configure_tenant_quota(work: Path, stack: str, quota: dict[str, Any]) -> None:
    """The tenant's quota settings over its stack file's (`tenant.quota`)."""
    edit_stack(work, stack, lambda config: config["tfk8s:tenant"].setdefault("quota", {}).update(quota))
