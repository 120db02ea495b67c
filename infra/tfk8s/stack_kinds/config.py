"""The running stack's `tfk8s:` configuration, read into its model once, before any resource exists.

`pulumi.Config` values become the model of the stack's kind (tfk8s.settings.stack_file validates
them, with the Pulumi-free readers of a stack file). Secrets are read on their own and never enter
the models: a tenant's `jupyterToken` and a storage backend's key (`tfk8s.specs.backends`), each
checked here (`parse_secret`) and allowed on its kind of stack alone
(tfk8s.settings.stack_file.SECRETS_BY_KIND).
"""

from __future__ import annotations

from typing import Any

import pulumi

from tfk8s import pulumi_internals
from tfk8s.errors import ConfigError
from tfk8s.settings import NAMESPACE
from tfk8s.settings.experiment import ExperimentStack
from tfk8s.settings.platform import PlatformStack
from tfk8s.settings.stack_file import secret_keys, stack_values, validate
from tfk8s.settings.tenant import TenantStack


def load() -> PlatformStack | TenantStack | ExperimentStack:
    config = pulumi_internals.all_config()
    return validate(stack_values(config), secret_keys(config))


JUPYTER_TOKEN_KEY = f"{NAMESPACE}:jupyterToken"
MIN_TOKEN_LENGTH = 16


def parse_secret(
    key: str, raw: str | None, is_secret: bool, *, min_length: int = 1, placeholder: str = "<value>", hint: str = ""
) -> str | None:
    """A secret config value (`tfk8s:<key>`), checked before any resource exists: set with `pulumi
    config set --secret` (one stored in plain text in the stack file is refused), at least
    `min_length` characters, no surrounding spaces, no line break or other control character (it
    reaches an HTTP header or an environment variable). The value never enters the models: callers
    wrap it in `pulumi.Output.secret` at once."""
    if raw is None:
        return None
    full = f"{NAMESPACE}:{key}"
    fix = f"set it with `pulumi config set --secret {full} {placeholder}`{hint}"
    if not is_secret:
        raise ConfigError([f"{full}: is stored in plain text in the stack file; remove it and {fix}"])
    if len(raw) < min_length or raw != raw.strip():
        raise ConfigError([f"{full}: must be at least {min_length} characters without surrounding spaces; {fix}"])
    if any(ord(c) < 32 or ord(c) == 127 for c in raw):
        raise ConfigError([f"{full}: holds a line break or another control character; {fix}, on one line"])
    return raw


# How a tenant's Jupyter token is checked: long enough not to be guessed.
JUPYTER_TOKEN_RULES: dict[str, Any] = {
    "min_length": MIN_TOKEN_LENGTH,
    "placeholder": "<token>",
    "hint": " (e.g. `openssl rand -hex 24`)",
}


def parse_jupyter_token(raw: str | None, is_secret: bool) -> str | None:
    """`tfk8s:jupyterToken` (tenant stacks): optional, a secret of at least 16 characters."""
    return parse_secret("jupyterToken", raw, is_secret, **JUPYTER_TOKEN_RULES)


def secret_config(key: str, **rules: Any) -> pulumi.Output[str] | None:
    """The running stack's secret `tfk8s:<key>`, checked by `parse_secret`, as a secret (None: unset)."""
    full = f"{NAMESPACE}:{key}"
    value = parse_secret(key, pulumi_internals.raw_config(full), pulumi_internals.is_config_secret(full), **rules)
    return pulumi.Output.secret(value) if value is not None else None


def jupyter_token() -> pulumi.Output[str] | None:
    """The tenant's chosen Jupyter token from the running stack, as a secret (None: a generated token)."""
    return secret_config("jupyterToken", **JUPYTER_TOKEN_RULES)
