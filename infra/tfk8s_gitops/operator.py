"""`hack/gitops.sh operator-stack STACK --repo URL`: the Pulumi Kubernetes Operator (v2) objects that
reconcile one stack file in-cluster instead of from CI (docs/guide/gitops.md):

- a ServiceAccount for the stack's workspace pod, bound to `system:auth-delegator` (the operator
  authenticates to its workspace agent with the pod's token);
- its rights: the platforms and tenants the team file declares (`repo.TEAM_FILE`, at the
  checkout's HEAD: the team renders these objects from its own branch) create cluster-scoped
  objects (namespaces, roles, CRDs, admission policies), so their account is bound to
  `cluster-admin`, the platform team's; a stack file whose kind disagrees with the team file is
  refused; an experiment's account gets nothing here: it must be one of its tenant's identities
  (`tfk8s:tenant.identities.users`), so it has exactly the rights a person of that tenant has;
- the `Stack` itself: the repository, branch and stack, the object-store backend, the passphrase
  and the store's keys from Secrets (never inline), `prerequisites` in the plan's order
  (platform <- tenant <- experiment), and `destroyOnFinalize` from what destroying would lose.
  A platform's and a tenant's workspace read the team's Secrets (`--passphrase-secret`,
  `--backend-secret`); an experiment's reads its tenant's alone, named after the tenant
  (`tenant_secrets`): the team's passphrase opens every platform's and tenant's secrets (the
  Heketi key, the Jupyter tokens), which an experiment's program never needs.
"""

from __future__ import annotations

import argparse
import os
from importlib.metadata import version
from typing import Any

import yaml
from tfk8s.errors import Refusal
from tfk8s.settings import NAMESPACE, stack_file
from tfk8s.settings.experiment import ExperimentStack
from tfk8s.settings.platform import PlatformStack
from tfk8s.settings.tenant import GITOPS_NAMESPACE, SERVICE_ACCOUNT_PREFIX, TenantStack

from tfk8s_gitops.identity import identity, service_account
from tfk8s_gitops.plan import disagreement
from tfk8s_gitops.repo import Repo, StackFile

API_VERSION = "pulumi.com/v1"
# The workspace image: the CLI of the Python SDK this project pins (pyproject.toml, the same
# release as hack/versions.sh's PULUMI_VERSION), non-root so the workspace passes `restricted`.
WORKSPACE_IMAGE = f"pulumi/pulumi-python:{version('pulumi')}-nonroot"
# The variables the workspace's CLI needs, and the Secret key each is read from.
PASSPHRASE_ENV = {"PULUMI_CONFIG_PASSPHRASE": "passphrase"}
S3_ENV = {"AWS_ACCESS_KEY_ID": "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY": "AWS_SECRET_ACCESS_KEY"}
# The team's Secrets, which the platform's and tenants' workspaces read.
TEAM_PASSPHRASE_SECRET = "tfk8s-gitops-passphrase"
TEAM_BACKEND_SECRET = "tfk8s-gitops-s3"


class OperatorError(Refusal):
    """A stack that cannot be reconciled as asked; the message names the key or flag and the fix."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("stack", help="a stack file of the checkout (stacks/Pulumi.<stack>.yaml)")
    parser.add_argument("--repo", required=True, help="the git URL the operator clones")
    parser.add_argument("--branch", default="main")
    parser.add_argument(
        "--namespace",
        default=GITOPS_NAMESPACE,
        help=f"where the Stack and its ServiceAccount live; an experiment's: {GITOPS_NAMESPACE}, whose accounts tenants accept",
    )
    parser.add_argument(
        "--backend",
        default=os.environ.get("PULUMI_BACKEND_URL"),
        help="the team's store; an experiment's: its tenant's (default: $PULUMI_BACKEND_URL)",
    )
    parser.add_argument(
        "--passphrase-secret",
        help=f"a platform's or tenant's: the team's Secret with key `passphrase` (default: {TEAM_PASSPHRASE_SECRET}); "
        "an experiment's is its tenant's, by name",
    )
    parser.add_argument(
        "--backend-secret",
        help=f"a platform's or tenant's: the team's Secret with keys AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
        f"(default: {TEAM_BACKEND_SECRET}); an experiment's is its tenant's, by name",
    )
    parser.add_argument("--resync-seconds", type=int, default=300, help="how often the operator polls the branch (>= 60)")


def settings(file: StackFile) -> PlatformStack | TenantStack | ExperimentStack:
    """The stack file's model (secrets left out), or the program's own ConfigError."""
    prefix = f"{NAMESPACE}:"
    raw = {k[len(prefix) :]: v for k, v in file.config.items() if k.startswith(prefix)}
    secrets = [k for k in raw if k in stack_file.SECRET_KEYS]
    return stack_file.validate({k: v for k, v in raw.items() if k not in stack_file.SECRET_KEYS}, secrets)


def destroy_on_finalize(model: PlatformStack | TenantStack | ExperimentStack) -> bool:
    """Whether deleting the Stack object may destroy the stack: never a platform (every tenant stands
    on it); a tenant only if its volumes are kept (`volumes.keepOnDestroy`); an experiment unless a
    cluster has a scratch volume (its files go with the experiment; its logs are the tenant's)."""
    if isinstance(model, TenantStack):
        return model.tenant.volumes.keep_on_destroy
    if isinstance(model, ExperimentStack):
        return not any(cluster.scratch for cluster in model.clusters)
    return False


def render(repo: Repo, args: argparse.Namespace) -> list[dict[str, Any]]:
    """The operator's objects for `args.stack`: its ServiceAccount, the ClusterRoleBindings its kind
    needs, and its Stack; an OperatorError naming the flag or key and the fix first."""
    stacks = repo.stack_files("HEAD")
    _check_arguments(args, stacks)
    file = stacks[args.stack]
    team = repo.team_stacks("HEAD")
    why = disagreement(team, file)
    if why:
        raise OperatorError(why)
    model = settings(file)
    project, _ = repo.project("HEAD")
    account = service_account(args.stack)
    labels = {"app.kubernetes.io/managed-by": "tfk8s-gitops", "tfk8s.io/stack": args.stack}
    meta = {"name": account, "namespace": args.namespace, "labels": labels}
    objects: list[dict[str, Any]] = [{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta}]
    subject = [{"kind": "ServiceAccount", "name": account, "namespace": args.namespace}]
    roles = ["system:auth-delegator"]
    secrets = _team_secrets(args)
    if team.kind_of(args.stack) is not None:
        roles.append("cluster-admin")
    elif isinstance(model, ExperimentStack):
        tenant = _check_tenant_lists(stacks, file, identity(args.stack, args.namespace))
        secrets = _experiment_secrets(args, tenant.tenant.name)
    for role in roles:
        objects.append(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": f"{args.namespace}:{account}:{role.removeprefix('system:')}", "labels": labels},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                "subjects": subject,
            }
        )
    spec: dict[str, Any] = {
        "stack": f"organization/{project}/{args.stack}",
        "projectRepo": args.repo,
        "branch": args.branch,
        "backend": args.backend,
        "serviceAccountName": account,
        "destroyOnFinalize": destroy_on_finalize(model),
        "refresh": True,
        "resyncFrequencySeconds": args.resync_seconds,
        # A stack file must be in git (the truth); never create a stack the repository lacks.
        "useLocalStackOnly": True,
        "envRefs": _env_refs(args.backend, *secrets),
        "workspaceTemplate": {"spec": {"image": WORKSPACE_IMAGE, "securityProfile": "restricted"}},
    }
    if file.upstream is not None and file.upstream in stacks:
        spec["prerequisites"] = [{"name": service_account(file.upstream)}]
    objects.append({"apiVersion": API_VERSION, "kind": "Stack", "metadata": {**meta}, "spec": spec})
    return objects


def _check_arguments(args: argparse.Namespace, stacks: dict[str, StackFile]) -> None:
    if args.stack not in stacks:
        raise OperatorError(f"{args.stack}: no stack file of that name at HEAD (have: {', '.join(sorted(stacks))})")
    if not args.backend or args.backend.startswith("file:"):
        raise OperatorError(
            f"--backend {args.backend or '(unset)'}: the workspace pod cannot reach this machine's files; "
            "give the team's object store, e.g. s3://bucket?endpoint=...&s3ForcePathStyle=true"
        )
    if args.resync_seconds < 60:
        raise OperatorError(f"--resync-seconds {args.resync_seconds}: the operator requires at least 60")


def tenant_secrets(tenant: str) -> tuple[str, str]:
    """The Secrets (passphrase, store's keys) of a tenant's experiments' workspaces: the tenant's
    own passphrase and keys to its own store, which the platform team creates beside the team's."""
    return f"tfk8s-tenant-{tenant}-passphrase", f"tfk8s-tenant-{tenant}-s3"


def _team_secrets(args: argparse.Namespace) -> tuple[str, str]:
    return args.passphrase_secret or TEAM_PASSPHRASE_SECRET, args.backend_secret or TEAM_BACKEND_SECRET


def _experiment_secrets(args: argparse.Namespace, tenant: str) -> tuple[str, str]:
    """An experiment's Secrets: its tenant's, never a name given on the command line (which may be
    the team's)."""
    own = tenant_secrets(tenant)
    for flag, given in (("--passphrase-secret", args.passphrase_secret), ("--backend-secret", args.backend_secret)):
        if given:
            raise OperatorError(
                f"{flag} {given}: an experiment's workspace reads its tenant's Secrets alone, {own[0]} and {own[1]} "
                f"in {args.namespace}, never the team's; drop {flag} and create those with {tenant}'s passphrase and "
                "keys to its own store (docs/guide/gitops.md)"
            )
    return own


def _env_refs(backend: str, passphrase_secret: str, backend_secret: str) -> dict[str, Any]:
    """The workspace CLI's variables, each from its Secret: the passphrase, and an S3 backend's keys."""
    env = {**PASSPHRASE_ENV}
    env_secret = {name: passphrase_secret for name in PASSPHRASE_ENV}
    if backend.startswith("s3:"):
        env.update(S3_ENV)
        env_secret.update({name: backend_secret for name in S3_ENV})
    return {name: {"type": "Secret", "secret": {"name": env_secret[name], "key": key}} for name, key in env.items()}


def _check_tenant_lists(stacks: dict[str, StackFile], file: StackFile, user: str) -> TenantStack:
    """The experiment's tenant, which must list the experiment's workspace among its identities."""
    tenant_name = file.upstream
    tenant = stacks.get(tenant_name or "")
    key = f"{NAMESPACE}:tenant.identities.users"
    if tenant is None:
        raise OperatorError(f"{file.path}: its tenant stack {tenant_name!r} has no stack file here to grant the workspace rights")
    model = settings(tenant)
    if not isinstance(model, TenantStack) or user not in model.tenant.identities.users:
        raise OperatorError(
            f"{tenant.path}: {key} does not list {user!r}, the operator workspace of {file.name}; add it there "
            "(its pod then has exactly the rights of the tenant's people, in the tenant's namespace)"
        )
    if not user.startswith(f"{SERVICE_ACCOUNT_PREFIX}{GITOPS_NAMESPACE}:"):
        # A tenant's `up` refuses service accounts of other namespaces (tfk8s.checks.tenant).
        raise OperatorError(
            f"--namespace: a tenant accepts service accounts of its own namespace and of {GITOPS_NAMESPACE} alone as "
            f"identities, not {user!r}: run the experiment's Stack in {GITOPS_NAMESPACE} (the default)"
        )
    return model


def render_yaml(repo: Repo, args: argparse.Namespace) -> str:
    return yaml.safe_dump_all(render(repo, args), sort_keys=False)
