"""A config reader that records problems (with the key path) instead of raising at the first one,
and the value checks `tfk8s.config` applies. Pure: no Pulumi.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from tfk8s.quantities import parse_quantity

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# Leaves room for "-worker-<index>" in pod hostnames and "-ps-<index>-<run>" in Deployment names.
MAX_NAME_LENGTH = 40
T = TypeVar("T")


class Node:
    """A config mapping plus its key path, collecting problems instead of raising at once."""

    def __init__(self, raw: Any, path: str, problems: list[str], allowed: set[str]) -> None:
        self.path = path
        self.problems = problems
        if raw is None:
            raw = {}
        if not isinstance(raw, Mapping):
            self.fail(path, f"must be a mapping, got {type(raw).__name__}")
            raw = {}
        self.raw: Mapping[str, Any] = raw
        for key in raw:
            if key not in allowed:
                self.fail(self.key(key), f"unknown key; expected one of {sorted(allowed)}")

    def key(self, name: str) -> str:
        return f"{self.path}.{name}"

    def fail(self, key: str, message: str) -> None:
        self.problems.append(f"{key}: {message}")

    def child(self, name: str, allowed: set[str]) -> Node:
        return Node(self.raw.get(name), self.key(name), self.problems, allowed)

    def get(self, name: str, kind: type[T], default: T, check: Callable[[T], str | None] | None = None) -> T:
        """The value, or `default` when absent (or invalid, which is recorded)."""
        value = self.optional(name, kind, check)
        return default if value is None else value

    def optional(self, name: str, kind: type[T], check: Callable[[T], str | None] | None = None) -> T | None:
        """The value, or None when the key is absent (or invalid, which is recorded)."""
        value = self.raw.get(name)
        if value is None:
            return None
        # bool is an int subclass: `count: true` must not pass as 1.
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            self.fail(self.key(name), f"must be {kind.__name__}, got {value!r}")
            return None
        problem = check(value) if check else None
        if problem:
            self.fail(self.key(name), problem)
            return None
        return value

    def require(self, name: str, kind: type[T], fix: str, check: Callable[[T], str | None] | None = None) -> T | None:
        if self.raw.get(name) is None:
            self.fail(self.key(name), f"is required: {fix}")
            return None
        return self.optional(name, kind, check)

    def choice(self, name: str, options: tuple[str, ...], default: str) -> Any:
        return self.get(name, str, default, lambda v: None if v in options else f"must be one of {list(options)}, got {v!r}")


def dns_label(value: str) -> str | None:
    if len(value) > MAX_NAME_LENGTH:
        return f"{value!r} is {len(value)} characters; at most {MAX_NAME_LENGTH} (it prefixes Kubernetes names)"
    if not _DNS1123_LABEL.match(value):
        return f"{value!r} is not a DNS-1123 label: use lowercase letters, digits and '-', starting and ending alphanumeric"
    return None


def positive(value: int) -> str | None:
    return None if value >= 1 else f"must be at least 1, got {value}"


def non_negative(value: int) -> str | None:
    return None if value >= 0 else f"must be 0 or more, got {value}"


def port(value: int) -> str | None:
    return None if 1 <= value <= 65535 else f"must be a TCP port (1-65535), got {value}"


def quantity(value: str) -> str | None:
    try:
        return None if parse_quantity(value) > 0 else f"must be greater than zero, got {value!r}"
    except ValueError as error:
        return str(error)


def k8s_version(value: str) -> str | None:
    return None if re.fullmatch(r"1\.\d+", value) else f"must look like '1.34', got {value!r}"


def string_map(node: Node, name: str) -> dict[str, str]:
    value = node.get(name, dict, {})
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        node.fail(node.key(name), "must map strings to strings (quote numbers and booleans)")
        return {}
    return dict(value)
