"""What a Pulumi program of one's own needs beside tfk8s's components, to compose them without
tfk8s's stack files (docs/guide/library.md): who owns what it creates, and the platform's facts
when the program is its own platform.

tfk8s's own program reads both from its stack files and from the stacks it builds on
(tfk8s.program); a library user's program makes them here. Exported by `tfk8s` (tfk8s/__init__.py).
"""

from __future__ import annotations

import pulumi

from tfk8s.components import guard
from tfk8s.schema.contract import PlatformFacts
from tfk8s.schema.platform import PlatformSettings
from tfk8s.specs import backends
from tfk8s.specs.ownership import Owner
from tfk8s.stacks import platform as platform_stack


def this_stack(kind: str = "experiment", state: str | None = None) -> Owner:
    """The running program's stack, as the owner of what its components create: the label and
    annotation every object carries (tfk8s.specs.ownership). `state` tells two Pulumi states of the
    same stack name apart (tfk8s's program passes its backend's id)."""
    return Owner(
        organization=pulumi.get_organization(),
        project=pulumi.get_project(),
        stack=pulumi.get_stack(),
        kind=kind,
        state=state,
    )


def standalone_platform(
    settings: PlatformSettings,
    *,
    owner: Owner,
    storage_class: str | None = None,
    user_node_address: str | None = None,
) -> PlatformFacts:
    """The facts a platform stack of `settings` would publish, for a program with no platform stack
    to read them from: images, ports, Pod Security, placement and timeouts as `settings` say.

    `settings.kubernetes_version` is required (a platform stack reads the API server's). The
    storage class is the one `settings.storage` names, unless `storage_class` says which class the
    tenants' volumes are in; the Layout and Tenant kinds and the experimenter role are the names a
    PlatformGuard of `owner` would create (create one, or set `publish_layout=False` on
    TrainingClusterArgs)."""
    if settings.kubernetes_version is None:
        raise ValueError("standalone_platform: settings.kubernetes_version is required, e.g. '1.34'")
    group = guard.platform_group(owner)
    return platform_stack.facts(
        settings,
        owner=owner.annotation,
        group=group,
        storage_class=storage_class or settings.storage.class_name,
        scratch_storage_class=backends.scratch_class(settings.storage),
        user_node_address=user_node_address,
        experimenter_role=guard.experimenter_role(group),
    )
