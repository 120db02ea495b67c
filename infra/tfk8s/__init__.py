"""tfk8s: distributed TensorFlow on Kubernetes, declared as Pulumi resources.

As a library (docs/guide/library.md), a Pulumi program of one's own composes the components:

    import tfk8s
    cluster = tfk8s.TrainingCluster("mnist", tfk8s.TrainingClusterArgs(...), opts)

The experiment's component, `TrainingCluster` (PS Deployments and Services, the workers' Indexed
Job, its NetworkPolicy); the tenant's, `UserEnvironment` (a user's namespace, volumes, Jupyter and
TensorBoard); the platform's, `SharedStorage`, `UserNode`, `PlatformGuard` and `TenantAdmission`:
each `(name, XArgs, opts)`. Beside them the settings their arguments are made of, and
`this_stack`, `standalone_platform`, `trainer_bundle`, `code_bundle` to make the rest.

Loaded on first use: every `pulumi up` of tfk8s's own program imports this package first (through
tfk8s.entry), before its garbage collector is set up, and needs none of these names.
"""

from __future__ import annotations

# Not `typing.TYPE_CHECKING`: importing typing alone would cost every run of the program ~5 ms
# (python -X importtime); type checkers read a constant of this name the same way.
TYPE_CHECKING = False

# Each public name -> (the module that defines it, its name there).
_PUBLIC = {
    # Components and their arguments, experiment, tenant, platform.
    "TrainingCluster": ("tfk8s.components.training_cluster", "TrainingCluster"),
    "TrainingClusterArgs": ("tfk8s.components.training_cluster", "TrainingClusterArgs"),
    "UserEnvironment": ("tfk8s.components.user_env", "UserEnvironment"),
    "UserEnvironmentArgs": ("tfk8s.components.user_env", "UserEnvironmentArgs"),
    "SharedStorage": ("tfk8s.components.storage", "SharedStorage"),
    "SharedStorageArgs": ("tfk8s.components.storage", "SharedStorageArgs"),
    "UserNode": ("tfk8s.components.user_node", "UserNode"),
    "UserNodeArgs": ("tfk8s.components.user_node", "UserNodeArgs"),
    "PlatformGuard": ("tfk8s.components.guard", "PlatformGuard"),
    "PlatformGuardArgs": ("tfk8s.components.guard", "PlatformGuardArgs"),
    "TenantAdmission": ("tfk8s.components.tenant_admission", "TenantAdmission"),
    "TenantAdmissionArgs": ("tfk8s.components.tenant_admission", "TenantAdmissionArgs"),
    # What the arguments are made of.
    "ClusterSettings": ("tfk8s.settings.experiment", "ClusterSettings"),
    "PlatformSettings": ("tfk8s.settings.platform", "PlatformSettings"),
    "StorageSettings": ("tfk8s.settings.storage", "StorageSettings"),
    "UserNodeSettings": ("tfk8s.settings.platform", "UserNodeSettings"),
    "TenantSettings": ("tfk8s.settings.tenant", "TenantSettings"),
    "PlatformFacts": ("tfk8s.settings.contract", "PlatformFacts"),
    "Owner": ("tfk8s.specs.ownership", "Owner"),
    "CodeBundle": ("tfk8s.specs.code", "CodeBundle"),
    # Making them.
    "this_stack": ("tfk8s.library", "this_stack"),
    "standalone_platform": ("tfk8s.library", "standalone_platform"),
    "trainer_bundle": ("tfk8s.specs.code", "installed_launcher_bundle"),
    "code_bundle": ("tfk8s.specs.code", "bundle"),
}
# Literal, for linters and `from tfk8s import *`; tests/unit/test_library.py keeps it equal to the table.
__all__ = [
    "ClusterSettings",
    "CodeBundle",
    "Owner",
    "PlatformFacts",
    "PlatformGuard",
    "PlatformGuardArgs",
    "PlatformSettings",
    "SharedStorage",
    "SharedStorageArgs",
    "StorageSettings",
    "TenantAdmission",
    "TenantAdmissionArgs",
    "TenantSettings",
    "TrainingCluster",
    "TrainingClusterArgs",
    "UserEnvironment",
    "UserEnvironmentArgs",
    "UserNode",
    "UserNodeArgs",
    "UserNodeSettings",
    "code_bundle",
    "standalone_platform",
    "this_stack",
    "trainer_bundle",
]

if TYPE_CHECKING:
    from typing import Any

    from tfk8s.components.guard import PlatformGuard, PlatformGuardArgs
    from tfk8s.components.storage import SharedStorage, SharedStorageArgs
    from tfk8s.components.tenant_admission import TenantAdmission, TenantAdmissionArgs
    from tfk8s.components.training_cluster import TrainingCluster, TrainingClusterArgs
    from tfk8s.components.user_env import UserEnvironment, UserEnvironmentArgs
    from tfk8s.components.user_node import UserNode, UserNodeArgs
    from tfk8s.library import standalone_platform, this_stack
    from tfk8s.settings.contract import PlatformFacts
    from tfk8s.settings.experiment import ClusterSettings
    from tfk8s.settings.platform import PlatformSettings, UserNodeSettings
    from tfk8s.settings.storage import StorageSettings
    from tfk8s.settings.tenant import TenantSettings
    from tfk8s.specs.code import CodeBundle
    from tfk8s.specs.code import bundle as code_bundle
    from tfk8s.specs.code import installed_launcher_bundle as trainer_bundle
    from tfk8s.specs.ownership import Owner


def __getattr__(name: str) -> Any:
    """PEP 562: the public names, imported when first asked for, then kept in the module."""
    if name not in _PUBLIC:
        raise AttributeError(f"module 'tfk8s' has no attribute {name!r}")
    module, attribute = _PUBLIC[name]
    value = getattr(__import__(module, fromlist=[attribute]), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
