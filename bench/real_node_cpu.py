"""The CPU a real-node pod gets while the rest of the machine is busy: does a pod on this machine's
real node get the CPU it requested beside builds and tests that want both cores?

The node's kubelet runs without its QoS hierarchy (lab/realnode.sh: cgroupsPerQOS false), so its
containers sit in containerd's own group, /k8s.io, at the kernel's default weight (1024 shares,
the weight of one process at nice 0). On a throwaway local cluster with this machine's real node
(`tfk8s-bench-cpu`, lab/realnode.py; started and deleted here, whatever happens), one pod asks for
1500m of CPU (requests = limits, as tfk8s's tasks do) and spins two Python loops. Each phase reads
the CPU time the node's containers used (their group's cpuacct.usage) over `--seconds`:
  - idle: nothing else runs;
  - busy: `--load` Python loops at nice 0 in each of `--sessions` sessions of their own
    (sched_autogroup weighs a session as one group: a CI is one, what it starts in a session of
    its own is more), one phase per count of sessions;
each busy phase at the group's weight as the node started it and at `--shares`.
Cores = CPU seconds / wall seconds. The pod cannot pass 1.5 (its CFS quota), whatever its weight.

    make tools real-node-deps
    .venv/bin/python bench/real_node_cpu.py [--seconds 20] [--load 2] [--sessions 1 4] [--shares 10240]

cgroup v1 (the cpu and cpuacct controllers) only: on cgroup v2 it says so and stops.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "lab")]

import realnode  # noqa: E402
import toolenv  # noqa: E402

CLUSTER = "tfk8s-bench-cpu"
PODS_GROUP = Path("/sys/fs/cgroup/cpu/k8s.io")
USAGE = Path("/sys/fs/cgroup/cpuacct/k8s.io/cpuacct.usage")
SPIN = "import multiprocessing as m\ndef spin():\n    while True: pass\n[m.Process(target=spin).start() for _ in range(2)]"


def pod(image: str) -> dict[str, object]:
    node = realnode.node_name(CLUSTER)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "spin", "namespace": "default"},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "tolerations": [{"key": realnode.REAL_NODE_KEY, "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [
                {
                    "name": "spin",
                    "image": image,
                    "imagePullPolicy": "Never",
                    "command": ["python3", "-c", SPIN],
                    "resources": {"requests": {"cpu": "1500m", "memory": "256Mi"}, "limits": {"cpu": "1500m", "memory": "256Mi"}},
                }
            ],
        },
    }


def cores(seconds: float) -> float:
    """The node's containers' CPU over `seconds` of wall, in cores."""
    before, start = int(USAGE.read_text()), time.monotonic()
    time.sleep(seconds)
    return (int(USAGE.read_text()) - before) / 1e9 / (time.monotonic() - start)


def busy(load: int, sessions: int, seconds: float) -> float:
    """cores() while `load` loops spin in each of `sessions` sessions of their own (sched_autogroup
    weighs each session as one group: a CI is one, the daemons and commands it starts with a
    session of their own are more)."""
    loops = "; ".join(["python3 -c 'while True: pass' &"] * load) + " wait"
    spinners = [subprocess.Popen(["sh", "-c", loops], start_new_session=True) for _ in range(sessions)]
    try:
        time.sleep(2)  # the loops running before the count starts
        return cores(seconds)
    finally:
        for spinner in spinners:
            os.killpg(spinner.pid, signal.SIGKILL)
            spinner.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--load", type=int, default=2, help="busy loops beside the pod, in each session")
    parser.add_argument("--sessions", type=int, nargs="+", default=[1, 4], help="sessions of loops, one phase each")
    parser.add_argument("--shares", type=int, default=10240, help="the pods' group's other weight tried")
    args = parser.parse_args()
    if not USAGE.parent.parent.is_dir():
        print("cgroup v1's cpuacct controller is not mounted: this bench reads it", file=sys.stderr)
        return 2
    autogroup = Path("/proc/sys/kernel/sched_autogroup_enabled").read_text().strip()
    with realnode.real_cluster(CLUSTER) as kubeconfig:
        image = realnode.import_image(CLUSTER, "python")
        kubectl = [toolenv.KUBECTL, "--kubeconfig", str(kubeconfig)]
        subprocess.run([*kubectl, "apply", "-f", "-"], input=json.dumps(pod(image)), text=True, check=True, capture_output=True)
        subprocess.run([*kubectl, "wait", "--for=condition=Ready", "pod/spin", "--timeout=120s"], check=True, capture_output=True)
        time.sleep(3)  # both loops spinning
        started = int((PODS_GROUP / "cpu.shares").read_text())
        rows = [("idle", started, cores(args.seconds))]
        for sessions in args.sessions:
            for shares in (started, args.shares):
                (PODS_GROUP / "cpu.shares").write_text(str(shares))
                phase = f"busy: {sessions} session(s) of {args.load} loops"
                rows.append((phase, shares, busy(args.load, sessions, args.seconds)))
        (PODS_GROUP / "cpu.shares").write_text(str(started))
    print(f"sched_autogroup_enabled={autogroup}; the pod asks for 1.5 cores; {os.cpu_count()} cores")
    print("| phase | pods' group shares | pod's cores |")
    print("|---|---:|---:|")
    for phase, shares, used in rows:
        print(f"| {phase} | {shares} | {used:.2f} |")
    for new, old in zip(rows[1::2], rows[2::2], strict=True):
        print(f"{new[0]}: {new[2]:.2f} cores at {started} shares, {old[2]:.2f} at {args.shares}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
