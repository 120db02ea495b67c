"""tfk8s's errors: one root, one family per who must act, and one way to word them.

Every error tfk8s raises on purpose is a `Tfk8sError`: its message is already what the user needs
(the key as written in the stack file or the command, what is wrong, the fix), so it is shown
alone, and anything else that escapes is a bug, shown with its traceback. Beneath the root:

- `Refusal`: what was asked cannot be done as asked; the stack file or the arguments must change
  (`ConfigError`, one finding a line; GitOps' `TeamFileError`, `NotPlanned`, `OperatorError`), or
  they collide with what the cluster holds (`OwnershipConflict`, `UserNodeTaken`).
- `MissingPrerequisite`: what was asked is fine, but the cluster or the stacks it builds on lack
  what it needs (`ClusterUnreachable`, `ClusterLacks`, `StackUnavailable`, `ContractUnavailable`,
  `AccessDenied`, `UserNodeTooSmall`; GitOps' `ImpersonationError`, `BackendError`): someone deploys or grants
  something, and runs it again.
- the Kubernetes client's (`tfk8s.kube`: `KubeApiError`, `ExecCredentialError`,
  `SecretUnreadable`), which the program's checks turn into the two above and the commands into
  one line; and the commands' own, each caught where its command prints it: `tfk8s status` and
  `logs`' (`DiscoveryError`, `GateError`), the doctor's (`TargetError`), GitOps' `GitError`.

Refusals and missing prerequisites are raised before anything is declared, so they change
nothing; where several findings are reported at once they are listed one a line (`listing`), and
a message that says so ends with `NOTHING_CHANGED`.

Nothing here imports Pulumi or the rest of tfk8s: every layer may raise these, the Pulumi-free ones
(the schema, the client, the commands, GitOps) included. Pulumi shows a `pulumi.RunError` alone
and any other exception as a bug; tfk8s.pulumi_errors turns these into RunErrors where they leave
for the Pulumi SDK.
"""

from __future__ import annotations

from collections.abc import Sequence

NOTHING_CHANGED = "nothing was changed"


def listing(headline: str, problems: Sequence[str]) -> str:
    """`headline:` then one problem a line, each as `  - problem`."""
    return headline + ":\n  - " + "\n  - ".join(problems)


def refusing(problems: Sequence[str], reason: str | None = None) -> str:
    """'refusing <reason>; nothing was changed:' (or 'refusing: nothing was changed:'), then the problems."""
    return listing(f"refusing {reason}; {NOTHING_CHANGED}" if reason else f"refusing: {NOTHING_CHANGED}", problems)


def unchanged(message: str) -> str:
    """One refusal's message, then that nothing was changed."""
    return f"{message}; {NOTHING_CHANGED}"


class Tfk8sError(Exception):
    """An error tfk8s raises on purpose; its message is whole (what, where, the fix) and is shown alone."""


class Refusal(Tfk8sError):
    """tfk8s refuses what was asked, before anything is declared; the message names the key and the fix."""


class MissingPrerequisite(Tfk8sError):
    """The cluster, a stack this one builds on, or the Python environment (the trainer package
    beside tfk8s) lacks what the run needs; nothing was declared. The message names what is
    missing and who provides it."""


class ConfigError(Refusal, ValueError):
    """The stack configuration is invalid; `problems` lists every finding (tfk8s.settings.problems words them)."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__(listing("invalid tfk8s configuration", problems))


class OwnershipConflict(Refusal):
    """An object this stack would create exists and belongs to someone else (tfk8s.specs.ownership)."""


class UserNodeTaken(Refusal):
    """The User Node's taints belong to someone else: patching ours in would conflict or clobber theirs."""


class ClusterUnreachable(MissingPrerequisite):
    """No cluster to deploy to; the message names the kubeconfig and the fix (tfk8s.kube.client)."""


class ClusterLacks(MissingPrerequisite):
    """The cluster does not serve an API the stack's settings need (Kueue's, JobSet's);
    `problems` lists each with its settings key and the fix."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__(listing("the cluster lacks what the stack needs", problems))


class StackUnavailable(MissingPrerequisite):
    """The platform stack is not there or not deployed; the message names it, the key and the fix (tfk8s.stack_kinds.ref)."""


class ContractUnavailable(MissingPrerequisite):
    """The experiment's namespace has no contract it may read (tfk8s.stack_kinds.tenant_contract)."""


class AccessDenied(MissingPrerequisite):
    """The caller's credentials may not do in the tenant's namespace what the experiment needs (tfk8s.checks.access)."""


class UserNodeTooSmall(MissingPrerequisite):
    """The User Node cannot hold one more tenant's apps: one node exposes them all, so its pod capacity caps the tenants."""
