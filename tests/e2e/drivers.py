"""The real tools the end-to-end tests drive: kubectl against the e2e cluster, and the plain `pulumi`
CLI in a project copy. (Not in conftest.py: pytest imports every test directory's conftest under the
same module name, so `from conftest import` finds whichever came first.)"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from tfk8s_gitops.identity import minted_kubeconfig, preview_kubeconfig

import toolenv

ROOT = Path(__file__).resolve().parents[2]


def per_worker(name: str) -> str:
    """`name` made this pytest process's own: under pytest-xdist (`make test`) each worker has its
    session's clusters, `<name>-gw0`, `<name>-gw1`, ..."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    return f"{name}-{worker}" if worker else name


# The session's throwaway cluster. Not TFK8S_CLUSTER_NAME: that names the cluster `make up` and
# `make env` use, which a session would otherwise delete at its end. The modules' clusters of their
# own are named after it (`<CLUSTER>-net`, ...).
CLUSTER = per_worker(os.environ.get("TFK8S_E2E_CLUSTER") or "tfk8s-e2e")
# A container's securityContext that Pod Security `restricted`, which tenant namespaces enforce, admits.
RESTRICTED = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
    "runAsUser": 1000,
    "seccompProfile": {"type": "RuntimeDefault"},
}
# One small cluster `mnist`, for experiments that check what happens around a run, not its size.
SMALL_CLUSTER = {
    "tfk8s:clusters[0].name": "mnist",
    "tfk8s:clusters[0].workers.cpu": "500m",
    "tfk8s:clusters[0].workers.memory": "1Gi",
}


class Kube:
    """kubectl against the e2e cluster only, answers parsed from JSON. `cluster` is the local
    cluster's name (hack/cluster.sh's TFK8S_CLUSTER_NAME), for what only the script can do."""

    def __init__(self, kubeconfig: Path, cluster: str | None = None) -> None:
        self.kubeconfig = kubeconfig
        self.cluster = cluster
        self.binary = toolenv.KUBECTL

    def run(self, *args: str) -> str:
        return subprocess.run(
            [self.binary, "--kubeconfig", str(self.kubeconfig), *args], check=True, capture_output=True, text=True
        ).stdout

    def get(self, kind: str, namespace: str | None = None, name: str | None = None) -> Any:
        scope = ["-n", namespace] if namespace else (["-A"] if name is None else [])
        items = json.loads(self.run("get", kind, *([name] if name else []), *scope, "-o", "json"))
        return items if name else items["items"]

    def attempt(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        """kubectl ARGS as this identity, which may be refused: the caller reads the answer."""
        return subprocess.run(
            [self.binary, "--kubeconfig", str(self.kubeconfig), *args], input=stdin, capture_output=True, text=True
        )

    def can_i(self, *question: str) -> bool:
        """`kubectl auth can-i`: exit status 0 is yes, 1 is no."""
        done = self.attempt("auth", "can-i", *question)
        assert done.returncode in (0, 1), done.stderr
        return done.returncode == 0


def user_kube(admin: Kube, user: str, groups: Sequence[str]) -> Kube:
    """kubectl as `user` in `groups` on `admin`'s local cluster, with a client certificate its CA
    signed (hack/cluster.sh user-kubeconfig): an identity RBAC knows nothing about until bound."""
    if admin.cluster is None:
        raise ValueError(f"{admin.kubeconfig}: not a local cluster of hack/cluster.sh (no cluster name)")
    minted = subprocess.run(
        [str(ROOT / "hack" / "cluster.sh"), "user-kubeconfig", user, *groups],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "TFK8S_CLUSTER_NAME": admin.cluster},
    )
    return Kube(Path(minted.stdout.strip()), cluster=admin.cluster)


@dataclass
class Cli:
    """The plain `pulumi` CLI in a project copy, as a user types it (in `env`, default: this process's)."""

    cwd: Path
    env: dict[str, str] | None = None

    def __call__(
        self, *args: str, check: bool = True, env: dict[str, str] | None = None, flags: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """`pulumi ARGS --non-interactive --color never` (`flags=False`: ARGS alone)."""
        done = subprocess.run(
            ["pulumi", *args, *(["--non-interactive", "--color", "never"] if flags else [])],
            cwd=self.cwd,
            capture_output=True,
            text=True,
            env=env or self.env or dict(os.environ),
        )
        if check and done.returncode != 0:
            raise AssertionError(f"pulumi {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
        return done

    def set_value(self, stack: str, path: str, value: str) -> None:
        """`config set --path`, for a value the CLI would take for a flag of its own (`-c`,
        `--steps=60`): the value after `--`."""
        self("config", "set", "--stack", stack, "--path", "--non-interactive", "--", path, value, flags=False)

    def set_secret(self, stack: str, key: str, value: str) -> None:
        """`config set --secret`: the value after `--`, as a generated key may start with `-` (the
        CLI took `-gXmj...` for a flag), and never in an error message."""
        argv = ("config", "set", "--secret", "--stack", stack, "--non-interactive", "--", key, value)
        done = self(*argv, flags=False, check=False)
        if done.returncode != 0:
            shown = " ".join(argv[:-1])
            raise AssertionError(f"pulumi {shown} <value> exited {done.returncode}:\n{done.stdout}\n{done.stderr}")

    def tenant_namespace(self, tenant: str) -> str:
        """The namespace of the `tenant` stack's user (the e2e platforms keep the default prefix)."""
        config = yaml.safe_load((self.cwd / "stacks" / f"Pulumi.{tenant}.yaml").read_text())["config"]
        return f"tfk8s-{config['tfk8s:tenant']['name']}"

    def init_experiment(self, stack: str, *, tenant: str, settings: dict[str, str]) -> None:
        """`stack init` and `config set --path` of an experiment in the namespace of the `tenant`
        stack, as a user types them."""
        self("stack", "init", stack)
        base = {"tfk8s:kind": "experiment", "tfk8s:namespace": self.tenant_namespace(tenant)}
        for path, value in {**base, **settings}.items():
            self("config", "set", "--stack", stack, "--path", path, value)

    def init_tenant(self, stack: str, *, platform: str, user: str, settings: dict[str, str] | None = None) -> None:
        """`stack init` and `config set --path` of a tenant stack for `user`, as a platform team types them
        (its identity: the user name, as `hack/cluster.sh user-kubeconfig` mints it)."""
        self("stack", "init", stack)
        base = {
            "tfk8s:kind": "tenant",
            "tfk8s:platformStack": platform,
            "tfk8s:tenant.name": user,
            "tfk8s:tenant.identities.users[0]": user,
            "tfk8s:tenant.volumes.dataSize": "1Gi",
            "tfk8s:tenant.volumes.logSize": "1Gi",
        }
        for path, value in {**base, **(settings or {})}.items():
            self("config", "set", "--stack", stack, "--path", path, value)

    def outputs(self, stack: str, *, show_secrets: bool = False) -> dict[str, Any]:
        flags = ["--show-secrets"] if show_secrets else []
        return json.loads(self("stack", "output", "--stack", stack, "--json", *flags).stdout)


def cli_of_its_own(work: Path, kubeconfig: Path, *, tree: Path = ROOT) -> Cli:
    """The plain CLI on the project copy at `work` with a state and a passphrase of its own, against
    `kubeconfig` (a module's cluster of its own), with the environment `tree`'s hack/env.sh gives
    (this checkout, or a release's)."""
    mine = {
        "PULUMI_BACKEND_URL": f"file://{work / 'state'}",
        "KUBECONFIG": str(kubeconfig),
        "PULUMI_CONFIG_PASSPHRASE": secrets.token_urlsafe(16),
    }
    env = {k: v for k, v in os.environ.items() if k != "PULUMI_CONFIG_PASSPHRASE_FILE"} | mine
    return Cli(work, env=env | toolenv.exported(mine, tree=tree))


PREVIEW_NAMESPACE, PREVIEW_ACCOUNT = "tfk8s-gitops", "tfk8s-preview"  # tfk8s.specs.preview_identity


def preview_account(admin: Kube) -> None:
    """The pull requests' preview identity's account, in its namespace, made if missing, as a team
    makes it once (docs/guide/gitops.md)."""
    account = subprocess.run(
        [admin.binary, "--kubeconfig", str(admin.kubeconfig), "apply", "-f", "-"],
        input=admin.run("create", "namespace", PREVIEW_NAMESPACE, "--dry-run=client", "-o", "yaml")
        + "---\n"
        + admin.run("create", "serviceaccount", PREVIEW_ACCOUNT, "-n", PREVIEW_NAMESPACE, "--dry-run=client", "-o", "yaml"),
        capture_output=True,
        text=True,
    )
    assert account.returncode == 0, account.stderr


def preview_minter(admin: Kube, directory: Path) -> Path:
    """The kubeconfig of the account that may mint the preview identity's tokens and do nothing else,
    made as docs/guide/gitops.md makes it (its Role: `create` on that one account's
    serviceaccounts/token): what the preview workflow's `state` job holds."""
    preview_account(admin)
    minter, namespace = f"{PREVIEW_ACCOUNT}-minter", PREVIEW_NAMESPACE
    made = subprocess.run(
        [admin.binary, "--kubeconfig", str(admin.kubeconfig), "apply", "-f", "-"],
        input="---\n".join(
            admin.run(*command, "-n", namespace, "--dry-run=client", "-o", "yaml")
            for command in (
                ("create", "serviceaccount", minter),
                (
                    "create",
                    "role",
                    minter,
                    "--verb=create",
                    "--resource=serviceaccounts/token",
                    f"--resource-name={PREVIEW_ACCOUNT}",
                ),
                ("create", "rolebinding", minter, f"--role={minter}", f"--serviceaccount={namespace}:{minter}"),
            )
        ),
        capture_output=True,
        text=True,
    )
    assert made.returncode == 0, made.stderr
    config = minted_kubeconfig(toolenv.exported({"KUBECONFIG": str(admin.kubeconfig)}), minter, namespace, "2h")
    return _kubeconfig_file(directory / "minter.kubeconfig.json", config)


def preview_kube(admin: Kube, directory: Path) -> Kube:
    """kubectl as the pull requests' preview identity: the kubeconfig the preview workflow's team job
    mints (tfk8s_gitops.identity.preview_kubeconfig: `admin`'s server and CA, a token of the account,
    nothing of the admin's). The platform must declare the identity (`platform.gitops.previewIdentity`)
    for the token to be any use."""
    preview_account(admin)
    config = preview_kubeconfig(toolenv.exported({"KUBECONFIG": str(admin.kubeconfig)}), "2h")
    return Kube(_kubeconfig_file(directory / "preview.kubeconfig.json", config))


def _kubeconfig_file(path: Path, config: dict[str, Any]) -> Path:
    """`config` written to `path`, mode 0600 from its first byte (it holds a token)."""
    path.touch(mode=0o600)
    path.write_text(json.dumps(config))
    return path


def team_platform(volumes: Path, storage_class: str) -> dict[str, Any]:
    """A GitOps team's platform stack config on a cluster of its own: kwok's User Node, local volumes
    under `volumes` in a StorageClass named for the test (the session's other platform has its own)."""
    return {
        "tfk8s:kind": "platform",
        "tfk8s:platform": {
            "kubernetesVersion": "1.34",
            "userNode": {"name": "tfk8s-user-node"},
            "network": {"policyEnforced": False},
            "storage": {"backend": "local", "className": storage_class, "local": {"hostPathRoot": str(volumes)}},
            "awaitTimeoutSeconds": 180,
        },
    }


def wait_until(condition: Callable[[], Any], what: str, timeout: float = 60) -> Any:
    """What `condition` returns once it is something, asked every 0.2 s; fails naming `what` after `timeout` s.
    Controllers act after `pulumi` or `kubectl` returns."""
    deadline = time.monotonic() + timeout
    while not (found := condition()):
        assert time.monotonic() < deadline, f"timed out after {timeout:.0f} s waiting for {what}"
        time.sleep(0.2)
    return found
