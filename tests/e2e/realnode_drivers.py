"""This machine's real node in the e2e tests: lab/realnode.py (a throwaway local cluster with it,
images built here imported into it, a platform and experiments that run there) through the tests'
drivers, and the probes the tests run on it.

On a machine that cannot run one (no root, no cgroups), the tests that use it fail with the reason
`lab/realnode.sh check` gives; they are not skipped.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from drivers import Cli, Kube

import realnode
import toolenv
from realnode import BRIDGE_ADDRESS as BRIDGE_ADDRESS
from realnode import MNIST_ON_THE_NODE as MNIST_ON_THE_NODE
from realnode import POD_CIDR as POD_CIDR
from realnode import REAL_NODE_KEY as REAL_NODE_KEY
from realnode import REALNODE as REALNODE
from realnode import UID as UID
from realnode import deploy_platform_and_tenant as deploy_platform_and_tenant
from realnode import platform_on_the_node as platform_on_the_node
from realnode import platform_settings as platform_settings
from realnode import shared_user_node as shared_user_node

T = TypeVar("T")


def assert_machine_can_run_it(cluster: str) -> None:
    realnode.install()
    reason = realnode.why_not(cluster)
    assert reason is None, f"this machine cannot run the real-node tests: {reason}"


@contextlib.contextmanager
def real_cluster(name: str, *, queueing: bool = False) -> Iterator[Kube]:
    """A local cluster of its own with this machine's real node (and `queueing`: Kueue and JobSet),
    stopped with the cluster (realnode.real_cluster fails with the reason if this machine cannot run one)."""
    with realnode.real_cluster(name, queueing=queueing) as kubeconfig:
        yield Kube(kubeconfig, cluster=name)


def node_of(kube: Kube) -> str:
    return realnode.node_name(kube.cluster or "")


def node_diagnostics(kube: Kube, namespace: str) -> str:
    """What explains a pod that never started on the real node (a sandbox that stays
    ContainerCreating has no log of its own): the namespace's events, and the last lines of the
    node's kubelet and containerd logs (lab/realnode.sh keeps them beside the node's state)."""
    events = subprocess.run(
        [kube.binary, "--kubeconfig", str(kube.kubeconfig), "get", "events", "-n", namespace, "--sort-by=.lastTimestamp"],
        capture_output=True,
        text=True,
    )
    out = [f"--- events in {namespace}\n{events.stdout[-4000:]}{events.stderr[-500:]}"]
    for daemon in ("kubelet", "containerd"):
        log = toolenv.CACHE / "realnode" / (kube.cluster or "") / f"{daemon}.log"
        tail = log.read_text(errors="replace").splitlines()[-40:] if log.exists() else [f"(no {log})"]
        out.append(f"--- {daemon}.log\n" + "\n".join(tail))
    return "\n".join(out)


def failure_report(kube: Kube, namespace: str) -> str:
    """Why pods of `namespace` on the real node did not do what a test waited for: each pod's last
    log lines, their statuses, then node_diagnostics (events, kubelet and containerd)."""
    out = []
    pods = kube.get("pods", namespace)
    for pod in pods:
        name = pod["metadata"]["name"]
        logs = subprocess.run(
            [kube.binary, "--kubeconfig", str(kube.kubeconfig), "logs", "-n", namespace, name, "--all-containers", "--tail=30"],
            capture_output=True,
            text=True,
        )
        out.append(f"--- {name}\n{logs.stdout}{logs.stderr}")
    statuses = json.dumps([p["status"] for p in pods])[:4000]
    return "\n".join(out) + statuses + "\n" + node_diagnostics(kube, namespace)


def kill_container(kube: Kube, pod: dict[str, Any]) -> None:
    """The pod's one container killed in place, its processes SIGKILLed on the node
    (realnode.kill_container): the kubelet restarts it in the same pod, at the same address."""
    (status,) = pod["status"]["containerStatuses"]
    realnode.kill_container(kube.cluster or "", status["containerID"])


@contextlib.contextmanager
def kubelet_stopped(kube: Kube) -> Iterator[None]:
    """The node's kubelet stopped for the block (realnode.stop_kubelet: its pods' containers run on)
    and started again after it, whatever happens: a node that stops answering and comes back."""
    realnode.stop_kubelet(kube.cluster or "")
    try:
        yield
    finally:
        realnode.start_kubelet(kube.cluster or "")


def experiment_pods(kube: Kube, namespace: str, stack: str) -> list[dict[str, Any]]:
    """Every pod of the `stack` experiment in `namespace`."""
    return [p for p in kube.get("pods", namespace) if p["metadata"]["labels"].get("tfk8s.io/stack") == stack]


def task_pod(kube: Kube, namespace: str, stack: str, task: str) -> dict[str, Any]:
    """The pod of the `stack` run's `task` not being deleted (`ps-<i>`: its Deployment's one pod;
    `worker-<i>`: the Job's completion index i, 0 the chief of a between-graph run)."""
    role, index = task.rsplit("-", 1)
    label = "tfk8s.io/index" if role == "ps" else "batch.kubernetes.io/job-completion-index"
    (pod,) = [
        p
        for p in experiment_pods(kube, namespace, stack)
        if p["metadata"]["labels"].get("app.kubernetes.io/component") == role
        and p["metadata"]["labels"].get(label) == index
        and "deletionTimestamp" not in p["metadata"]
    ]
    return pod


def workers_done(kube: Kube, namespace: str, stack: str) -> dict[str, Any] | None:
    """The experiment's workers' Job once both workers succeeded; fails at once if the Job failed.
    (A worker pod may fail and be retried, backoffLimitPerIndex: the run fails with the Job alone.)"""
    (job,) = [j for j in kube.get("jobs", namespace) if j["metadata"]["labels"].get("tfk8s.io/stack") == stack]
    status = job.get("status", {})
    failed = [c for c in status.get("conditions", []) if c["type"] == "Failed" and c["status"] == "True"]
    assert not failed, f"{failed}\n{failure_report(kube, namespace)}"
    return job if status.get("succeeded") == 2 else None


def ps_retired(kube: Kube, namespace: str, stack: str) -> bool:
    """Each PS of the experiment scaled its own Deployment to zero."""
    deployments = [d for d in kube.get("deployments", namespace) if d["metadata"]["labels"].get("tfk8s.io/stack") == stack]
    return bool(deployments) and all(d["spec"]["replicas"] == 0 for d in deployments)


def delete_at_once(kube: Kube, pod: dict[str, Any]) -> None:
    """The pod deleted at once, no grace, as a task is lost: the API object goes now, the kubelet
    kills what is left of it."""
    meta = pod["metadata"]
    kube.run("delete", "pod", "-n", meta["namespace"], meta["name"], "--grace-period=0", "--force", "--wait=false")


def untaint(kube: Kube) -> None:
    """The real node without its own taint (realnode.untaint): the User Node's apps may land there."""
    realnode.untaint(kube.cluster or "")


def import_image(kube: Kube, what: str) -> str:
    """Builds (cached by content) and imports one of lab/images.py's images; its tag."""
    return realnode.import_image(kube.cluster or "", what)


def project(kube: Kube, work: Path, passphrase: str) -> Cli:
    """The plain `pulumi` CLI in a project copy of its own, against `kube`, with a file backend."""
    work = toolenv.project_copy(work)
    env = {
        **os.environ,
        "PULUMI_BACKEND_URL": f"file://{work / 'state'}",
        "KUBECONFIG": str(kube.kubeconfig),
        "PULUMI_CONFIG_PASSPHRASE": passphrase,
    }
    env.pop("PULUMI_CONFIG_PASSPHRASE_FILE", None)
    env.update(toolenv.exported(env))
    return Cli(work, env)


def place_on_real_node(cli: Cli, stack: str, cluster: int) -> None:
    """`config set` of an experiment's cluster so that its PS and workers ask for the real node."""
    for args in realnode.placement(cluster):
        cli("config", "set", "--stack", stack, *args)


def give_volumes_to_pods(kube: Kube, log_dirs: Iterable[str]) -> None:
    """The platform's hostPath volumes and the log volume's `<experiment>/<cluster>` directories,
    given to the pods' user (realnode.give_volumes_to_pods)."""
    realnode.give_volumes_to_pods(kube.kubeconfig, log_dirs)


def until(what: str, seconds: float, probe: Callable[[], T | None], *, report: Callable[[], str] | None = None) -> T:
    """Polls `probe` every second until it returns something; fails naming `what` after `seconds`,
    with what `report` says of why (e.g. failure_report's pods and node)."""
    deadline = time.monotonic() + seconds
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what} within {seconds} s" + (f"\n{report()}" if report else ""))
        time.sleep(1)


# Run in a pod or on this machine: connects to each `address:port` at once; {target: connected}.
PROBE = """
import json, socket, sys
from concurrent.futures import ThreadPoolExecutor
def reaches(target):
    address, port = target.rsplit(":", 1)
    with socket.socket() as s:
        s.settimeout(3)
        return s.connect_ex((address, int(port))) == 0
with ThreadPoolExecutor(16) as pool:
    print(json.dumps(dict(zip(sys.argv[1:], pool.map(reaches, sys.argv[1:])))))
"""


def create(kube: Kube, manifest: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    """`kubectl create -f -` of `manifest` as `kube`'s identity (a tenant's, to be refused or not),
    its outcome for the caller to judge."""
    return subprocess.run(
        [kube.binary, "--kubeconfig", str(kube.kubeconfig), "create", "-f", "-"],
        input=json.dumps(manifest),
        capture_output=True,
        text=True,
    )


def probe_from_pod(kube: Kube, pod: dict[str, Any], targets: dict[str, str]) -> dict[str, bool]:
    """From inside `pod` (its own Python): which of `targets` (`name: address:port`) accept a connection."""
    where = ["-n", pod["metadata"]["namespace"], pod["metadata"]["name"]]
    out = kube.run("exec", *where, "--", "python3", "-c", PROBE, *targets.values())
    reached = json.loads(out.strip().splitlines()[-1])
    return {name: reached[target] for name, target in targets.items()}


def probe_from_node(targets: dict[str, str]) -> dict[str, bool]:
    """The same probe from this machine: the node itself, where kubelet probes, NodePorts and users'
    browsers come from."""
    done = subprocess.run([sys.executable, "-c", PROBE, *targets.values()], check=True, capture_output=True, text=True)
    reached = json.loads(done.stdout)
    return {name: reached[target] for name, target in targets.items()}


@dataclass(frozen=True)
class Answer:
    status: int
    server: str  # the `Server` header: which program answered
    body: str


def http_get(url: str, token: str | None = None) -> Answer:
    """GET `url` from this machine (no proxy), with a tenant's token as a header if given."""
    request = urllib.request.Request(url, headers={"Authorization": f"token {token}"} if token else {})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=10) as response:
            return Answer(response.status, response.headers.get("Server", ""), response.read().decode(errors="replace"))
    except urllib.error.HTTPError as error:
        return Answer(error.code, error.headers.get("Server", ""), error.read().decode(errors="replace"))


def first_answer(url: str, token: str | None = None, seconds: float = 15.0) -> Answer:
    """`http_get(url, token)` once the URL's NodePort accepts connections. kube-proxy programs a
    Service's NodePort after its endpoints change, which a Deployment's rollout (what `pulumi up`
    awaits) does not wait for: until then the node refuses the connection. Fails after `seconds`."""

    def attempt() -> Answer | None:
        try:
            return http_get(url, token)
        except urllib.error.URLError as error:
            if isinstance(error.reason, ConnectionRefusedError):
                return None
            raise

    return until(f"{url} accepts connections", seconds, attempt)
