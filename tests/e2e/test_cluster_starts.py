"""Local clusters started at once, as the suite's parallel workers start theirs: each gets ports
of its own and a working control plane. (kwokctl gives each component the first port down from
32767 that nothing listens on yet: two creations at once chose the same ports, and one cluster's
controller manager could not bind its own, so its volumes never became Available. hack/cluster.sh
now creates one cluster at a time, until its ports listen.)"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from drivers import CLUSTER, Kube, wait_until

import toolenv

PORTS = re.compile(
    r"^\s*(etcdPeerPort|etcdPort|kubeApiserverPort|kubeControllerManagerPort|kubeSchedulerPort|kwokControllerPort): (\d+)$", re.M
)


def kwok_config(name: str) -> str:
    return (toolenv.CACHE / "kwok" / "clusters" / name / "kwok.yaml").read_text()


def ports_of(name: str) -> set[int]:
    return {int(port) for _, port in PORTS.findall(kwok_config(name))}


def listens(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        return True
    return False


def component_pid(name: str, component: str) -> int:
    return int((toolenv.CACHE / "kwok" / "clusters" / name / "pids" / f"{component}.pid").read_text())


def volume(name: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteMany"], "hostPath": {"path": "/tmp/unused"}},
    }


def test_two_clusters_started_at_once_get_ports_of_their_own_and_working_controllers(tmp_path: Path) -> None:
    names = [f"{CLUSTER}-twin-{i}" for i in range(2)]
    with contextlib.ExitStack() as stack, ThreadPoolExecutor(2) as pool:
        kubeconfigs = list(pool.map(lambda name: stack.enter_context(toolenv.throwaway_cluster(name)), names))
        first, second = (ports_of(name) for name in names)
        assert len(first) == len(second) == 6, (first, second)
        assert not first & second, f"both clusters were given ports {sorted(first & second)}"
        for name, kubeconfig in zip(names, kubeconfigs, strict=True):
            kube = Kube(kubeconfig, cluster=name)
            manifest = tmp_path / f"{name}.json"
            manifest.write_text(json.dumps(volume("probe")))
            kube.run("apply", "-f", str(manifest))
            # The PV controller (the controller manager's) makes a new volume Available.
            wait_until(
                lambda kube=kube: kube.get("pv", name="probe")["status"].get("phase") == "Available", f"{name}'s volume Available"
            )


def test_status_names_a_component_that_exited_and_ends_with_its_log() -> None:
    name = f"{CLUSTER}-lost-scheduler"
    env = {**os.environ, "TFK8S_CLUSTER_NAME": name}
    status = [str(toolenv.ROOT / "hack" / "cluster.sh"), "status"]
    with toolenv.throwaway_cluster(name):
        healthy = subprocess.run(status, env=env, capture_output=True, text=True)
        assert healthy.returncode == 0, healthy.stderr
        [scheduler_port] = (int(port) for key, port in PORTS.findall(kwok_config(name)) if key == "kubeSchedulerPort")
        # Held while the scheduler's port is free: no other test's cluster may take it meanwhile.
        with toolenv.no_cluster_created():
            os.kill(component_pid(name, "kube-scheduler"), signal.SIGTERM)
            wait_until(lambda: not listens(scheduler_port), "the scheduler's port closed")
            broken = subprocess.run(status, env=env, capture_output=True, text=True)
        log = toolenv.CACHE / "kwok" / "clusters" / name / "logs" / "kube-scheduler.log"
        last_line = log.read_text().rstrip().splitlines()[-1]
    # The API server still answers /readyz without a scheduler: only the components' own ports tell.
    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert "without all of its components" in broken.stdout, broken.stdout
    named = rf"kube-scheduler of cluster {re.escape(name)} is (exited|starting), not listening"
    assert re.search(named, broken.stderr), broken.stderr
    assert last_line in broken.stderr, "the end of the scheduler's own log, to tell why"
    assert "kube-apiserver of cluster" not in broken.stderr, "only what is down is named"
