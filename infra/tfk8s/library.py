"""What a Pulumi program of one's own needs beside tfk8s's components, to compose them without
tfk8s's stack files (docs/guide/library.md): who owns what it creates, and the platform's facts
when the program is its own platform.

tfk8s's own program reads both from its stack files and from the stacks it builds on
(tfk8s.program); a library user's program makes them here. Exported by `tfk8s` (tfk8s/__init__.py).
"""

from __future__ import annotations

import pulumi

from tfk8s.components import guard
from tfk8s.settings.contract import PlatformFacts
from tfk8s.settings.platform import PlatformSettings, UserNodeSettings
from tfk8s.specs import backends
from tfk8s.specs.ownership import Owner
from tfk8s.stack_kinds import platform as platform_stack


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


# A placeholder: a program without tenants has no User Node (training pods only keep off one).
NO_USER_NODE = UserNodeSettings(name="tfk8s-no-user-node")


def standalone_platform(
    *,
    owner: Owner,
    kubernetes_version: str,
    storage_class: str,
    settings: PlatformSettings | None = None,
) -> PlatformFacts:
    """The facts a platform stack would publish, for a program with no platform stack to read them
    from: images, ports, Pod Security, placement and timeouts as `settings` say (default: the
    platform defaults, docs/reference/platform.md, and no User Node).

    `kubernetes_version` is the cluster's ("1.34": Job retries per worker from 1.29);
    `storage_class` the class of the volumes the clusters mount. The Layout and Tenant kinds and
    the experimenter role are the names a PlatformGuard of `owner` would create: create one, or
    set `publish_layout=False` on TrainingClusterArgs."""
    given = settings or PlatformSettings(user_node=NO_USER_NODE)
    platform = given.model_copy(update={"kubernetes_version": kubernetes_version})
    group = guard.platform_group(owner)
    return platform_stack.facts(
        platform,
        owner=owner.annotation,
        group=group,
        storage_class=storage_class,
        scratch_storage_class=backends.scratch_class(platform.storage),
        user_node_address=platform.user_node.address,
        experimenter_role=guard.experimenter_role(group),
    )
