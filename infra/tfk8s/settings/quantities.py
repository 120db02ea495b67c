"""Kubernetes resource quantities ("500m", "2Gi", "10G"), parsed to validate config early."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_SUFFIXES = {
    "": Decimal(1),
    "m": Decimal("0.001"),
    "k": Decimal(10**3),
    "M": Decimal(10**6),
    "G": Decimal(10**9),
    "T": Decimal(10**12),
    "P": Decimal(10**15),
    "E": Decimal(10**18),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?$")


def parse_quantity(text: str) -> Decimal:
    """Return the quantity in base units; ValueError names what a quantity looks like."""
    # fullmatch, and no strip: " 1Gi" or "1Gi\n" would reach manifests as they are.
    match = _QUANTITY.fullmatch(str(text))
    if not match:
        raise ValueError(f"{text!r} is not a Kubernetes quantity (examples: 500m, 2, 1Gi, 10G)")
    try:
        number = Decimal(match.group(1))
    except InvalidOperation as error:
        raise ValueError(f"{text!r} is not a Kubernetes quantity (examples: 500m, 2, 1Gi, 10G)") from error
    return number * _SUFFIXES[match.group(2) or ""]


def suffix(text: str) -> str:
    """The unit suffix of a valid quantity ("2Gi" -> "Gi", "10" -> ""); ValueError as `parse_quantity`."""
    parse_quantity(text)
    match = _QUANTITY.fullmatch(str(text))
    assert match is not None
    return match.group(2) or ""


# The suffixes that make a number a size in bytes: "m" (thousandths) and none are not sizes.
BYTE_SUFFIXES = frozenset(s for s in _SUFFIXES if s not in ("", "m"))
