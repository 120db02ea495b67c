"""The component package's provider: `tfk8s:index:TrainingCluster` served to the engine, a refusal
reported as the user's to fix, not as a bug.

The SDK's host reports whatever a component's constructor raises as "Unexpected <class
'Exception'>", the message, then the provider's traceback. A refusal (tfk8s.errors: a bad
property, another tenant's namespace, a cluster without room) reaches the engine instead as a
`pulumi.InputPropertiesError`: its message alone. Without the per-property details that error can
carry: the engine prints each named property's value beside it, and a secret's in plain text
(sdk/go/common/resource: a Secret has no String of its own), while tfk8s's message already names
every property path and its fix.
"""

from __future__ import annotations

import sys

import pulumi
from pulumi.provider import main as serve_provider

from tfk8s import pulumi_internals
from tfk8s.component_package import VERSION
from tfk8s.component_package.training_cluster import TrainingCluster
from tfk8s.errors import Tfk8sError
from tfk8s.pulumi_errors import Shown

NAME = "tfk8s"


def invalid_inputs(raised: Exception) -> pulumi.InputPropertiesError | None:
    """What the engine gets for what the constructor raised: a refusal's message alone, or None for
    a bug (the SDK's report, with its traceback)."""
    refusal = raised.__cause__ if isinstance(raised, Shown) else raised
    if not isinstance(refusal, Tfk8sError):
        return None
    # An empty list, not None: the SDK's server builds the gRPC status's trailing metadata only from
    # a list (3.259.0), and its abort fails on a status without it.
    return pulumi.InputPropertiesError(str(refusal), errors=[])


def serve(args: list[str] | None = None) -> None:
    """Serve the package to the engine that started this process (package/__main__.py)."""
    provider = pulumi_internals.component_provider([TrainingCluster], name=NAME, version=VERSION, refused=invalid_inputs)
    serve_provider(provider, sys.argv[1:] if args is None else args)
