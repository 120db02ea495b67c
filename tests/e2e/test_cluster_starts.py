"""Local clusters started at once, as the suite's parallel workers start theirs: each gets ports
of its own and a working control plane. (kwokctl gives each component the first port down from
32767 that nothing listens on yet: two creations at once chose the same ports, and one cluster's
controller manager could not bind its own, so its volumes never became Available. hack/cluster.sh
now creates one cluster at a time, until its ports listen.)"""

from __future__ import annotations

import contextlib
import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from drivers import CLUSTER, Kube, wait_until

import toolenv

PORTS = re.compile(
    r"^\s*(etcdPeerPort|etcdPort|kubeApiserverPort|kubeControllerManagerPort|kubeSchedulerPort|kwokControllerPort): (\d+)$", re.M
)


def ports_of(name: str) -> set[int]:
    config = (toolenv.CACHE / "kwok" / "clusters" / name / "kwok.yaml").read_text()
    return {int(port) for _, port in PORTS.findall(config)}


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
