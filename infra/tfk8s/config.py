"""Validate stack configuration against `tfk8s.settings`, once, before any resource exists.

Every problem found is reported together, each naming its key as written in the stack file
(`tfk8s:clusters[1].workers.count`) and how to fix it. The schema checks what a value is on its
own; this module adds what needs context: the cluster's Kubernetes version, the project's files,
and (for experiments) the platform stack's facts.
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pulumi
from pydantic import BaseModel, ValidationError

from tfk8s import backends
from tfk8s import settings as s

NAMESPACE = "tfk8s"
CONFIGMAP_LIMIT_BYTES = 1024 * 1024
# Secret keys: read on their own with require_secret/is_config_secret, never part of the models.
SECRET_KEYS = frozenset({"jupyterTokens", *backends.SECRET_CONFIG_KEYS})
KIND_FIX = (
    "set `tfk8s:kind: platform` (storage, the User Node, users' namespaces, volumes, Jupyter and TensorBoard) or "
    "`tfk8s:kind: experiment` (one user's training clusters); see README 'Two kinds of stack'"
)


class ConfigError(pulumi.RunError, ValueError):
    """The stack configuration is invalid; `problems` lists every finding.

    A `pulumi.RunError`: the CLI shows the message alone, without a Python traceback.
    """

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("invalid tfk8s configuration:\n  - " + "\n  - ".join(problems))


def key_path(loc: tuple[int | str, ...]) -> str:
    """('clusters', 1, 'workers', 'count') -> 'tfk8s:clusters[1].workers.count'."""
    text = f"{NAMESPACE}:{loc[0]}"
    for part in loc[1:]:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text


def _model_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The model class holding the mapping at `loc` (to list the keys it allows)."""
    current: Any = model
    for part in loc:
        while True:  # unwrap Optional, tuple[...] and dict[str, ...] down to a model
            args = [a for a in typing.get_args(current) if a is not type(None) and a is not Ellipsis]
            if isinstance(current, type) and issubclass(current, BaseModel):
                break
            if not args:
                return None
            current = args[-1]
        if isinstance(part, int):
            continue
        fields = {f.alias or n: f for n, f in current.model_fields.items()}
        if part not in fields:
            return None
        current = fields[part].annotation
    while not (isinstance(current, type) and issubclass(current, BaseModel)):
        args = [a for a in typing.get_args(current) if a is not type(None)]
        if not args or isinstance(current, types.GenericAlias) and typing.get_origin(current) is dict:
            return None
        current = args[-1]
    return current


def _message(model: type[BaseModel], error: Any) -> str:
    kind, loc = error["type"], tuple(error["loc"])
    if kind == "missing":
        holder = _model_at(model, loc[:-1])
        field = next((f for n, f in (holder.model_fields.items() if holder else []) if (f.alias or n) == loc[-1]), None)
        hint = f": {field.description}" if field is not None and field.description else ""
        return f"is required{hint}"
    if kind == "extra_forbidden":
        holder = _model_at(model, loc[:-1])
        allowed = sorted(f.alias or n for n, f in holder.model_fields.items()) if holder else []
        return f"unknown key; expected one of {allowed}"
    if kind == "value_error":
        return str(error["ctx"]["error"])
    if kind == "literal_error":
        return f"must be one of {error['ctx']['expected'].replace(' or ', ', ')}, got {error['input']!r}"
    if kind in {"int_type", "int_parsing", "string_type", "bool_type", "float_type"}:
        expected = {"int_type": "int", "int_parsing": "int", "string_type": "str", "bool_type": "bool"}.get(kind, "a number")
        return f"must be {expected}, got {error['input']!r}"
    if kind == "too_short":
        return "must be a non-empty list"
    if kind in {"less_than_equal", "greater_than_equal"} and len(loc) > 1 and loc[-2] == "ports":
        return f"must be a TCP port (1-65535), got {error['input']!r}"
    if kind == "string_pattern_mismatch" and loc[-1] == "kubernetesVersion":
        return f"must look like '1.34', got {error['input']!r}"
    return f"{error['msg'][0].lower()}{error['msg'][1:]}, got {error['input']!r}"


def validate(raw: Mapping[str, Any]) -> s.PlatformStack | s.ExperimentStack:
    """Raw `tfk8s:` values (without the prefix) -> the stack's model, or ConfigError."""
    kind = raw.get("kind")
    if kind not in s.STACK_KINDS:
        got = "it is missing" if kind is None else f"got {kind!r}"
        raise ConfigError([f"{NAMESPACE}:kind: {got}; {KIND_FIX}"])
    model = s.STACK_KINDS[kind]
    try:
        # JSON mode: arrays become tuples, and strict mode refuses `count: "2"` and `count: true`.
        return model.model_validate_json(json.dumps(dict(raw)))  # type: ignore[return-value]
    except ValidationError as error:
        errors = error.errors()
        # A list whose items failed is also "too short" after validation: report the items only.
        failed_inside = [tuple(e["loc"]) for e in errors if e["type"] != "too_short"]
        problems = [
            f"{key_path(tuple(e['loc']))}: {_message(model, e)}"
            for e in errors
            if not (e["type"] == "too_short" and any(loc[: len(e["loc"])] == tuple(e["loc"]) for loc in failed_inside))
        ]
        raise ConfigError(problems) from None


def check_platform(stack: s.PlatformStack, server_version: tuple[int, int] | None) -> s.PlatformStack:
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
    names = [u.name for u in stack.users]
    for i, name in enumerate(names):
        if name in names[:i]:
            problems.append(f"{NAMESPACE}:users[{i}].name: duplicate user {name!r}: each user gets one namespace")
    if problems:
        raise ConfigError(problems)
    assert kube is not None
    return stack.model_copy(update={"platform": platform.model_copy(update={"kubernetes_version": f"{kube[0]}.{kube[1]}"})})


def experiment_name(stack: s.ExperimentStack, stack_name: str) -> str:
    return stack.experiment or stack_name


def check_experiment(stack: s.ExperimentStack, stack_name: str, facts: s.PlatformFacts, project_root: Path) -> None:
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
        if len(qualified) > s.MAX_NAME_LENGTH:
            problems.append(
                f"{key}.name: '{experiment}-{c.name}' (experiment-cluster, which names its Services and Jobs) is "
                f"{len(qualified)} characters; at most {s.MAX_NAME_LENGTH}: shorten the cluster or tfk8s:experiment name"
            )
        if c.ps.gpus and not facts.allow_ps_gpus:
            problems.append(
                f"{key}.ps.gpus: parameter servers hold variables and need no GPU; remove it, or ask the platform "
                f"team to set {NAMESPACE}:platform.allowPsGpus: true if you really mean it"
            )
        for t in c.workers.tolerations:
            if t.get("key") == facts.user_node.taint_key or (t.get("operator") == "Exists" and not t.get("key")):
                problems.append(
                    f"{key}.workers.tolerations: {dict(t)} tolerates the User Node taint {facts.user_node.taint_key!r}: "
                    "training pods must never run on the User Node; tolerate specific taints instead"
                )
        if c.scratch is not None and facts.scratch_storage_class is None:
            problems.append(
                f"{key}.scratch: platform stack {stack.platform_stack!r} offers no class for scratch volumes (its "
                f"storage backend is {backends.scratchless_platforms()}): remove it, or ask the platform "
                f"team to set {NAMESPACE}:platform.storage.scratchClassName"
            )
        problems += _code_problems(c.code, f"{key}.code", project_root)
    if problems:
        raise ConfigError(problems)


def _name_problem(name: str) -> str | None:
    try:
        s.dns_name(name)
    except ValueError as error:
        return str(error)
    return None


def _code_problems(code: s.CodeSettings, key: str, project_root: Path) -> list[str]:
    if code.source == "url" and not code.url:
        return [f"{key}.url: source 'url' needs an http(s) URL to fetch the training script from"]
    if code.source != "configmap" or code.path is None:
        return []
    directory = project_root / code.path
    if not directory.is_dir():
        return [f"{key}.path: {code.path!r} is not a directory of the project ({directory})"]
    size = sum(f.stat().st_size for f in directory.rglob("*") if f.is_file() and "__pycache__" not in f.parts)
    if size > CONFIGMAP_LIMIT_BYTES * 0.9:
        return [
            f"{key}.path: {code.path!r} holds {size} bytes; a ConfigMap carries at most 1 MiB: "
            "bake the code into the image (source: image) or serve it (source: url)"
        ]
    return []


def stack_values(config: Mapping[str, Any]) -> dict[str, Any]:
    """The `tfk8s:` keys of the running stack (secrets apart), objects decoded from their JSON."""
    values: dict[str, Any] = {}
    for full_key, value in config.items():
        namespace, _, key = full_key.partition(":")
        if namespace != NAMESPACE or key in SECRET_KEYS:
            continue
        if isinstance(value, str) and value[:1] in "{[":
            value = json.loads(value)
        values[key] = value
    return values


def load() -> s.PlatformStack | s.ExperimentStack:
    return validate(stack_values(pulumi.runtime.config.get_config_env() | dict(pulumi.runtime.config.CONFIG.get())))


JUPYTER_TOKENS_KEY = f"{NAMESPACE}:jupyterTokens"
MIN_TOKEN_LENGTH = 16


def parse_jupyter_tokens(raw: str | None, is_secret: bool, users: tuple[s.PlatformUser, ...]) -> dict[str, str]:
    """`tfk8s:jupyterTokens` (platform stacks): optional `{user: token}`, set with `config set --secret --path`.

    Checked before any resource exists; the values never enter the settings (callers wrap them
    in `pulumi.Output.secret` at once). A token stored in plain text in the stack file is refused.
    """
    if raw is None:
        return {}
    fix = f"set it with `pulumi config set --secret --path '{JUPYTER_TOKENS_KEY}.<user>' <token>`"
    if not is_secret:
        raise ConfigError([f"{JUPYTER_TOKENS_KEY}: is stored in plain text in the stack file; remove it and {fix}"])
    try:
        tokens = json.loads(raw)
    except ValueError:
        tokens = None
    if not isinstance(tokens, dict):
        raise ConfigError([f"{JUPYTER_TOKENS_KEY}: must be a map of user name to token; {fix}"])
    known = {u.name for u in users}
    problems = []
    for user, token in tokens.items():
        key = f"{JUPYTER_TOKENS_KEY}.{user}"
        if user not in known:
            problems.append(f"{key}: no user {user!r} in tfk8s:users; remove it or add the user")
        elif not isinstance(token, str) or len(token) < MIN_TOKEN_LENGTH:
            problems.append(f"{key}: must be a string of at least {MIN_TOKEN_LENGTH} characters (e.g. `openssl rand -hex 24`)")
    if problems:
        raise ConfigError(problems)
    return tokens


def jupyter_tokens(users: tuple[s.PlatformUser, ...]) -> dict[str, pulumi.Output[str]]:
    """The users' chosen Jupyter tokens from the running stack, as secrets (users without one get a generated token)."""
    raw = pulumi.runtime.get_config(JUPYTER_TOKENS_KEY)
    tokens = parse_jupyter_tokens(raw, pulumi.runtime.is_config_secret(JUPYTER_TOKENS_KEY), users)
    return {user: pulumi.Output.secret(token) for user, token in tokens.items()}
