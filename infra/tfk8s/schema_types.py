"""The building blocks of the stack-file schema: the base model and the value types fields share.

Each type checks what a value is on its own (a DNS name, a quantity, a port) and says why it is
refused; the schemas of the two kinds of stack file (`tfk8s.schema_platform`,
`tfk8s.schema_experiment`) and the platform's contract (`tfk8s.contract`) are built from them.
Nothing here touches Pulumi: `hack/schema.py` and the tests import it without an engine.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field
from pydantic.alias_generators import to_camel

from tfk8s.quantities import parse_quantity

# Leaves room for "-worker-<index>" in pod hostnames and "-ps-<index>-<run>" in Deployment names.
MAX_NAME_LENGTH = 40
# A namespace name is a DNS-1123 label: at most 63 characters.
MAX_NAMESPACE_LENGTH = 63

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def dns_name(value: str) -> str:
    """`value` if it can name Kubernetes objects (a DNS-1123 label, room for suffixes); else ValueError."""
    if len(value) > MAX_NAME_LENGTH:
        raise ValueError(f"{value!r} is {len(value)} characters; at most {MAX_NAME_LENGTH} (it prefixes Kubernetes names)")
    if not _DNS1123_LABEL.match(value):
        raise ValueError(
            f"{value!r} is not a DNS-1123 label: use lowercase letters, digits and '-', starting and ending alphanumeric"
        )
    return value


def _namespace_prefix(value: str) -> str:
    if value and not re.fullmatch(r"[a-z0-9]([-a-z0-9]*)?", value):
        raise ValueError(
            f"{value!r} must be lowercase letters, digits and '-', starting alphanumeric (it starts namespace names)"
        )
    if len(value) + MAX_NAME_LENGTH > MAX_NAMESPACE_LENGTH:
        raise ValueError(
            f"{value!r} is {len(value)} characters; at most {MAX_NAMESPACE_LENGTH - MAX_NAME_LENGTH} (prefix + user name <= 63)"
        )
    return value


def _quantity(value: str) -> str:
    if parse_quantity(value) <= 0:  # raises ValueError naming the bad quantity
        raise ValueError(f"must be greater than zero, got {value!r}")
    return value


def _number_as_string(value: Any) -> Any:
    # `cpu: 2` is as natural as `cpu: "2"`; booleans are not numbers here.
    return str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value


def _http_url(value: str) -> str:
    if not re.match(r"^https?://", value):
        raise ValueError(f"must be an http(s) URL, got {value!r}")
    return value


def _relative_path(value: str) -> str:
    parts = value.split("/")
    if value.startswith("/") or ".." in parts or "" in parts:
        raise ValueError(f"{value!r} must be a relative path inside the volume (no leading '/', no '..', no '//')")
    return value


def _cidr(value: str) -> str:
    try:
        ipaddress.ip_network(value, strict=True)
    except ValueError as error:
        raise ValueError(f"{value!r} is not a CIDR with no host bits set, e.g. 10.0.0.1/32 ({error})") from None
    return value


def version_tuple(text: str) -> tuple[int, int]:
    """'1.34' (a `KubeVersion`) -> (1, 34)."""
    major, minor = text.split(".")
    return int(major), int(minor)


def _at_least(minimum: int) -> AfterValidator:
    def check(value: int) -> int:
        if value < minimum:
            raise ValueError(f"must be {'at least 1' if minimum == 1 else '0 or more'}, got {value}")
        return value

    return AfterValidator(check)


DnsName = Annotated[str, AfterValidator(dns_name)]
NamespacePrefix = Annotated[str, AfterValidator(_namespace_prefix)]
Positive = Annotated[int, _at_least(1)]
NonNegative = Annotated[int, _at_least(0)]
Port = Annotated[int, Field(ge=1, le=65535)]
Quantity = Annotated[str, BeforeValidator(_number_as_string), AfterValidator(_quantity)]
KubeVersion = Annotated[str, Field(pattern=r"^1\.\d+$")]
HttpUrl = Annotated[str, AfterValidator(_http_url)]
RelativePath = Annotated[str, AfterValidator(_relative_path)]
AbsolutePath = Annotated[str, Field(pattern=r"^/")]
Cidr = Annotated[str, AfterValidator(_cidr)]


class Model(BaseModel):
    """Frozen, camelCase in files, unknown keys refused, no type coercion (`count: "2"` is an error).

    A string right under a field is its documentation (`use_attribute_docstrings`): editors show
    it from the published JSON Schema, next to the field's type and default.
    """

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        strict=True,
        use_attribute_docstrings=True,
    )
