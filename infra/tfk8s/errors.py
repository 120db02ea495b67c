"""The Pulumi program's refusals: one family of errors and one way to word them.

Every error the program (a stack's build, its checks and reads) raises on purpose is a `Refusal`,
and so a `pulumi.RunError`: the CLI shows its message alone, without a Python traceback, because
the message is already what the user needs (the key as written in the stack file, what is wrong,
the fix). Other errors are raised below and beside the program: the Kubernetes client's
(`KubeApiError`, `ExecCredentialError`, `SecretUnreadable`), which the program's checks turn into
refusals and the commands into one line; and the commands' own, each caught where its command
prints it: `tfk8s status` and `logs`' (`DiscoveryError`, `GateError`), the doctor's
(`TargetError`), GitOps' (`GitError`, `TeamFileError`, `NotPlanned`, `ImpersonationError`,
`OperatorError`). One root for all of them is issue 58's. Each is raised before anything is
declared, so a refusal changes nothing; where several findings are reported at once they are
listed one a line (`listing`), and a refusal that says so ends with `NOTHING_CHANGED`.

Nothing here imports the rest of tfk8s: every layer may raise these.
"""

from __future__ import annotations

from collections.abc import Sequence

import pulumi

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


class Refusal(pulumi.RunError):
    """tfk8s refuses, before anything is declared; the message names the key and the fix."""


class ConfigError(Refusal, ValueError):
    """The stack configuration is invalid; `problems` lists every finding (tfk8s.schema.problems words them)."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__(listing("invalid tfk8s configuration", problems))


class ClusterUnreachable(Refusal):
    """No cluster to deploy to; the message names the kubeconfig and the fix (tfk8s.checks.preflight)."""


class StackUnavailable(Refusal):
    """The platform stack is not there or not deployed; the message names it, the key and the fix (tfk8s.stacks.ref)."""


class ContractUnavailable(Refusal):
    """The experiment's namespace has no contract it may read (tfk8s.stacks.tenant_contract)."""


class AccessDenied(Refusal):
    """The caller's credentials may not do in the tenant's namespace what the experiment needs (tfk8s.checks.access)."""


class OwnershipConflict(Refusal):
    """An object this stack would create exists and belongs to someone else (tfk8s.specs.ownership)."""


class UserNodeTaken(Refusal):
    """The User Node's taints belong to someone else: patching ours in would conflict or clobber theirs."""


class UserNodeTooSmall(Refusal):
    """The User Node cannot hold one more tenant's apps: one node exposes them all, so its pod capacity caps the tenants."""
