"""This machine's real node in the e2e tests (lab/realnode.sh): a throwaway local cluster with it,
images built here imported into it, and a project copy whose platform and experiments run there.

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

from drivers import ROOT, Cli, Kube

import toolenv

REALNODE = str(ROOT / "lab" / "realnode.sh")
# The label and taint the real node registers with: what asks for it lands there, nothing else.
REAL_NODE_KEY = "tfk8s.io/real-node"
# The node's bridge address: its CoreDNS answers there (no pod, so a platform whose pods run there
# allows it by address, platform.network.dns.cidrs), and this machine reaches its NodePorts there.
BRIDGE_ADDRESS = "10.88.0.1"
# The pods' addresses on the node's bridge (lab/realnode.sh pod_cidr).
POD_CIDR = "10.88.0.0/16"
# The images' user (lab/images.py) and the platform's default pod identity for TensorFlow pods.
UID = 1000

T = TypeVar("T")


def _env(cluster: str) -> dict[str, str]:
    return {**os.environ, "TFK8S_CLUSTER_NAME": cluster}


def assert_machine_can_run_it(cluster: str) -> None:
    check = subprocess.run([REALNODE, "check"], capture_output=True, text=True, env=_env(cluster))
    assert check.returncode == 0, f"this machine cannot run the real-node tests: {check.stdout.strip()}"


@contextlib.contextmanager
def real_cluster(name: str) -> Iterator[Kube]:
    """A local cluster of its own with this machine's real node, stopped with the cluster."""
    assert_machine_can_run_it(name)
    with toolenv.throwaway_cluster(name) as kubeconfig:
        subprocess.run([REALNODE, "start"], check=True, env=_env(name))
        yield Kube(kubeconfig, cluster=name)


def node_of(kube: Kube) -> str:
    return f"tfk8s-real-{kube.cluster}"


def import_image(kube: Kube, what: str) -> str:
    """Builds (cached by content) and imports one of lab/images.py's images; its tag."""
    done = subprocess.run([REALNODE, "import", what], check=True, capture_output=True, text=True, env=_env(kube.cluster or ""))
    return done.stdout.strip()


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


def platform_settings(volumes: Path) -> dict[str, str]:
    """What a platform whose pods run on the real node needs: its volumes on this machine, the
    node's DNS server, which is no pod, allowed by address, and the pod network, kept out of the apps."""
    return {
        "tfk8s:platform.storage.local.hostPathRoot": str(volumes),
        "tfk8s:platform.network.dns.cidrs[0]": f"{BRIDGE_ADDRESS}/32",
        # The pods' addresses (the bridge's network): the apps refuse them.
        "tfk8s:platform.network.podCidrs[0]": POD_CIDR,
    }


def place_on_real_node(cli: Cli, stack: str, cluster: int) -> None:
    """`config set` of an experiment's cluster so that its PS and workers ask for the real node:
    they tolerate its taint and select its label (`true` as text, not a YAML boolean)."""
    for role in ("ps", "workers"):
        prefix = f"tfk8s:clusters[{cluster}].{role}"
        for path, value in {
            f"{prefix}.tolerations[0].key": REAL_NODE_KEY,
            f"{prefix}.tolerations[0].operator": "Exists",
            f"{prefix}.tolerations[0].effect": "NoSchedule",
        }.items():
            cli("config", "set", "--stack", stack, "--path", path, value)
        cli("config", "set", "--stack", stack, "--path", "--type", "string", f'{prefix}.nodeSelector["{REAL_NODE_KEY}"]', "true")


def give_volumes_to_pods(kube: Kube, log_dirs: Iterable[str]) -> None:
    """hostPath volumes, and the log volume's per-cluster sub-directories (`<experiment>/<cluster>`,
    subPath mounts), are created by the kubelet as root: give them to the pods' user first, as a
    storage provisioner (or fsGroup, which hostPath ignores) would. (docs/operations/real-node.md.)"""
    for volume in kube.get("pv"):
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


def until(what: str, seconds: float, probe: Callable[[], T | None]) -> T:
    """Polls `probe` every second until it returns something; fails naming `what` after `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        found = probe()
        if found:
            return found
        assert time.monotonic() < deadline, f"{what} within {seconds} s"
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
