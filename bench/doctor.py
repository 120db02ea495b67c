"""`tfk8s doctor`'s run time on a ready cluster, beside its floor: one pod started and finished.

On a throwaway local cluster with this machine's real node (`tfk8s-bench-doctor`, lab/realnode.py;
started and deleted by this script whatever happens; the `make up` cluster is never touched), the
Python image built here (lab/images.py) imported, the doctor runs `--repeat` times as a platform
team would, with the probes' pods on the real node (its label and taint) and a platform stack file
naming that image for every image: every read and every probe. Beside each run, alternating which
goes first, the floor of any probe: `kubectl run` of one pod of the same image and the same
restricted settings, created, run to its end and deleted (`--rm --attach`). The goal: the whole
doctor under 60 s; the ratio says how many pod lifetimes it costs (its probes run in two chains at
once: the network's four pods one after another, the images and the shared volume beside them).

    make tools real-node-deps && .venv/bin/python bench/doctor.py [--repeat 3]

Needs root (a real kubelet and containerd; `lab/realnode.sh check` says why not).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "lab")]

import realnode  # noqa: E402
import toolenv  # noqa: E402

CLUSTER = "tfk8s-bench-doctor"


def overrides() -> str:
    """`kubectl run --overrides`: the pod on the real node, as the doctor's probes run (restricted)."""
    key = realnode.REAL_NODE_KEY
    security = {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}}
    spec = {"securityContext": security, "tolerations": [{"key": key, "operator": "Exists"}], "nodeSelector": {key: "true"}}
    return json.dumps({"apiVersion": "v1", "spec": spec})


def stack_file(directory: Path, image: str) -> Path:
    config = yaml.safe_load((toolenv.ROOT / "stacks" / "Pulumi.platform-dev.yaml").read_text())["config"]
    platform = config["tfk8s:platform"]
    platform["images"] = {"tensorflow": image, "tensorboard": image, "jupyter": image}
    platform.setdefault("network", {})["policyEnforced"] = True
    platform["network"]["dns"] = {"cidrs": [f"{realnode.BRIDGE_ADDRESS}/32"]}
    platform["network"]["podCidrs"] = [realnode.POD_CIDR]
    path = directory / "Pulumi.platform-bench.yaml"
    path.write_text(yaml.safe_dump({"config": {"tfk8s:kind": "platform", "tfk8s:platform": platform}}))
    return path


def run_doctor(kubeconfig: Path, stack: Path) -> tuple[float, dict[str, object]]:
    start = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tfk8s.cli",
            "doctor",
            "--json",
            "--stack",
            str(stack),
            "--node-selector",
            f"{realnode.REAL_NODE_KEY}=true",
            "--toleration",
            realnode.REAL_NODE_KEY,
        ],
        env={**os.environ, "KUBECONFIG": str(kubeconfig)},
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.monotonic() - start
    if done.returncode not in (0, 1):
        raise SystemExit(f"tfk8s doctor failed: {done.stderr}")
    return seconds, json.loads(done.stdout)


def run_pod(kubeconfig: Path, image: str, number: int) -> float:
    start = time.monotonic()
    subprocess.run(
        [
            toolenv.KUBECTL,
            "--kubeconfig",
            str(kubeconfig),
            "run",
            f"floor-{number}",
            "--image",
            image,
            "--restart",
            "Never",
            "--rm",
            "--attach",
            "--quiet",
            "--overrides",
            overrides(),
            "--command",
            "--",
            "python3",
            "-c",
            "print('ok')",
        ],
        check=True,
        capture_output=True,
    )
    return time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    doctor_times: list[float] = []
    pod_times: list[float] = []
    with tempfile.TemporaryDirectory() as scratch, realnode.real_cluster(CLUSTER) as kubeconfig:
        image = realnode.import_image(CLUSTER, "python")
        stack = stack_file(Path(scratch), image)
        run_pod(kubeconfig, image, 0)  # not timed: the node's first pod of the image
        for number in range(1, args.repeat + 1):
            for side in ("pod", "doctor") if number % 2 else ("doctor", "pod"):
                if side == "pod":
                    pod_times.append(run_pod(kubeconfig, image, number))
                else:
                    doctor_times.append(run_doctor(kubeconfig, stack)[0])
        checks = len(run_doctor(kubeconfig, stack)[1]["checks"])  # type: ignore[arg-type]
    doctor, pod = statistics.median(doctor_times), statistics.median(pod_times)
    print("| what | median (s) | worst (s) | runs |\n|---|---:|---:|---:|")
    print(f"| tfk8s doctor, {checks} checks | {doctor:.1f} | {max(doctor_times):.1f} | {len(doctor_times)} |")
    print(f"| one pod, kubectl run --rm | {pod:.1f} | {max(pod_times):.1f} | {len(pod_times)} |")
    print(
        f"doctor / one pod: {doctor / pod:.1f}x; goal: the doctor under 60 s ({'met' if max(doctor_times) < 60 else 'not met'})"
    )


if __name__ == "__main__":
    main()
