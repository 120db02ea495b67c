"""This machine's real node (lab/realnode.sh) from Python, for the e2e tests and the benchmarks
that run pods for real: a throwaway local cluster with it, images built here imported into it,
what a platform and an experiment need to run there, and the volumes given to the pods' user.
The tests' view of it (tests/e2e/realnode_drivers.py) adds their drivers and probes.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

import toolenv

REALNODE = str(toolenv.ROOT / "lab" / "realnode.sh")
# The label and taint the real node registers with: what asks for it lands there, nothing else.
REAL_NODE_KEY = "tfk8s.io/real-node"
# The node's bridge address: its CoreDNS answers there (no pod, so a platform whose pods run there
# allows it by address, platform.network.dns.cidrs), and this machine reaches its NodePorts there.
BRIDGE_ADDRESS = "10.88.0.1"
# The pods' addresses on the node's bridge (lab/realnode.sh pod_cidr).
POD_CIDR = "10.88.0.0/16"
# The images' user (lab/images.py) and the platform's default pod identity for TensorFlow pods.
UID = 1000


def script_env(cluster: str) -> dict[str, str]:
    """The environment lab/realnode.sh and hack/cluster.sh act on `cluster` in."""
    return {**os.environ, "TFK8S_CLUSTER_NAME": cluster}


def why_not(cluster: str) -> str | None:
    """Why this machine cannot run a real node (`lab/realnode.sh check`), or None if it can."""
    check = subprocess.run([REALNODE, "check"], capture_output=True, text=True, env=script_env(cluster))
    return None if check.returncode == 0 else check.stdout.strip()


def install() -> None:
    """As root, the Debian packages a real node needs, if any is missing (`lab/realnode.sh
    install`, as `make real-node-deps` runs it; without root, `why_not` says what is missing)."""
    if os.geteuid() == 0:
        subprocess.run([REALNODE, "install"], check=True, stdout=subprocess.DEVNULL)


@contextlib.contextmanager
def real_cluster(name: str, *, queueing: bool = False) -> Iterator[Path]:
    """A local cluster of its own with this machine's real node (and `queueing`: Kueue and JobSet),
    both stopped afterwards whatever happens (hack/cluster.sh stop stops the node too); yields its kubeconfig."""
    install()
    reason = why_not(name)
    if reason:
        raise RuntimeError(f"this machine cannot run a real node: {reason}")
    with one_at_a_time(), toolenv.throwaway_cluster(name, queueing=queueing, real_node=True) as kubeconfig:
        yield kubeconfig


@contextlib.contextmanager
def one_at_a_time() -> Iterator[None]:
    """This machine's real node to the caller alone until the block ends: a second caller (a
    benchmark beside the tests, another test session) waits here rather than finding the node
    taken (lab/realnode.sh refuses a second cluster while one holds it)."""
    locks = toolenv.CACHE / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    with (locks / "realnode.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def kill_container(cluster: str, container_id: str) -> None:
    """SIGKILL to every process of a container on the node (a pod's status names it
    `containerd://<id>`): the container dies in place and the kubelet restarts it in its pod."""
    subprocess.run([REALNODE, "kill-container", container_id.removeprefix("containerd://")], check=True, env=script_env(cluster))


def stop_kubelet(cluster: str) -> None:
    """The node's kubelet stopped, its pods' containers left running: a node that stops answering."""
    subprocess.run([REALNODE, "kubelet-stop"], check=True, env=script_env(cluster))


def start_kubelet(cluster: str) -> None:
    """The node's kubelet started again, as it was; returns once the node is Ready."""
    subprocess.run([REALNODE, "kubelet-start"], check=True, env=script_env(cluster))


def node_name(cluster: str) -> str:
    return f"tfk8s-real-{cluster}"


def import_image(cluster: str, what: str) -> str:
    """Builds (cached by content) and imports one of lab/images.py's images; its tag."""
    done = subprocess.run([REALNODE, "import", what], check=True, capture_output=True, text=True, env=script_env(cluster))
    return done.stdout.strip()


def platform_settings(volumes: Path) -> dict[str, str]:
    """What a platform whose pods run on the real node needs: its volumes on this machine, the
    node's DNS server, which is no pod, allowed by address, and the pod network, kept out of the apps."""
    return {
        "tfk8s:platform.storage.local.hostPathRoot": str(volumes),
        # TensorFlow pods on a machine whose two cores the tests share start slowly: the default's
        # wait, not platform-dev's 3 minutes (two modules' `up` timed out on a cold machine).
        "tfk8s:platform.awaitTimeoutSeconds": "600",
        "tfk8s:platform.network.dns.cidrs[0]": f"{BRIDGE_ADDRESS}/32",
        # The pods' addresses (the bridge's network): the apps refuse them.
        "tfk8s:platform.network.podCidrs[0]": POD_CIDR,
    }


def platform_on_the_node(
    volumes: Path,
    *,
    tensorflow: str | None = None,
    jupyter: str | None = None,
    tensorboard: str | None = None,
    app_cpu: str | None = None,
    app_memory: str = "1536Mi",
) -> dict[str, str]:
    """The platform of the real-node tests, the demo and the benches: `platform_settings`, the
    images built here and imported (TensorBoard's is the TensorFlow image unless named), and the size
    of every tenant's Jupyter and TensorBoard (`app_cpu`, with `app_memory`; no `app_cpu`: the
    platform's defaults for both), which on the node's 2 cores decides the room a run has beside them."""
    images = {"tensorflow": tensorflow, "tensorboard": tensorboard or tensorflow, "jupyter": jupyter}
    sizes = {"cpu": app_cpu, "memory": app_memory} if app_cpu else {}
    return {
        **platform_settings(volumes),
        **{f"tfk8s:platform.images.{app}": image for app, image in images.items() if image},
        **{f"tfk8s:platform.containerDefaults.{resource}": value for resource, value in sizes.items()},
    }


def deploy_platform_and_tenant(pulumi: Callable[..., object], settings: Mapping[str, str], *, platform: str, tenant: str) -> None:
    """`pulumi up` of the `platform` stack with `settings` (config paths to values), then of the
    `tenant` stack (its stack file in the project), each through `pulumi(*args)`: the plain CLI in
    the project, as the tests' drivers and the benches run it."""
    pulumi("stack", "select", "--create", platform)
    for path, value in settings.items():
        pulumi("config", "set", "--stack", platform, "--path", path, value)
    pulumi("up", "--stack", platform, "--yes", "--skip-preview")
    pulumi("stack", "select", "--create", tenant)
    pulumi("up", "--stack", tenant, "--yes", "--skip-preview")


# The digits experiment of the real-node tests and benches: one PS and two workers sized for the
# node's 2 cores, beside the platform's apps (config paths of its first cluster).
MNIST_ON_THE_NODE = {
    "tfk8s:clusters[0].name": "mnist",
    "tfk8s:clusters[0].ps.cpu": "250m",
    "tfk8s:clusters[0].ps.memory": "1Gi",
    "tfk8s:clusters[0].workers.count": "2",
    "tfk8s:clusters[0].workers.cpu": "500m",
    "tfk8s:clusters[0].workers.memory": "1500Mi",
}


def shared_user_node(node: str) -> dict[str, str]:
    """What a platform whose User Node is the real node, which also runs the training pods, adds to
    `platform_settings` (a cluster of one node: platform.userNode.sharedWithTraining): users reach
    its NodePorts at the bridge's address. The node must have lost its own taint first (`untaint`):
    the apps tolerate only the User Node's."""
    return {
        "tfk8s:platform.userNode.name": node,
        "tfk8s:platform.userNode.address": BRIDGE_ADDRESS,
        "tfk8s:platform.userNode.sharedWithTraining": "true",
    }


def untaint(cluster: str) -> None:
    """The real node without its own taint (idempotent): what asks for its label still lands there,
    and so do the User Node's apps once the platform names it."""
    kubeconfig = toolenv.CACHE / "kwok" / f"{cluster}.kubeconfig"
    command = [toolenv.KUBECTL, "--kubeconfig", str(kubeconfig), "taint", "node", node_name(cluster), f"{REAL_NODE_KEY}-"]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0 and "not found" not in done.stderr:
        raise RuntimeError(f"{' '.join(command)}: {done.stderr.strip()}")


def placement(cluster: int) -> list[list[str]]:
    """The arguments of each `pulumi config set --stack <experiment>` that puts an experiment's
    cluster's PS and workers on the real node: they tolerate its taint and select its label
    (`true` as text, not a YAML boolean)."""
    found = []
    for role in ("ps", "workers"):
        prefix = f"tfk8s:clusters[{cluster}].{role}"
        for path, value in {
            f"{prefix}.tolerations[0].key": REAL_NODE_KEY,
            f"{prefix}.tolerations[0].operator": "Exists",
            f"{prefix}.tolerations[0].effect": "NoSchedule",
        }.items():
            found.append(["--path", path, value])
        found.append(["--path", "--type", "string", f'{prefix}.nodeSelector["{REAL_NODE_KEY}"]', "true"])
    return found


def give_volumes_to_pods(kubeconfig: Path, log_dirs: Iterable[str]) -> None:
    """hostPath volumes, and the log volume's per-cluster sub-directories (`<experiment>/<cluster>`,
    subPath mounts), are created by the kubelet as root: give them to the pods' user first, as a
    storage provisioner (or fsGroup, which hostPath ignores) would. (docs/operations/real-node.md.)"""
    listed = subprocess.run(
        [toolenv.KUBECTL, "--kubeconfig", str(kubeconfig), "get", "pv", "-o", "json"], check=True, capture_output=True, text=True
    )
    for volume in json.loads(listed.stdout)["items"]:
        path = Path(volume["spec"]["hostPath"]["path"])
        directories = [path]
        if "log" in path.name:
            for sub in log_dirs:
                directories += [path / part for part in _prefixes(sub)]
        for directory in directories:
            directory.mkdir(parents=True, exist_ok=True)
            os.chown(directory, UID, UID)


def _prefixes(relative: str) -> list[str]:
    parts = relative.split("/")
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]
