"""Who may reach whom under the live NetworkPolicies, as a real NetworkPolicy engine computes it,
and as tfk8s.specs.network_policy designs it: the offline matrix test_network.py checks on simulated
pods, and test_real_network.py compares with real connections on the real node.

cyclonus (hack/tools.sh cyclonus) evaluates the policies the tenant and experiment stacks created
on the real API server against a model of the live pods (their namespaces, labels, IPs and
declared ports), for every pair of pods and each of TensorFlow's, Jupyter's, TensorBoard's and the
metrics ports. Pods are named for what they are: `tfk8s-alice/one-ps-0`, `tfk8s-bob/jupyter`, and a
pod that is no tenant's by its namespace and name label: `monitoring/prometheus`.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import yaml
from drivers import Kube

import toolenv

PORTS = {2222: "tensorflow", 8888: "jupyter", 6006: "tensorboard", 9470: "metrics"}
METRICS_PORT = 9470
# The platform's Prometheus as a stack of the suite would name it (platform.monitoring, its default
# pod labels): the one pod the design lets in on training pods' metrics port.
PROMETHEUS = "monitoring/prometheus"


def short_name(pod: dict[str, Any]) -> str:
    """`alice/one-ps-0`, `alice/two-worker-0`, `alice/jupyter`: what a pod is, for the matrix; a pod
    of no tenant (the platform's Prometheus) by its namespace and name label: `monitoring/prometheus`."""
    labels = pod["metadata"]["labels"]
    if "tfk8s.io/user" not in labels:
        return f"{pod['metadata']['namespace']}/{labels.get('app.kubernetes.io/name') or pod['metadata']['name']}"
    user = labels["tfk8s.io/user"]
    if "tfk8s.io/cluster" not in labels:
        return f"{user}/{labels['app.kubernetes.io/name']}"
    index = labels.get("tfk8s.io/index") or pod["metadata"].get("annotations", {}).get(
        "batch.kubernetes.io/job-completion-index", "0"
    )
    return f"{user}/{labels['tfk8s.io/cluster']}-{labels['tfk8s.io/role']}-{index}"


def probe_model(kube: Kube, namespaces: list[str]) -> dict[str, Any]:
    """cyclonus's synthetic probe model: the live pods of `namespaces`, one model container per
    declared port (cyclonus probes a container's one port), named for what they are."""
    labels = {n["metadata"]["name"]: n["metadata"].get("labels", {}) for n in kube.get("namespaces")}
    pods = []
    for namespace in namespaces:
        for pod in kube.get("pods", namespace):
            if pod["status"].get("phase") in ("Succeeded", "Failed") or pod["metadata"].get("deletionTimestamp"):
                continue
            ports = [(c["name"], p) for c in pod["spec"]["containers"] for p in c.get("ports", [])]
            pods.append(
                {
                    "Namespace": namespace,
                    "Name": short_name(pod).split("/", 1)[1],
                    "Labels": pod["metadata"]["labels"],
                    "IP": pod["status"].get("podIP", ""),
                    "Containers": [
                        {"Name": f"{c}-{p['name']}", "Port": p["containerPort"], "PortName": p["name"], "Protocol": "TCP"}
                        for c, p in ports
                    ],
                }
            )
    return {
        "Probes": [{"Protocol": "TCP", "Port": port} for port in PORTS],
        "Resources": {"Namespaces": {n: labels[n] for n in namespaces}, "Pods": pods},
    }


def combined_tables(output: str) -> list[dict[tuple[str, str], str]]:
    """Each probe's `Combined:` table of `cyclonus analyze --mode probe`: (from, to) -> cell."""
    tables = []
    for block in output.split("Combined:")[1:]:
        table = block.strip().split("\n\n")[0]  # the table alone, not the next probe's
        rows = [line for line in table.splitlines() if line.startswith("|")]
        header = [c.strip() for c in rows[0].strip("|").split("|")][1:]
        cells = {}
        for row in rows[1:]:
            fields = [c.strip() for c in row.strip("|").split("|")]
            for to, cell in zip(header, fields[1:], strict=True):
                cells[(fields[0].lower(), to.lower())] = cell
        tables.append(cells)
    return tables


def evaluate(kube: Kube, namespaces: list[str], work: Path) -> tuple[dict[int, dict[tuple[str, str], str]], list[str]]:
    """cyclonus's verdict on the live policies of `namespaces` for their live pods: per probed port,
    (source, target) -> `.` allowed, `X` denied, `N` no such port on the target; and the pods."""
    policies = [p for p in kube.get("networkpolicies") if p["metadata"]["namespace"] in namespaces]
    for p in policies:  # as applied: the engine reads the spec, the server's bookkeeping is noise
        p["metadata"] = {k: p["metadata"][k] for k in ("name", "namespace", "labels") if k in p["metadata"]}
        p.pop("status", None)
    (work / "policies").mkdir()
    for p in policies:  # one file each: cyclonus reads the first document of a file alone
        (work / "policies" / f"{p['metadata']['namespace']}-{p['metadata']['name']}.yaml").write_text(yaml.safe_dump(p))
    model = probe_model(kube, namespaces)
    (work / "model.json").write_text(json.dumps(model, indent=1))
    done = subprocess.run(
        [
            toolenv.tool("cyclonus"),
            "analyze",
            "--mode",
            "probe",
            "--policy-path",
            str(work / "policies"),
            "--probe-path",
            str(work / "model.json"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    tables = combined_tables(done.stdout)
    # One table per probe port, then one for the live pods cyclonus read itself (none: no kube context).
    assert len(tables) >= len(PORTS), done.stdout[-3000:]
    pods = sorted(f"{p['Namespace']}/{p['Name']}" for p in model["Resources"]["Pods"])
    return dict(zip(PORTS, tables, strict=False)), pods


def designed(source: str, target: str, port: int) -> bool:
    """tfk8s.specs.network_policy's design, written out: may `source` open `port` on `target`?"""
    (s_ns, s_pod), (t_ns, t_pod) = source.split("/"), target.split("/")
    if port == METRICS_PORT:
        # The platform's Prometheus alone, to every training pod; nothing else, the tenant's own pods included.
        return source == PROMETHEUS and t_ns.startswith("tfk8s-") and t_pod not in ("jupyter", "tensorboard")
    if s_ns != t_ns:
        return False  # nothing crosses tenants
    if port != 2222:
        return False  # Jupyter and TensorBoard answer users through NodePorts; no pod of a tenant calls them
    s_cluster, t_cluster = s_pod.split("-")[0], t_pod.split("-")[0]
    if "jupyter" in (s_pod, t_pod):
        other = t_cluster if s_pod == "jupyter" else s_cluster
        return other == "two"  # the notebook-driven cluster and its client, both ways
    if "tensorboard" in (s_pod, t_pod):
        return False
    return s_cluster == t_cluster
