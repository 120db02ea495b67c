"""What the doctor checks the cluster for: a platform stack file's settings, or the defaults.

`--stack platform-prod` is looked up where `pulumi` looks (the project's `stackConfigDir`); a path
to a stack file works too. The file is validated by the same schema `pulumi up` applies
(tfk8s.settings.stack_file.validate), so a bad key is refused here, naming the key and the fix, before
anything touches the cluster. Its secrets are never read: only their names are checked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tfk8s.errors import ConfigError, Tfk8sError
from tfk8s.settings.platform import PlatformSettings, PlatformStack
from tfk8s.settings.stack_file import secret_keys, stack_values, validate


class TargetError(Tfk8sError):
    """A stack file the doctor cannot check against: one line naming it and the fix."""


@dataclass(frozen=True)
class Placement:
    """Where the probes' pods may run: the nodes training pods would use. `node_selector` must
    match; a taint whose key is in `tolerations` is tolerated (any effect, any value)."""

    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: tuple[str, ...] = ()


@dataclass(frozen=True)
class Target:
    settings: PlatformSettings
    source: str
    """Where the settings came from, as the report says it: the stack file's path, or "the defaults"."""
    user_node: bool = True
    """Whether the settings name the User Node (the defaults cannot: there is no default node)."""


DEFAULTS = "the defaults (no --stack)"
# The defaults need a User Node's name to be settings at all; no check reads it (Target.user_node).
UNNAMED_USER_NODE = "unnamed"


def stack_file(stack: str, project: Path) -> Path:
    """The file of `stack`: a path as given, else Pulumi.<stack>.yaml in the project's stackConfigDir."""
    if stack.endswith((".yaml", ".yml")) or "/" in stack:
        return Path(stack)
    manifest = project / "Pulumi.yaml"
    directory = (yaml.safe_load(manifest.read_text()) or {}).get("stackConfigDir", ".") if manifest.is_file() else "."
    return project / directory / f"Pulumi.{stack}.yaml"


def load(stack: str | None, project: Path) -> Target:
    if stack is None:
        defaults = PlatformSettings.model_validate({"userNode": {"name": UNNAMED_USER_NODE}})
        return Target(defaults, DEFAULTS, user_node=False)
    path = stack_file(stack, project)
    if not path.is_file():
        raise TargetError(
            f"--stack {stack}: no stack file {path}; give a platform stack's name (in {project}) or its file's path"
        )
    try:
        config = (yaml.safe_load(path.read_text()) or {}).get("config") or {}
    except yaml.YAMLError as error:
        raise TargetError(f"{path}: not YAML ({str(error).splitlines()[0]})") from None
    kind = config.get("tfk8s:kind")
    if kind != "platform":
        raise TargetError(
            f"{path}: tfk8s:kind is {kind!r}, not 'platform': the doctor checks a cluster for a platform; "
            "give --stack the platform stack the tenants will use"
        )
    try:
        stack_model = validate(stack_values(config), secret_keys(config))
    except ConfigError as error:
        raise TargetError(f"{path}: {'; '.join(error.problems)}") from None
    assert isinstance(stack_model, PlatformStack)
    return Target(stack_model.platform, str(path))
