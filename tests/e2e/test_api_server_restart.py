"""The cluster's own fault in the middle of a deployment (issue 56): the API server restarted while
`pulumi up` creates a tenant's objects.

On a cluster of its own (a real kube-apiserver and etcd; kwok simulates only the nodes), the dev
platform is up. Alice's tenant `up` starts; once it has created its first object, the API server
is killed (SIGKILL: a crash, the connections in flight reset with it) and started again a few
seconds later with its own command line (kwokctl restarts nothing by itself).

What must hold, whatever the first `up` makes of it (it may fail, naming the unreachable API
server, or complete, the provider having retried):
* the state holds no pending operation: nothing Pulumi would have to be told to forget;
* a second `up` converges: it exits 0 and the tenant reports ready;
* a third changes nothing (the state and the cluster agree);
* every object the deployment made in the cluster (labelled `managed-by: pulumi` in the tenant's
  namespace, the namespace itself) is one the stack's state holds, by uid: nothing is left that no
  stack owns.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from drivers import CLUSTER as E2E_CLUSTER
from drivers import Cli, Kube, cli_of_its_own, wait_until

import toolenv

CLUSTER = f"{E2E_CLUSTER}-restart"
PLATFORM, TENANT, NAMESPACE = "platform-dev", "tenant-alice", "tfk8s-alice"
DOWN_SECONDS = 5.0
# What the tenant's namespace holds that a deployment could leave behind.
KINDS = ",".join(
    [
        "configmaps",
        "secrets",
        "services",
        "deployments",
        "persistentvolumeclaims",
        "serviceaccounts",
        "roles",
        "rolebindings",
        "networkpolicies",
        "resourcequotas",
        "limitranges",
    ]
)


@pytest.fixture(scope="module")
def kube() -> Iterator[Kube]:
    with toolenv.throwaway_cluster(CLUSTER) as kubeconfig:
        yield Kube(kubeconfig, cluster=CLUSTER)


@pytest.fixture(scope="module")
def cli(tmp_path_factory: pytest.TempPathFactory, kube: Kube) -> Cli:
    return cli_of_its_own(toolenv.project_copy(tmp_path_factory.mktemp("restart")), kube.kubeconfig)


def api_server_pid(cluster: str) -> int:
    """The cluster's kube-apiserver, as kwokctl recorded it."""
    return int((toolenv.CACHE / "kwok" / "clusters" / cluster / "pids" / "kube-apiserver.pid").read_text())


def stop_api_server(cluster: str) -> tuple[list[str], str, dict[str, str]]:
    """Kills the cluster's API server; its command line, working directory and environment."""
    pid = api_server_pid(cluster)
    proc = Path(f"/proc/{pid}")
    argv = [a.decode() for a in (proc / "cmdline").read_bytes().split(b"\0") if a]
    cwd = os.readlink(proc / "cwd")
    env = dict(e.decode().split("=", 1) for e in (proc / "environ").read_bytes().split(b"\0") if b"=" in e)
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not proc.exists() or "State:\tZ" in (proc / "status").read_text(), "the API server gone", 30)
    return argv, cwd, env


def start_api_server(kube: Kube, cluster: str, argv: list[str], cwd: str, env: dict[str, str]) -> None:
    """Starts it again as kwokctl did, and records its pid where `kwokctl delete` looks for it."""
    log = toolenv.CACHE / "kwok" / "clusters" / cluster / "logs" / "kube-apiserver.log"
    with log.open("ab") as out:
        started = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=out, start_new_session=True)
    (toolenv.CACHE / "kwok" / "clusters" / cluster / "pids" / "kube-apiserver.pid").write_text(str(started.pid))

    def ready() -> bool:
        done = subprocess.run(
            [kube.binary, "--kubeconfig", str(kube.kubeconfig), "get", "--raw", "/readyz"], capture_output=True, text=True
        )
        return done.returncode == 0 and done.stdout.strip() == "ok"

    wait_until(ready, "the API server ready again", 60)


def api_server_address(kube: Kube) -> str:
    """`host:port` of the cluster's API server, as its kubeconfig names it."""
    config = yaml.safe_load(kube.kubeconfig.read_text())
    return str(config["clusters"][0]["cluster"]["server"]).removeprefix("https://")


def state(cli: Cli, stack: str) -> dict[str, Any]:
    deployment: dict[str, Any] = json.loads(cli("stack", "export", "--stack", stack, flags=False).stdout)["deployment"]
    return deployment


def uids_in_state(deployment: dict[str, Any]) -> set[str]:
    return {
        uid
        for resource in deployment.get("resources", [])
        if (uid := ((resource.get("outputs") or {}).get("metadata") or {}).get("uid"))
    }


def uids_in_cluster(kube: Kube) -> dict[str, str]:
    """uid -> `kind/name` of what the deployment made: its objects in the namespace, the namespace."""
    made = {
        o["metadata"]["uid"]: f"{o['kind']}/{o['metadata']['name']}"
        for o in kube.get(KINDS, NAMESPACE)
        if (o["metadata"].get("labels") or {}).get("app.kubernetes.io/managed-by") == "pulumi"
    }
    namespace = kube.get("namespace", name=NAMESPACE)
    return {**made, namespace["metadata"]["uid"]: f"Namespace/{NAMESPACE}"}


def test_an_up_whose_api_server_restarts_midway_converges_on_the_next_up_and_leaves_nothing_unowned(kube: Kube, cli: Cli) -> None:
    cli("stack", "select", "--create", PLATFORM)
    cli("up", "--stack", PLATFORM, "--yes", "--skip-preview")
    cli("stack", "select", "--create", TENANT)

    # From before the `up` until the API server is back: its port stays this cluster's.
    with toolenv.no_cluster_created():
        first = subprocess.Popen(
            ["pulumi", "up", "--stack", TENANT, "--yes", "--skip-preview", "--non-interactive", "--color", "never"],
            cwd=cli.cwd,
            env=cli.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert first.stdout is not None
        lines: list[str] = []
        for line in first.stdout:  # until its first object exists
            lines.append(line)
            if " created (" in line:
                break
        else:
            pytest.fail("the tenant's `up` ended before it created anything:\n" + "".join(lines))
        stopped = time.monotonic()
        argv, cwd, env = stop_api_server(CLUSTER)
        time.sleep(DOWN_SECONDS)
        start_api_server(kube, CLUSTER, argv, cwd, env)
        outage = time.monotonic() - stopped
    lines += first.stdout.readlines()
    code = first.wait(600)
    said = "".join(lines)
    if code != 0:  # a failure names what failed: the API server it lost
        assert api_server_address(kube) in said, said[-4000:]

    pending = state(cli, TENANT).get("pending_operations") or []
    assert not pending, f"the first `up` (exit {code}) left pending operations: {pending}\n{said[-3000:]}"

    second = cli("up", "--stack", TENANT, "--yes", "--skip-preview", check=False)
    assert second.returncode == 0, second.stdout[-4000:] + second.stderr
    assert cli.outputs(TENANT)["readiness"]["ready"], cli.outputs(TENANT)["readiness"]
    third = cli("preview", "--stack", TENANT, "--expect-no-changes", "--diff", check=False)
    assert third.returncode == 0, third.stdout[-4000:] + third.stderr

    deployment = state(cli, TENANT)
    assert not deployment.get("pending_operations"), deployment["pending_operations"]
    unowned = {uid: what for uid, what in uids_in_cluster(kube).items() if uid not in uids_in_state(deployment)}
    assert not unowned, f"in the cluster, in no stack's state: {sorted(unowned.values())}"
    print(
        f"\n[api server restart] the API server down {outage:.1f} s in the middle of the tenant's `up`: that `up` exited "
        f"{code}; the next converged; {len(uids_in_cluster(kube))} objects, all in the stack's state"
    )
