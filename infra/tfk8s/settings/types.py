"""The building blocks of the stack-file schema: the base model and the value types fields share.

Each type checks what a value is on its own (a DNS name, a quantity, a port) and says why it is
refused; the schemas of the two kinds of stack file (`tfk8s.settings.platform`,
`tfk8s.settings.experiment`) and the platform's contract (`tfk8s.settings.contract`) are built from them.
Nothing here touches Pulumi: `hack/schema.py` and the tests import it without an engine.
"""

from __future__ import annotations

import ipaddress
import os
import re
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field
from pydantic.alias_generators import to_camel

from tfk8s.settings.quantities import BYTE_SUFFIXES, parse_quantity, suffix

# Leaves room for "-worker-<index>" in pod hostnames and "-ps-<index>-<run>" in Deployment names.
MAX_NAME_LENGTH = 40
# A namespace name is a DNS-1123 label: at most 63 characters.
MAX_NAMESPACE_LENGTH = 63

# A DNS-1123 subdomain (node names, service account names): labels joined by '.', at most 253.
MAX_SUBDOMAIN_LENGTH = 253
# The largest UID or GID Kubernetes accepts in a securityContext.
MAX_ID = 2**31 - 1
# The shortest prefix length (the widest range) a CIDR a network policy opens may have, per IP
# version: anything wider (0.0.0.0/0, ::/0, 10.0.0.0/7) is a good part of the Internet.
MIN_PREFIX = {4: 8, 6: 32}

_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
# A label key: an optional DNS subdomain prefix and '/', then a name (Kubernetes' qualified name).
_LABEL_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_LABEL_KEY = re.compile(rf"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?{_LABEL_NAME}")
_LABEL_VALUE = re.compile(rf"({_LABEL_NAME})?")
# An image reference: [registry[:port]/]path[:tag][@digest], the grammar of distribution/reference.
_HOST = r"[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?"
# A registry is a first component with a '.' or a port, or localhost (else it is a path component).
_REGISTRY = rf"(?:(?:localhost|{_HOST}(?:\.{_HOST})+)(?::[0-9]+)?|{_HOST}:[0-9]+)/"
_IMAGE = re.compile(
    rf"({_REGISTRY})?"
    r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?"
)


def dns_name(value: str) -> str:
    """`value` if it can name Kubernetes objects (a DNS-1123 label, room for suffixes); else ValueError."""
    if len(value) > MAX_NAME_LENGTH:
        raise ValueError(f"{value!r} is {len(value)} characters; at most {MAX_NAME_LENGTH} (it prefixes Kubernetes names)")
    if not _DNS1123_LABEL.fullmatch(value):
        raise ValueError(
            f"{value!r} is not a DNS-1123 label: use lowercase letters, digits and '-', starting and ending alphanumeric"
        )
    return value


def is_dns_label(value: str) -> bool:
    """A DNS-1123 label of up to 63 characters: what names namespaces."""
    return len(value) <= MAX_NAMESPACE_LENGTH and _DNS1123_LABEL.fullmatch(value) is not None


def is_dns_subdomain(value: str) -> bool:
    """A DNS-1123 subdomain of up to 253 characters: what names nodes and service accounts."""
    return len(value) <= MAX_SUBDOMAIN_LENGTH and _DNS1123_SUBDOMAIN.fullmatch(value) is not None


def namespace_name(value: str) -> str:
    """`value` if it can name a namespace (a DNS-1123 label of up to 63 characters); else ValueError."""
    if not is_dns_label(value):
        raise ValueError(
            f"{value!r} cannot name a namespace: 1 to {MAX_NAMESPACE_LENGTH} lowercase letters, digits and '-', "
            "starting and ending alphanumeric"
        )
    return value


def dns_subdomain(value: str) -> str:
    """`value` if it is a DNS-1123 subdomain (what names nodes and service accounts); else ValueError."""
    if not is_dns_subdomain(value):
        raise ValueError(
            f"{value!r} is not a DNS-1123 subdomain: 1 to {MAX_SUBDOMAIN_LENGTH} lowercase letters, digits, '-' and '.', "
            "starting and ending alphanumeric"
        )
    return value


def service_name(value: str) -> str:
    """`value` if it can start the name of a Service (a DNS-1035 label: a letter first); else ValueError."""
    dns_name(value)
    if not _DNS1035_LABEL.fullmatch(value):
        raise ValueError(f"{value!r} starts with a digit: it names Services, which must start with a letter (DNS-1035)")
    return value


def _label_key(value: str) -> str:
    prefix, _, name = value.rpartition("/")
    if not _LABEL_KEY.fullmatch(value) or len(name) > 63 or len(prefix) > 253:
        raise ValueError(
            f"{value!r} is not a label key: an optional DNS prefix and '/', then up to 63 letters, digits, '-', '_' or "
            "'.', starting and ending alphanumeric (e.g. example.com/gpu)"
        )
    return value


def _label_value(value: str) -> str:
    if len(value) > 63 or not _LABEL_VALUE.fullmatch(value):
        raise ValueError(
            f"{value!r} is not a label value: up to 63 letters, digits, '-', '_' or '.', starting and ending alphanumeric"
        )
    return value


def _image(value: str) -> str:
    if not _IMAGE.fullmatch(value) or len(value) > 512:
        raise ValueError(
            f"{value!r} is not an image reference: [registry/]name[:tag][@sha256:digest], e.g. tensorflow/tensorflow:2.21.0"
        )
    return value


def floating_tag(image: str) -> str | None:
    """How `image` floats, if it does: "untagged" (which means latest) or "tagged latest"; None for a
    pinned tag or a digest. (A registry's port is no tag.)"""
    if "@sha256:" in image:
        return None
    last = image.rsplit("/", 1)[-1]
    tag = last.rpartition(":")[2] if ":" in last else ""
    return "untagged" if not tag else "tagged latest" if tag == "latest" else None


def _host(value: str) -> str:
    """`value` if it is an IP address or a DNS host name (what users type to reach a node)."""
    try:
        ipaddress.ip_address(value)
    except ValueError:
        if not is_dns_subdomain(value):
            raise ValueError(
                f"{value!r} is neither an IP address nor a host name (lowercase letters, digits, '-' and '.'), "
                "e.g. 10.0.0.5 or user-node.example.com: users reach the NodePorts there"
            ) from None
    return value


def _byte_quantity(value: str) -> str:
    amount = parse_quantity(value)
    if amount % 1:
        raise ValueError(f"{value!r} is a fraction of a byte: memory and storage take whole bytes, e.g. 512Mi or 2Gi")
    if suffix(value) not in BYTE_SUFFIXES:
        # `dataSize: 10` is 10 bytes to Kubernetes; nobody means that.
        example = f"{value}Gi" if value.isdigit() else "10Gi"
        raise ValueError(f"{value!r} has no unit, so it is {amount.normalize():f} bytes: add a unit, e.g. {example}")
    return value


def _namespace_prefix(value: str) -> str:
    if value and not re.fullmatch(r"[a-z0-9]([-a-z0-9]*)?", value):
        raise ValueError(
            f"{value!r} must be lowercase letters, digits and '-', starting alphanumeric (it starts namespace names)"
        )
    if value.startswith("kube-"):
        raise ValueError(f"{value!r}: namespaces kube-* are Kubernetes' own; choose another prefix, e.g. tfk8s-")
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


def _http_url(credentials_fix: str) -> AfterValidator:
    def check(value: str) -> str:
        # No whitespace or control character anywhere: it lands in manifests and shell-free commands as is.
        if not re.fullmatch(r"https?://[^\s/?#]+[^\s]*", value) or any(ord(c) < 32 or ord(c) == 127 for c in value):
            raise ValueError(f"must be an http(s) URL without spaces or control characters, got {value!r}")
        parts = urlsplit(value)
        if "@" in parts.netloc:
            # The URL is a plain value: in the stack file, the state, the objects and every log of them.
            raise ValueError(f"carries credentials (user:password@host), which would be stored in plain text: {credentials_fix}")
        if not parts.hostname:
            raise ValueError(f"{value!r} names no host, e.g. http://host.example:8080/")
        try:
            port = parts.port  # ValueError beyond 65535 or not a number
        except ValueError:
            port = 0
        if port is not None and port < 1:
            raise ValueError(f"the port of {value!r} must be a TCP port (1-65535), e.g. http://{parts.hostname}:8080")
        return value

    return AfterValidator(check)


def _absolute_path(value: str) -> str:
    if not value.startswith("/") or ".." in value.split("/") or any(c.isspace() or ord(c) < 32 for c in value):
        raise ValueError(f"{value!r} must be an absolute path with no '..' and no spaces or control characters")
    return value


def _relative_path(value: str) -> str:
    parts = value.split("/")
    if value.startswith("/") or ".." in parts or "" in parts:
        raise ValueError(f"{value!r} must be a relative path inside the volume (no leading '/', no '..', no '//')")
    return value


def _cidr(value: str) -> str:
    try:
        network = ipaddress.ip_network(value, strict=True)
    except ValueError as error:
        raise ValueError(f"{value!r} is not a CIDR with no host bits set, e.g. 10.0.0.1/32 ({error})") from None
    shortest = MIN_PREFIX[network.version]
    if network.prefixlen < shortest:
        raise ValueError(
            f"{value!r} is wider than /{shortest}, the widest IPv{network.version} range pods may be let through to: name the "
            f"server's own addresses, e.g. {'10.0.0.10/32' if network.version == 4 else 'fd00::10/128'}"
        )
    return value


def _stack_reference(value: str) -> str:
    # Pulumi's stack, project and organization names: letters, digits, '-', '_' and '.'.
    if not re.fullmatch(r"[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+){0,2}", value):
        raise ValueError(f"{value!r} is not a stack name: `stack`, `project/stack` or `org/project/stack`, e.g. tenant-alice")
    return value


def version_tuple(text: str) -> tuple[int, int]:
    """'1.34' (a `KubeVersion`) -> (1, 34)."""
    major, minor = text.split(".")
    return int(major), int(minor)


def _linux_id(value: int) -> int:
    if value > MAX_ID:
        raise ValueError(f"must be at most {MAX_ID} (the largest UID/GID Kubernetes accepts), got {value}")
    return value


def _at_least(minimum: int) -> AfterValidator:
    def check(value: int) -> int:
        if value < minimum:
            raise ValueError(f"must be {'at least 1' if minimum == 1 else '0 or more'}, got {value}")
        return value

    return AfterValidator(check)


DnsName = Annotated[str, AfterValidator(dns_name)]
DnsSubdomain = Annotated[str, AfterValidator(dns_subdomain)]
NamespaceName = Annotated[str, AfterValidator(namespace_name)]
# Names that end up in Service names (users, experiments, clusters): DNS-1035.
ServiceName = Annotated[str, AfterValidator(service_name)]
LabelKey = Annotated[str, AfterValidator(_label_key)]
LabelValue = Annotated[str, AfterValidator(_label_value)]
Image = Annotated[str, AfterValidator(_image)]
Host = Annotated[str, AfterValidator(_host)]
NamespacePrefix = Annotated[str, AfterValidator(_namespace_prefix)]
Positive = Annotated[int, _at_least(1)]
NonNegative = Annotated[int, _at_least(0)]
Port = Annotated[int, Field(ge=1, le=65535)]
# User and group ids (runAsUser, fsGroup, GID ranges) as Kubernetes accepts them; PositiveId never root's 0.
PositiveId = Annotated[int, _at_least(1), AfterValidator(_linux_id)]
LinuxId = Annotated[int, _at_least(0), AfterValidator(_linux_id)]
Quantity = Annotated[str, BeforeValidator(_number_as_string), AfterValidator(_quantity)]
# Memory and storage: a quantity of whole bytes ("500m" of memory is half a byte), with a unit
# (`10` is 10 bytes to Kubernetes, never what a stack file means).
Bytes = Annotated[str, BeforeValidator(_number_as_string), AfterValidator(_quantity), AfterValidator(_byte_quantity)]
KubeVersion = Annotated[str, Field(pattern=r"^1\.\d+$")]
# A Prometheus duration in whole seconds, minutes or hours: 30s, 1m, 1h.
Duration = Annotated[str, Field(pattern=r"^[1-9][0-9]*[smh]$")]
# Where credentials go instead of into the URL, said by the URL's refusal.
HeketiUrl = Annotated[
    str,
    _http_url("give Heketi's user in restUser and its key as the secret tfk8s:heketiAdminKey (`pulumi config set --secret`)"),
]
CodeUrl = Annotated[
    str,
    _http_url("serve the code where pods may fetch it without credentials, or bake it into the image (code.source: image)"),
]
RelativePath = Annotated[str, AfterValidator(_relative_path)]
AbsolutePath = Annotated[str, AfterValidator(_absolute_path)]
Cidr = Annotated[str, AfterValidator(_cidr)]
StackReference = Annotated[str, AfterValidator(_stack_reference)]


# Set by hack/schema.py, which publishes the JSON Schema: see `Model`.
PUBLISH_DOCSTRINGS_ENV = "TFK8S_SCHEMA_DOCSTRINGS"


class Model(BaseModel):
    """Frozen, camelCase in files, unknown keys refused, no type coercion (`count: "2"` is an error).

    A string right under a field is its documentation (`use_attribute_docstrings`): editors show
    it from the published JSON Schema, next to the field's type and default. Only hack/schema.py
    reads them: pydantic finds them by parsing each model's source, about 0.04 s of every
    `pulumi preview` and `up` (docs/benchmarks.md "Fixed cost"). A required field's description, the hint of its
    missing-key error, is its `Field(description=...)`, which every process has.
    """

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        strict=True,
        use_attribute_docstrings=os.environ.get(PUBLISH_DOCSTRINGS_ENV) == "1",
    )
