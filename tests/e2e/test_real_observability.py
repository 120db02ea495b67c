"""Seeing a run on the real node: its progress while it trains and after, its metrics in a real
Prometheus, and every task's output after its pod is gone.

alice's experiment `watch` has two clusters on the real node: `mnist`, which trains for real
(1 PS, 2 workers, the built-in trainer), and `broken`, whose worker fails at once (a script that
prints and exits 3; no retry). Once both have started, the platform team makes the real node the
User Node (test_real_user_node.py does the same): alice's TensorBoard and its token gate, which
read her log volume, move there beside the training pods that keep running. The platform's
Prometheus (the binary built from its Go module, in an image built here) runs in the platform's
monitoring namespace with the scrape configuration the platform declares.

What a user sees, with what a user holds:
* `tfk8s status` (her kubeconfig, her token): a progress bar per cluster whose step advances, with
  steps/s and an ETA, while `mnist` trains; `broken` failed; after the run, `mnist` succeeded at
  its target; the same progress in the experiment's `readiness` after `pulumi up --refresh`;
* PromQL over the real Prometheus: the run's step rate, and every query of the dashboard in the
  repository answers with the run's series;
* `tfk8s logs`: the output of `mnist`'s PS, retired and scaled to zero, and of `broken`'s failed
  worker, read from the log volume after their pods are gone;
* her own Jupyter cannot connect to her workers' metrics port: only the monitoring namespace can;
* with her own certificate she opens her pods' egress to everything (her policies are hers), and
  her worker still reaches nothing in the monitoring namespace: the platform's fence there
  (tfk8s.specs.network_policy.tenants_kept_out) keeps tenants' namespaces out, and it alone (the
  control: the platform team removes it, and her worker reaches Prometheus).
"""

from __future__ import annotations

import calendar
import json
import os
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from drivers import CLUSTER, ROOT, Cli, Kube, user_kube
from realnode_drivers import (
    BRIDGE_ADDRESS,
    REAL_NODE_KEY,
    create,
    deploy_platform_and_tenant,
    failure_report,
    give_volumes_to_pods,
    http_get,
    import_image,
    node_of,
    place_on_real_node,
    platform_on_the_node,
    probe_from_pod,
    project,
    real_cluster,
    until,
)
from tfk8s.specs.monitoring import SCRAPE_FILE, SCRAPE_NAME
from tfk8s.specs.network_policy import TENANTS_KEPT_OUT

import dashboards

PLATFORM, TENANT, EXPERIMENT, NAMESPACE = "platform-dev", "tenant-alice", "watch", "tfk8s-alice"
MONITORING = "tfk8s-monitoring"
TEAM = "tfk8s-e2e-team"  # a namespace of the platform team's own (a Grafana's, say): no tenant's
GROUP = "tfk8s-users"  # what hack/cluster.sh user-kubeconfig mints alice's certificate into
OLD_USER_NODE = "tfk8s-user-node"
# 2-3 minutes at 55-75 steps/s: past the set-up (slower in the suite) and the tests that need the
# run in progress; every step more is time the last test waits for.
STEPS = 10000
METRICS_PORT = 9470
BROKEN_SAYS = "tfk8s-e2e: broken worker gives up"
BROKEN = f"""import os, sys, time
if os.environ["TFK8S_JOB_NAME"] == "ps":
    print("tfk8s-e2e: broken ps serves", flush=True)
    time.sleep(3600)
print({BROKEN_SAYS!r}, flush=True)
sys.exit(3)
"""


@dataclass(frozen=True)
class Watched:
    kube: Kube
    cli: Cli
    env: dict[str, str]  # what `tfk8s` runs with: her kubeconfig's cluster, the project's stacks
    prometheus: str  # its HTTP API, from this machine


@pytest.fixture(scope="module")
def watched(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Watched]:
    with real_cluster(f"{CLUSTER}-watch") as kube:
        tensorflow, jupyter = import_image(kube, "tensorflow"), import_image(kube, "jupyter")
        prometheus_image = import_image(kube, "prometheus")
        work = tmp_path_factory.mktemp("real-observability")
        cli = project(kube, work / "project", "real-observability-test")
        kube.run("create", "namespace", MONITORING)  # the platform team's, where its Prometheus runs
        settings = {
            **platform_on_the_node(work / "volumes", tensorflow=tensorflow, jupyter=jupyter, app_cpu="300m"),
            "tfk8s:platform.monitoring.namespace": MONITORING,
            "tfk8s:platform.monitoring.scrape": "scrapeConfig",
            "tfk8s:platform.monitoring.interval": "2s",
        }
        deploy_platform_and_tenant(cli, settings, platform=PLATFORM, tenant=TENANT)
        # Prometheus first: the run then trains through as little of the set-up as it can (the tests
        # need it running; what it trains before them is time the last one waits for).
        node = node_of(kube)
        prometheus = _start_prometheus(kube, node, prometheus_image, work)
        give_volumes_to_pods(kube, [f"{EXPERIMENT}/mnist", f"{EXPERIMENT}/broken"])
        _experiment(cli, kube)

        # The real node becomes the User Node; the training pods, running, stay (NoSchedule).
        kube.run("taint", "node", node, f"{REAL_NODE_KEY}-")
        cli("config", "set", "--stack", PLATFORM, "--path", "tfk8s:platform.userNode.name", node)
        cli("config", "set", "--stack", PLATFORM, "--path", "tfk8s:platform.userNode.address", BRIDGE_ADDRESS)
        cli("up", "--stack", PLATFORM, "--yes", "--skip-preview")
        kube.run("drain", OLD_USER_NODE, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=120s")
        for stack in (TENANT, EXPERIMENT):  # the experiment's outputs name where its TensorBoard now is
            done = cli("up", "--stack", stack, "--yes", "--skip-preview", "--refresh", check=False)
            assert done.returncode == 0, done.stdout[-3000:] + done.stderr
        env = {**(cli.env or {}), "PYTHONPATH": os.pathsep.join(str(ROOT / p) for p in ("infra", "training"))}
        yield Watched(kube, cli, env, prometheus)


def _experiment(cli: Cli, kube: Kube) -> None:
    settings = {
        "tfk8s:clusters[0].name": "mnist",
        "tfk8s:clusters[0].ps.cpu": "200m",
        "tfk8s:clusters[0].ps.memory": "1Gi",
        "tfk8s:clusters[0].workers.count": "2",
        "tfk8s:clusters[0].workers.cpu": "300m",
        "tfk8s:clusters[0].workers.memory": "1500Mi",
        "tfk8s:clusters[1].name": "broken",
        "tfk8s:clusters[1].ps.cpu": "100m",
        "tfk8s:clusters[1].ps.memory": "1Gi",
        "tfk8s:clusters[1].workers.count": "1",
        "tfk8s:clusters[1].workers.cpu": "100m",
        "tfk8s:clusters[1].workers.memory": "256Mi",
        "tfk8s:clusters[1].workers.backoffLimitPerIndex": "0",
    }
    cli.init_experiment(EXPERIMENT, tenant=TENANT, settings=settings)
    for index in (0, 1):
        place_on_real_node(cli, EXPERIMENT, index)
    cli.set_value(EXPERIMENT, "tfk8s:clusters[0].args[0]", f"--steps={STEPS}")
    # `broken`: a script of the user's whose PS serves and whose worker says why and fails.
    cli.set_value(EXPERIMENT, "tfk8s:clusters[1].classicFlags", "false")
    for position, word in enumerate(["python", "-c", BROKEN]):
        cli.set_value(EXPERIMENT, f"tfk8s:clusters[1].command[{position}]", word)
    done = cli("up", "--stack", EXPERIMENT, "--yes", "--skip-preview", check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr + failure_report(kube, NAMESPACE)


def _start_prometheus(kube: Kube, node: str, image: str, work: Path) -> str:
    """The platform team's Prometheus: its own account to discover pods, the platform's scrape
    configuration (a ConfigMap the platform stack declares in this namespace), on the real node."""
    declared = kube.get("configmap", MONITORING, SCRAPE_NAME)
    scrape = yaml.safe_load(declared["data"][SCRAPE_FILE])
    config = {"global": {"scrape_interval": "2s", "evaluation_interval": "2s"}, **scrape}
    objects = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "prometheus", "namespace": MONITORING}},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "e2e-prometheus"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "e2e-prometheus"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "e2e-prometheus"},
            "subjects": [{"kind": "ServiceAccount", "name": "prometheus", "namespace": MONITORING}],
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "prometheus", "namespace": MONITORING},
            "data": {"prometheus.yml": yaml.safe_dump(config)},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "prometheus", "namespace": MONITORING},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
                "template": {
                    "metadata": {"labels": {"app.kubernetes.io/name": "prometheus"}},
                    "spec": {
                        "serviceAccountName": "prometheus",
                        "nodeSelector": {"kubernetes.io/hostname": node},
                        "tolerations": [{"operator": "Exists"}],
                        "containers": [
                            {
                                "name": "prometheus",
                                "image": image,
                                "imagePullPolicy": "Never",
                                "args": [
                                    "--config.file=/etc/prometheus/prometheus.yml",
                                    "--storage.tsdb.path=/prometheus",
                                    "--web.listen-address=:9090",
                                ],
                                "ports": [{"name": "http", "containerPort": 9090}],
                                "readinessProbe": {"httpGet": {"path": "/-/ready", "port": "http"}, "periodSeconds": 2},
                                "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}},
                                "volumeMounts": [
                                    {"name": "config", "mountPath": "/etc/prometheus"},
                                    {"name": "data", "mountPath": "/prometheus"},
                                ],
                            }
                        ],
                        "volumes": [
                            {"name": "config", "configMap": {"name": "prometheus"}},
                            {"name": "data", "emptyDir": {}},
                        ],
                    },
                },
            },
        },
    ]
    manifest = work / "prometheus.yaml"  # the test's own directory: nothing left on the machine
    manifest.write_text(yaml.safe_dump_all(objects))
    kube.run("apply", "-f", str(manifest))

    def ready() -> str | None:
        pods = [p for p in kube.get("pods", MONITORING) if p["metadata"]["labels"].get("app.kubernetes.io/name") == "prometheus"]
        running = [p for p in pods if all(c.get("ready") for c in p["status"].get("containerStatuses", [{}]))]
        return f"http://{running[0]['status']['podIP']}:9090" if running and running[0]["status"].get("podIP") else None

    url = until("Prometheus runs and is ready", 180, ready)
    assert http_get(f"{url}/-/ready").status == 200, "Prometheus is ready on this machine's side too"
    return url


def tfk8s(watched: Watched, *args: str) -> subprocess.CompletedProcess[str]:
    """The `tfk8s` command as a user runs it, in the project (its stacks), with her environment."""
    return subprocess.run(
        [sys.executable, "-m", "tfk8s.cli", *args],
        cwd=watched.cli.cwd,
        capture_output=True,
        text=True,
        env=watched.env,
        timeout=120,
    )


def status(watched: Watched) -> dict[str, Any]:
    done = tfk8s(watched, "status", "--stack", EXPERIMENT, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def query(watched: Watched, promql: str) -> list[dict[str, Any]]:
    answer = http_get(f"{watched.prometheus}/api/v1/query?" + urllib.parse.urlencode({"query": promql}))
    assert answer.status == 200, answer.body[:500]
    body = json.loads(answer.body)
    assert body["status"] == "success", body
    return body["data"]["result"]


def test_status_shows_the_run_advancing_with_an_eta_and_the_broken_cluster_failed(watched: Watched) -> None:
    def training() -> dict[str, Any] | None:
        report = status(watched)
        mnist = _cluster(report, "mnist")
        return report if mnist.get("step") and mnist.get("eta_seconds") else None

    first = until("status shows mnist training with an ETA", 300, training)
    before = _cluster(first, "mnist")
    # This module's tests up to the last one need the run in progress (7 s alone).
    assert before["eta_seconds"] >= 20, f"mnist is {before['eta_seconds']:.0f} s from its end already: raise STEPS"

    def advanced() -> dict[str, Any] | None:
        report = status(watched)
        return report if _cluster(report, "mnist").get("step", 0) > before["step"] else None

    second = until("status shows mnist's step advancing", 60, advanced)
    after = _cluster(second, "mnist")
    assert after["state"] == "running", after
    assert after["step"] > before["step"], (before, after)
    assert after["target_steps"] == STEPS
    assert after["steps_per_second"] > 0 and after["eta_seconds"] > 0, after
    assert _cluster(second, "broken")["state"] == "failed", second
    shown = tfk8s(watched, "status", "--stack", EXPERIMENT)
    assert shown.returncode == 0, shown.stderr
    line = next(line for line in shown.stdout.splitlines() if "mnist" in line)
    assert "%" in line and "ETA" in line, shown.stdout
    rate, eta = after["steps_per_second"], after["eta_seconds"]
    print(f"\n[observability] mnist at step {after['step']} of {STEPS}: {rate:.1f} steps/s, ETA {eta:.0f} s")


def test_readiness_after_a_refresh_carries_each_clusters_progress(watched: Watched) -> None:
    done = watched.cli("up", "--stack", EXPERIMENT, "--yes", "--skip-preview", "--refresh", check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    clusters = watched.cli.outputs(EXPERIMENT)["readiness"]["clusters"]
    mnist, broken = clusters["mnist"]["progress"], clusters["broken"]["progress"]
    assert mnist["state"] == "running" and 0 < mnist["step"] < STEPS and mnist["eta_seconds"] > 0, mnist
    assert mnist["target_steps"] == STEPS, mnist
    assert broken["state"] == "failed", broken


def test_only_the_monitoring_namespace_reaches_the_metrics_port(watched: Watched) -> None:
    workers = [
        p
        for p in watched.kube.get("pods", NAMESPACE)
        if p["metadata"]["labels"].get("tfk8s.io/cluster") == "mnist" and p["status"].get("phase") == "Running"
    ]
    (jupyter,) = [
        p
        for p in watched.kube.get("pods", NAMESPACE)
        if p["metadata"]["labels"].get("app.kubernetes.io/name") == "jupyter" and p["status"].get("phase") == "Running"
    ]
    reached = probe_from_pod(
        watched.kube, jupyter, {p["metadata"]["name"]: f"{p['status']['podIP']}:{METRICS_PORT}" for p in workers}
    )
    assert reached and not any(reached.values()), reached
    # The control: Prometheus, in the monitoring namespace, scrapes each of them.
    up = query(watched, f'up{{namespace="{NAMESPACE}"}} == 1')
    assert {r["metric"]["pod"] for r in up} >= {p["metadata"]["name"] for p in workers}, up


def test_a_tenant_who_opens_her_egress_still_reaches_nothing_in_the_monitoring_namespace(watched: Watched) -> None:
    kube = watched.kube
    alice = user_kube(kube, "alice", [GROUP])
    workers = [
        p
        for p in kube.get("pods", NAMESPACE)
        if _labels(p).get("tfk8s.io/cluster") == "mnist"
        and _labels(p).get("tfk8s.io/role") == "worker"
        and p["status"].get("phase") == "Running"
    ]
    assert workers, "no worker of mnist runs any more: give the run more steps"
    worker = workers[0]
    # Each probe asks the cluster DNS too (on the node's bridge, which her namespace's own policy
    # lets every pod reach): a probe that reaches it is one whose refusals mean something.
    targets = {"prometheus": watched.prometheus.removeprefix("http://"), "dns": f"{BRIDGE_ADDRESS}:53"}

    def refused_beside_dns() -> bool:
        reached = probe_from_pod(kube, worker, targets)
        return reached["dns"] and not reached["prometheus"]

    assert refused_beside_dns(), "her worker reaches Prometheus before she opens anything"
    fence = kube.get("networkpolicy", MONITORING, TENANTS_KEPT_OUT)
    kept = {k: fence["metadata"][k] for k in ("name", "namespace", "labels", "annotations")}
    fence_again = {"apiVersion": fence["apiVersion"], "kind": fence["kind"], "metadata": kept, "spec": fence["spec"]}
    opened = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "egress-open", "namespace": NAMESPACE},
        "spec": {"podSelector": {}, "policyTypes": ["Egress"], "egress": [{}]},
    }
    made = create(alice, opened)
    assert made.returncode == 0, made.stderr  # her own certificate: NetworkPolicies are hers to manage
    try:
        team_pod = _team_pod(kube, node_of(kube), worker["spec"]["containers"][0]["image"])
        # The control: the platform team takes its fence away, and her open egress reaches Prometheus.
        try:
            kube.run("delete", "networkpolicy", "-n", MONITORING, TENANTS_KEPT_OUT)
            until(
                "without the fence her worker reaches Prometheus",
                60,
                lambda: probe_from_pod(kube, worker, targets)["prometheus"],
            )
        finally:
            if not any(p["metadata"]["name"] == TENANTS_KEPT_OUT for p in kube.get("networkpolicy", MONITORING)):
                restored = create(kube, fence_again)
                assert restored.returncode == 0, restored.stderr
        # Her egress is open (the control just proved it), and the fence alone keeps her out: twice
        # in a row, each time with the DNS reached beside it.
        until("with the fence back her worker reaches Prometheus no more", 60, refused_beside_dns)
        assert refused_beside_dns(), "her worker reached Prometheus again with the fence in place"
        # The fence's other side: a pod of a namespace that is no tenant's, in the same pod network,
        # reaches Prometheus with the fence in place.
        assert probe_from_pod(kube, team_pod, targets)["prometheus"], "the fence keeps the team's own pods out too"
    finally:
        kube.run("delete", "networkpolicy", "-n", NAMESPACE, "egress-open")
        kube.run("delete", "namespace", TEAM, "--wait=false", "--ignore-not-found")
    # Afterwards this machine, the node (whence kubelet probes come), still reaches Prometheus.
    assert http_get(f"{watched.prometheus}/-/ready").status == 200
    print(
        "[real observability] alice's egress opened: Prometheus refused her worker, reached it only without the fence, "
        "and let the team's own pod in under it"
    )


def _team_pod(kube: Kube, node: str, image: str) -> dict[str, Any]:
    """A pod of the platform team's own namespace on the real node (the training image: its Python
    probes), Running."""
    kube.run("create", "namespace", TEAM)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "client", "namespace": TEAM},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "tolerations": [{"operator": "Exists"}],
            "containers": [
                {
                    "name": "client",
                    "image": image,
                    "imagePullPolicy": "Never",
                    "command": ["python3", "-c", "import time; time.sleep(3600)"],
                    "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}},
                }
            ],
        },
    }
    made = create(kube, pod)
    assert made.returncode == 0, made.stderr

    def running() -> dict[str, Any] | None:
        found = kube.get("pod", TEAM, "client")
        return found if found["status"].get("phase") == "Running" and found["status"].get("podIP") else None

    return until("the team's pod runs", 120, running)


def test_promql_over_a_real_prometheus_returns_the_runs_step_rate(watched: Watched) -> None:
    selector = f'experiment="{EXPERIMENT}",cluster="mnist",role="worker"'

    def rate() -> list[dict[str, Any]] | None:
        found = query(watched, f"max(deriv(tfk8s_global_step{{{selector}}}[20s]))")
        return found if found and float(found[0]["value"][1]) > 0 else None

    (result,) = until("Prometheus has the run's step rate", 120, rate)
    steps_per_second = float(result["value"][1])
    first_step = query(watched, f"max(tfk8s_first_step_seconds{{{selector}}})")
    assert first_step and float(first_step[0]["value"][1]) > 0, first_step
    # The dashboard in the repository, as Grafana would ask for this run.
    run = {"tenant": "alice", "experiment": EXPERIMENT, "cluster": "mnist"}
    empty = [q.where for q in dashboards.queries() if not query(watched, dashboards.expanded(q.expr, run))]
    assert not empty, f"dashboard queries with no data for the run: {empty}"
    first = float(first_step[0]["value"][1])
    print(f"\n[observability] PromQL step rate {steps_per_second:.1f} steps/s; first step {first:.1f} s after its task started")


def test_after_the_run_status_says_it_succeeded_and_every_tasks_output_is_on_the_log_volume(watched: Watched) -> None:
    kube = watched.kube

    def over() -> bool:
        stranded = _stranded_pods(kube, "mnist")
        assert not stranded, (
            f"a task of mnist was lost and its new pod cannot be scheduled (the real node is the User Node now, "
            f"NoSchedule for training pods): the run cannot finish: {stranded}"
        )
        deployments = [
            d for d in kube.get("deployments", NAMESPACE) if d["metadata"]["labels"].get("tfk8s.io/stack") == EXPERIMENT
        ]
        return bool(deployments) and all(d["spec"]["replicas"] == 0 for d in deployments)

    until("both clusters' PS retire", 1200, over)
    mnist = until("status says mnist succeeded", 60, lambda: _done(status(watched), "mnist"))
    assert mnist["step"] >= STEPS and mnist["target_steps"] == STEPS, mnist
    assert _cluster(status(watched), "broken")["state"] == "failed"
    ps_pods = [
        p
        for p in kube.get("pods", NAMESPACE)
        if (_labels(p).get("tfk8s.io/cluster"), _labels(p).get("tfk8s.io/role")) == ("mnist", "ps")
    ]
    assert not ps_pods, "the PS's pod is gone; its output is not"
    ps = tfk8s(watched, "logs", "--stack", EXPERIMENT, "--cluster", "mnist", "--task", "ps-0")
    assert ps.returncode == 0, ps.stderr
    assert "tfk8s-launch: ps-0: all of ['worker-0', 'worker-1'] are done; retiring" in ps.stdout, ps.stdout[-2000:]
    broken = tfk8s(watched, "logs", "--stack", EXPERIMENT, "--cluster", "broken", "--task", "worker-0")
    assert broken.returncode == 0, broken.stderr
    assert BROKEN_SAYS in broken.stdout and "child exited with 3" in broken.stdout, broken.stdout[-2000:]


# How long a pod of the run may stay unschedulable before the wait for the run's end gives up on it.
STRANDED_SECONDS = 30


def _stranded_pods(kube: Kube, cluster: str) -> list[str]:
    """Pods of `cluster` that the scheduler has refused for STRANDED_SECONDS: after the User Node
    move, a lost task's next pod has nowhere to go, and waiting for the run's end would wait out
    its whole timeout (seen once: a chief that exited on an error MonitoredSession does not recover)."""
    now = time.time()
    stranded = []
    for pod in kube.get("pods", NAMESPACE):
        if _labels(pod).get("tfk8s.io/cluster") != cluster or pod["status"].get("phase") != "Pending":
            continue
        for condition in pod["status"].get("conditions") or []:
            since = condition.get("lastTransitionTime")
            refused = condition["type"] == "PodScheduled" and condition.get("reason") == "Unschedulable"
            if refused and since and now - calendar.timegm(time.strptime(since, "%Y-%m-%dT%H:%M:%SZ")) > STRANDED_SECONDS:
                stranded.append(f"{pod['metadata']['name']}: {condition.get('message')}")
    return stranded


def _labels(obj: dict[str, Any]) -> dict[str, str]:
    return obj["metadata"].get("labels") or {}


def _cluster(report: dict[str, Any], name: str) -> dict[str, Any]:
    """One cluster of the experiment in `tfk8s status --json` (the gate's /tfk8s/status)."""
    cluster: dict[str, Any] = report["clusters"].get(name, {})
    return cluster


def _done(report: dict[str, Any], name: str) -> dict[str, Any] | None:
    cluster = _cluster(report, name)
    return cluster if cluster.get("state") == "succeeded" else None
