"""One platform, its tenants, many experiments, one owner per object: the stack model against the
real API server.

On the session's platform-dev (tenants alice, bob, dora): three experiments `up` at once (two of
alice, both with a cluster named mnist, and one of bob), each ready; destroying one leaves the
platform, the others, and the user's logs and data as they were; a real TensorBoard over alice's
log volume lists the runs of both her experiments, the destroyed one included; her Jupyter's
service account finds the notebook-driven cluster's layout and can read nothing else; every
stack's second `up` changes nothing; adopting a foreign namespace, class or experiment name is
refused with nothing changed; destroying a tenant is refused while its experiments exist, and the
platform while tenants exist.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from drivers import ROOT, Cli, Kube
from tfk8s_train.cluster import free_ports

ALICE, BOB = "tfk8s-alice", "tfk8s-bob"
TENANT_ALICE = "tenant-alice"
EXPERIMENTS = {
    # stack: (user, cluster settings)
    "exp-a1": ("alice", {"name": "mnist", "replication": "in-graph", "inGraphClient": "notebook"}),
    "exp-a2": ("alice", {"name": "mnist"}),
    "exp-b1": ("bob", {"name": "cifar"}),
}
SMALL = {"workers.cpu": "500m", "workers.memory": "1Gi", "ps.cpu": "250m", "ps.memory": "512Mi"}


def new_experiment(cli: Cli, stack: str, tenant: str, cluster: dict[str, str]) -> None:
    """The flow of docs/guide/usage.md: `stack init` and a few `config set --path`, no YAML copied."""
    cli.init_experiment(stack, tenant=tenant, settings={f"tfk8s:clusters[0].{k}": v for k, v in {**cluster, **SMALL}.items()})


def snapshot(kube: Kube, namespace: str, experiment: str | None) -> dict[str, str]:
    """uid@resourceVersion of every object of one experiment (None: the tenant's) in a namespace."""
    found = {}
    kinds = ("deployments", "jobs", "services", "configmaps", "serviceaccounts", "roles", "rolebindings", "pvc", "secrets")
    layouts = [c["metadata"]["name"] for c in kube.get("crd") if c["spec"]["names"]["kind"] == "Layout"]
    for kind in (*kinds, *layouts):
        for o in kube.get(kind, namespace):
            labels = o["metadata"].get("labels") or {}
            if labels.get("tfk8s.io/stack-kind") and labels.get("tfk8s.io/experiment") == experiment:
                found[f"{kind}/{o['metadata']['name']}"] = f"{o['metadata']['uid']}@{o['metadata']['resourceVersion']}"
    return found


def test_three_experiments_up_at_once_each_ready(cli: Cli, tenants: dict[str, str], project: Path) -> None:
    for stack, (user, cluster) in EXPERIMENTS.items():
        new_experiment(cli, stack, tenants[user], cluster)
    ups = {
        stack: subprocess.Popen(
            ["pulumi", "up", "--stack", stack, "--yes", "--skip-preview", "--non-interactive", "--color", "never"],
            cwd=project,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for stack in EXPERIMENTS
    }
    for stack, up in ups.items():
        out, _ = up.communicate(timeout=300)
        assert up.returncode == 0, f"{stack}:\n{out}"
    for stack in EXPERIMENTS:
        outputs = cli.outputs(stack)
        assert outputs["ready"] is True, (stack, outputs["readiness"])
    # Same cluster name in two experiments of one user: two clusters, each with its own names.
    hosts = {stack: cli.outputs(stack)["clusterSpecs"]["mnist"]["ps"] for stack in ("exp-a1", "exp-a2")}
    assert hosts == {"exp-a1": ["exp-a1-mnist-ps-0:2222"], "exp-a2": ["exp-a2-mnist-ps-0:2222"]}


def test_the_notebook_finds_its_cluster_with_a_token_that_reads_nothing_else(kube: Kube, cli: Cli, tmp_path: Path) -> None:
    from tfk8s_train.layouts import from_cluster

    (jupyter,) = [d for d in kube.get("deployments", ALICE) if d["metadata"]["labels"]["app.kubernetes.io/name"] == "jupyter"]
    account = jupyter["spec"]["template"]["spec"]["serviceAccountName"]
    (tmp_path / "token").write_text(kube.run("create", "token", account, "-n", ALICE))
    (tmp_path / "namespace").write_text(ALICE)
    config = json.loads(kube.run("config", "view", "--raw", "-o", "json"))["clusters"][0]["cluster"]
    (tmp_path / "ca.crt").write_bytes(Path(config["certificate-authority"]).read_bytes())
    pod_env = {e["name"]: e.get("value") for e in jupyter["spec"]["template"]["spec"]["containers"][0]["env"]}
    environ = {
        "TFK8S_KUBE_API": config["server"],
        "TFK8S_SA_DIR": str(tmp_path),
        "TFK8S_LOG_ROOT": "/logs",
        "TFK8S_LAYOUT_API": pod_env["TFK8S_LAYOUT_API"],  # as the platform set it in the Jupyter pod
    }

    env = from_cluster(environ)  # exp-a1's mnist is the only notebook-driven cluster of alice
    spec = cli.outputs("exp-a1")["clusterSpecs"]["mnist"]
    assert json.loads(env["TFK8S_CLUSTER_SPEC"]) == spec and spec["chief"] == ["jupyter-tf:2222"]
    (job,) = [j for j in kube.get("jobs", ALICE) if j["metadata"]["name"] == "exp-a1-mnist-worker"]
    # The run is the servers' Job: the notebook's done marker lands in that run's directory, where
    # the servers' launchers (their uid from their pods' label) wait for it.
    assert env["TFK8S_RUN_UID"] == job["metadata"]["uid"]
    assert env["TFK8S_LOG_DIR"] == f"/logs/exp-a1/mnist/run-{job['metadata']['uid']}"
    who = f"system:serviceaccount:{ALICE}:{account}"
    layouts = "layouts." + pod_env["TFK8S_LAYOUT_API"].split("/")[2]
    assert kube.run("auth", "can-i", "list", layouts, "-n", ALICE, "--as", who).strip() == "yes"
    for verb, what, namespace in (
        ("get", "secrets", ALICE),
        ("list", "configmaps", ALICE),
        ("list", layouts, BOB),
        ("create", layouts, ALICE),
    ):
        done = subprocess.run(
            [kube.binary, "--kubeconfig", str(kube.kubeconfig), "auth", "can-i", verb, what, "-n", namespace, "--as", who],
            capture_output=True,
            text=True,
        )
        assert done.stdout.strip() == "no", (verb, what, namespace)


def write_run(log_root: Path, experiment: str, cluster: str) -> None:
    """What a worker of that run writes, with the trainer's own writer, where its /log subPath points."""
    code = (
        "import sys; from pathlib import Path; from tfk8s_train.reporting import tensorboard_dir, v2_scalar_writer\n"
        "write, close = v2_scalar_writer(tensorboard_dir(sys.argv[1], 'worker-0'))\n"
        "[write('loss', 1.0 / (step + 1), step) for step in range(3)]; close()\n"
    )
    subprocess.run(
        [sys.executable, "-c", code, str(log_root / experiment / cluster)],
        check=True,
        cwd=ROOT / "training",
        env={"PYTHONPATH": str(ROOT / "training"), "TF_CPP_MIN_LOG_LEVEL": "3", "PATH": "/usr/bin:/bin"},
    )


def test_destroying_one_experiment_leaves_everything_else_and_tensorboard_keeps_its_runs(
    cli: Cli, kube: Kube, host_volumes: Path
) -> None:
    log_claim = next(c for c in kube.get("pvc", ALICE) if c["metadata"]["name"] == "tfk8s-log")
    log_root = Path(kube.get("pv", name=log_claim["spec"]["volumeName"])["spec"]["hostPath"]["path"])
    assert log_root.is_relative_to(host_volumes)
    for experiment in ("exp-a1", "exp-a2"):
        write_run(log_root, experiment, "mnist")
    before = {
        "platform-alice": snapshot(kube, ALICE, None),
        "platform-bob": snapshot(kube, BOB, None),
        "exp-a1": snapshot(kube, ALICE, "exp-a1"),
        "exp-b1": snapshot(kube, BOB, "exp-b1"),
    }
    assert all(before.values()), before

    cli("destroy", "--stack", "exp-a2", "--yes")
    assert snapshot(kube, ALICE, "exp-a2") == {}
    after = {
        "platform-alice": snapshot(kube, ALICE, None),
        "platform-bob": snapshot(kube, BOB, None),
        "exp-a1": snapshot(kube, ALICE, "exp-a1"),
        "exp-b1": snapshot(kube, BOB, "exp-b1"),
    }
    assert after == before  # same objects, same resource versions: nothing else was touched
    assert (log_root / "exp-a2" / "mnist" / "tensorboard" / "worker-0").is_dir()  # the user's logs outlive it

    # The tenant's TensorBoard pod, its two containers' own commands run here (kwok runs no
    # containers) on the volume's directory: TensorBoard on loopback, the token gate in front.
    (board,) = [d for d in kube.get("deployments", ALICE) if d["metadata"]["labels"]["app.kubernetes.io/name"] == "tensorboard"]
    containers = {c["name"]: c for c in board["spec"]["template"]["spec"]["containers"]}
    tensorboard, gate = containers["tensorboard"], containers["token-gate"]
    mount = tensorboard["volumeMounts"][0]["mountPath"]
    board_port, gate_port = free_ports(2)
    argv = [str(log_root) if a == mount else a for a in tensorboard["command"][1:]]
    assert argv[argv.index("--host") + 1] == "127.0.0.1"  # never reachable but through the gate
    argv[argv.index("--port") + 1] = str(board_port)
    argv += ["--load_fast", "false", "--reload_interval", "1"]
    gate_argv = list(gate["args"])
    gate_argv[gate_argv.index("--listen") + 1] = str(gate_port)
    gate_argv[gate_argv.index("--backend") + 1] = f"127.0.0.1:{board_port}"
    where = cli.outputs(TENANT_ALICE)["jupyterTokenSecret"]
    token = base64.b64decode(kube.get("secret", where["namespace"], where["name"])["data"][where["key"]]).decode()
    env = {**os.environ, "TFK8S_TOKEN": token, "PYTHONPATH": str(ROOT / "training")}
    servers = [
        subprocess.Popen([sys.executable, "-m", "tensorboard.main", *argv], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
        subprocess.Popen(
            [sys.executable, *gate["command"][1:], *gate_argv], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        ),
    ]
    try:
        wanted = {"exp-a1/mnist/tensorboard/worker-0", "exp-a2/mnist/tensorboard/worker-0"}
        runs = wait_for_runs(gate_port, wanted, {"Authorization": f"token {token}"})
        assert wanted <= set(runs), runs
        refused = urllib.request.Request(f"http://127.0.0.1:{gate_port}/data/runs")
        with pytest.raises(urllib.error.HTTPError) as error:
            urllib.request.urlopen(refused, timeout=5)
        assert error.value.code == 401  # without alice's token, nothing of her logs
    finally:
        for server in servers:
            server.terminate()
            server.wait(10)


def wait_for_runs(port: int, wanted: set[str], headers: dict[str, str]) -> list[str]:
    runs: list[str] = []
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            request = urllib.request.Request(f"http://127.0.0.1:{port}/data/runs", headers=headers)
            with urllib.request.urlopen(request, timeout=5) as response:
                runs = json.load(response)
        except OSError:
            runs = []
        if wanted <= set(runs):
            break
        time.sleep(0.5)
    return runs


def test_a_second_up_of_every_stack_changes_nothing(cli: Cli, platform: str, tenants: dict[str, str]) -> None:
    for stack in (platform, *tenants.values(), "exp-a1", "exp-b1"):
        cli("up", "--stack", stack, "--yes", "--skip-preview", "--expect-no-changes")


def refused(cli: Cli, stack: str) -> str:
    done = cli("up", "--stack", stack, "--yes", "--skip-preview", check=False)
    text = done.stdout + done.stderr
    assert done.returncode != 0, text
    assert "nothing was changed" in text and "Traceback" not in text, text
    return text


def test_adopting_a_foreign_namespace_class_tenant_or_experiment_name_is_refused_with_nothing_changed(
    cli: Cli, kube: Kube, platform: str, tenants: dict[str, str], project: Path
) -> None:
    before = {ns: snapshot(kube, ns, None) for ns in (ALICE, BOB)}
    # An experiment that would take exp-a1's names.
    new_experiment(cli, "thief", tenants["alice"], {"name": "mnist"})
    cli("config", "set", "--stack", "thief", "tfk8s:experiment", "exp-a1")
    text = refused(cli, "thief")
    assert "Service tfk8s-alice/exp-a1-mnist-ps-0 already exists, managed by tfk8s stack organization/tfk8s/exp-a1@" in text
    # A tenant whose namespace someone else made; a second tenant stack for alice.
    kube.run("create", "namespace", "tfk8s-erin")
    cli.init_tenant("tenant-erin", platform=platform, user="erin")
    text = refused(cli, "tenant-erin")
    assert "tfk8s:tenant.name: namespace 'tfk8s-erin' already exists, managed by another tool" in text, text
    cli.init_tenant("tenant-alice-2", platform=platform, user="alice")
    text = refused(cli, "tenant-alice-2")
    assert "Tenant 'alice' already exists, managed by tfk8s stack organization/tfk8s/tenant-alice@" in text, text
    # A platform whose class another platform owns.
    cli("stack", "init", "platform-two")
    for path, value in (
        ("tfk8s:kind", "platform"),
        ("tfk8s:platform.userNode.name", "tfk8s-user-node"),
        ("tfk8s:platform.storage.className", "tfk8s-local"),
        ("tfk8s:platform.network.policyEnforced", "false"),  # kwok enforces none
    ):
        cli("config", "set", "--stack", "platform-two", "--path", path, value)
    text = refused(cli, "platform-two")
    assert "StorageClass 'tfk8s-local' already exists, managed by tfk8s stack organization/tfk8s/platform-dev@" in text
    assert {ns: snapshot(kube, ns, None) for ns in (ALICE, BOB)} == before
    assert not [j for j in kube.get("jobs", ALICE) if j["metadata"]["labels"].get("tfk8s.io/stack") == "thief"]
    for stack in ("thief", "tenant-erin", "tenant-alice-2", "platform-two"):
        # Nothing in the refused stacks' state either: the stack itself and the providers the program
        # warmed up or read through (kubernetes, pulumi), no Kubernetes object.
        state = json.loads(cli("stack", "export", "--stack", stack).stdout)["deployment"].get("resources") or []
        left = {r["type"] for r in state}
        assert left <= {"pulumi:pulumi:Stack", "pulumi:providers:kubernetes", "pulumi:providers:pulumi"}, state
        cli("stack", "rm", stack, "--yes", "--force")
    kube.run("delete", "namespace", "tfk8s-erin", "--wait=false")


def destroy_refused(cli: Cli, stack: str) -> str:
    done = cli("destroy", "--stack", stack, "--yes", check=False)
    text = done.stdout + done.stderr
    assert done.returncode != 0, text
    return text


def test_neither_a_tenant_nor_the_platform_can_be_destroyed_from_under_what_uses_it(
    cli: Cli, kube: Kube, platform: str, tenants: dict[str, str]
) -> None:
    """In a full run, test_cli.py's platform was destroyed earlier on this API server: the situation in
    which a guard with built-in params (ConfigMaps) fails open for good (kubernetes#130887)."""
    text = destroy_refused(cli, tenants["alice"])
    assert "the tfk8s tenant is still used by experiment stack exp-a1" in text, text
    assert "destroy the experiment stacks first" in text
    text = destroy_refused(cli, platform)
    assert "the tfk8s platform is still used by tenant stack tenant-" in text, text
    assert "destroy the tenant stacks first" in text
    # Nor can a guard be unguarded first: stripping its label is refused, other updates are not.
    role = next(
        r["metadata"]["name"] for r in kube.get("clusterroles") if r["metadata"]["name"].startswith("tfk8s-experimenter-")
    )
    for target in (["configmap", "tfk8s-tenant", "-n", ALICE], ["clusterrole", role]):
        stripped = subprocess.run(
            [kube.binary, "--kubeconfig", str(kube.kubeconfig), "label", *target, "tfk8s.io/platform-guard-"],
            capture_output=True,
            text=True,
        )
        assert stripped.returncode != 0 and "would unguard it; refused" in stripped.stderr, (target, stripped.stderr)
        kube.run("label", *target, "e2e.tfk8s.io/touched=yes")
        kube.run("label", *target, "e2e.tfk8s.io/touched-")
    # Nothing the experiments use was deleted: their tenants' apps, volumes and namespaces are there.
    for namespace in (ALICE, BOB):
        names = {d["metadata"]["labels"]["app.kubernetes.io/name"] for d in kube.get("deployments", namespace)}
        assert {"jupyter", "tensorboard"} <= names
        assert sorted(c["metadata"]["name"] for c in kube.get("pvc", namespace)) == ["tfk8s-data", "tfk8s-log"]
    for stack in (platform, tenants["alice"]):  # both stopped at their guard: a no-change `up` proves nothing else went
        cli("up", "--stack", stack, "--yes", "--skip-preview")

    for stack in ("exp-a1", "exp-b1"):
        cli("destroy", "--stack", stack, "--yes")
        cli("stack", "rm", stack, "--yes")
    cli("stack", "rm", "exp-a2", "--yes")
    for stack in tenants.values():
        cli("destroy", "--stack", stack, "--yes")
    cli("destroy", "--stack", platform, "--yes")
    # keepOnDestroy (the default): the users' namespaces and volumes stay, with their data.
    assert sorted(c["metadata"]["name"] for c in kube.get("pvc", ALICE)) == ["tfk8s-data", "tfk8s-log"]
    assert not [d for d in kube.get("deployments", ALICE)]
