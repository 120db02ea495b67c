"""The pod as Kubernetes would lay it out, run for real: ConfigMap items at their mount paths,
the container's command and env, the launcher from the shipped files.

This is where the infra (what goes into the pod) and training/ (what runs there) meet; mocks
alone cannot show that the launcher is where the command says it is.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pulumi
from mocked_program import JOB, Deployment, after, pod_spec, run_program

POD_ROOT = "/opt/tfk8s"
PROBE = (
    "import json, os, sys; print(json.dumps({'tf_config': json.loads(os.environ['TF_CONFIG']), 'argv': sys.argv[1:], "
    "'log_dir': os.environ['TFK8S_LOG_DIR']}))"
)
# What the Job controller adds to the labels of every pod it creates (Kubernetes >= 1.27).
JOB_UID_LABEL = "batch.kubernetes.io/controller-uid"
# A guard against a hang, never a speed check: some of these processes import TensorFlow, whose time
# on two cores busy with a cold CI's builds and three test workers is no bound worth testing here.
SUBPROCESS_TIMEOUT = 300


def downward(entry: dict[str, Any], pod: dict[str, Any]) -> str:
    """An env entry's value as the kubelet resolves it: a literal, or a field of the pod."""
    if "value" in entry:
        return str(entry["value"])
    path = entry["valueFrom"]["fieldRef"]["fieldPath"]
    if path == "metadata.namespace":
        return str(pod["metadata"]["namespace"])
    assert path.startswith("metadata.labels['") and path.endswith("']"), path
    return str(pod["metadata"]["labels"].get(path[len("metadata.labels['") : -2], ""))  # a missing label: ""


def materialize(spec: dict[str, Any], config_maps: dict[str, dict[str, bytes]], root: Path, container: int = 0) -> None:
    """Write every ConfigMap volume's items where the container mounts them (under `root`)."""
    volumes = {v["name"]: v for v in spec["volumes"]}
    for mount in spec["containers"][container]["volumeMounts"]:
        source = volumes[mount["name"]].get("configMap")
        if not source:
            continue
        data = config_maps[source["name"]]
        # Without `items`, Kubernetes writes every key as a file of that name.
        for item in source.get("items", [{"key": key, "path": key} for key in data]):
            target = root / mount["mountPath"].lstrip("/") / item["path"]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data[item["key"]])


def files_of(config_map: dict[str, Any]) -> dict[str, bytes]:
    """A ConfigMap's keys as the kubelet writes them: `data` as UTF-8 text, `binaryData` decoded."""
    files = {key: text.encode() for key, text in (config_map.get("data") or {}).items()}
    files.update({key: base64.b64decode(value) for key, value in (config_map.get("binaryData") or {}).items()})
    return files


def config_maps_of(d: Deployment) -> dict[str, dict[str, bytes]]:
    """Every ConfigMap's files, by the name the API server would hold: the one given, or Pulumi's
    auto-name (the mocks' `-auto`)."""
    return {
        r.inputs["metadata"].get("name") or f"{r.name}-auto": files_of(r.inputs)
        for r in d.mocks.of_type("kubernetes:core/v1:ConfigMap")
    }


def worker_pod_on_disk(d: Deployment, root: Path) -> dict[str, Any]:
    """The worker Job's pod spec, its ConfigMap volumes written under `root`."""
    (job,) = d.mocks.of_type(JOB)
    spec = pod_spec(job)
    materialize(spec, config_maps_of(d), root)
    return spec


def relocate(value: str, root: Path) -> str:
    return value.replace(POD_ROOT, str(root / POD_ROOT.lstrip("/")))


@pulumi.runtime.test
def test_worker_pod_runs_the_shipped_launcher_with_the_infra_contract(dev_config: dict[str, Any], tmp_path: Path) -> None:
    d = run_program(dev_config)

    def check() -> None:
        spec = worker_pod_on_disk(d, tmp_path)
        container = spec["containers"][0]
        launcher_part = container["command"][: container["command"].index("--") + 1]
        command = [sys.executable if c == "python" else relocate(c, tmp_path) for c in launcher_part]
        (job,) = d.mocks.of_type(JOB)
        job_uid = f"{job.name}-uid"  # the mock API server's uid of the Job
        template_labels = job.inputs["spec"]["template"]["metadata"]["labels"]
        pod = {"metadata": {"namespace": "tfk8s-alice", "labels": {**template_labels, JOB_UID_LABEL: job_uid}}}
        env = {e["name"]: relocate(downward(e, pod), tmp_path) for e in container["env"]}
        env.update(PATH=os.environ["PATH"], JOB_COMPLETION_INDEX="1")
        (tmp_path / "log").mkdir()
        env.update(TFK8S_LOG_DIR=str(tmp_path / "log"))

        probe = subprocess.run(
            [*command, sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT
        )
        assert probe.returncode == 0, probe.stderr
        seen = json.loads(probe.stdout.strip().splitlines()[-1])
        assert seen["tf_config"]["task"] == {"type": "worker", "index": 1}  # from JOB_COMPLETION_INDEX
        assert seen["tf_config"]["cluster"] == json.loads(env["TFK8S_CLUSTER_SPEC"])
        assert "--job_name=worker" in seen["argv"] and "--task_index=1" in seen["argv"]
        assert "--ps_hosts=dev-mnist-ps-0:2222" in seen["argv"]
        # The run is the Job: its uid, read from the pod's label, names the run's own log directory.
        assert seen["log_dir"] == str(tmp_path / "log" / f"run-{job_uid}")
        assert f"--log_path={tmp_path / 'log' / f'run-{job_uid}'}" in seen["argv"]

        # The default command imports our trainer from the same shipped files.
        trainer = subprocess.run(
            [sys.executable, "-c", "import tfk8s_train.cli"],
            env=env,
            capture_output=True,
            text=True,
            timeout=SUBPROCESS_TIMEOUT,
            cwd=tmp_path,
        )
        assert trainer.returncode == 0, trainer.stderr

    return after(d, check)


@pulumi.runtime.test
def test_user_code_directory_lands_where_the_command_expects_it(dev_config: dict[str, Any], tmp_path: Path) -> None:
    cluster = dev_config["clusters"][0]
    cluster.update(
        code={"source": "configmap", "path": "tests/training/fixtures"}, command=["python", "/opt/tfk8s/code/mnist_replica.py"]
    )
    d = run_program(dev_config)

    def check() -> None:
        spec = worker_pod_on_disk(d, tmp_path)
        script = Path(relocate(spec["containers"][0]["command"][-1], tmp_path))
        shipped = Path(__file__).resolve().parents[1] / "training" / "fixtures" / "mnist_replica.py"
        assert script.read_text() == shipped.read_text()
        assert spec["containers"][0]["workingDir"] == "/opt/tfk8s/code"

    return after(d, check)


@pulumi.runtime.test
def test_jupyter_and_the_token_gate_run_the_trainer_from_the_tenants_archive(
    tenant_config: dict[str, Any], tmp_path: Path
) -> None:
    """A tenant ships the trainer package as one zip archive, as experiments do: Jupyter imports it
    (in-graph training from a notebook) and the TensorBoard gate runs it, each from its own mount
    and `PYTHONPATH`. Found there first: without this machine's site-packages (`-S`, they hold the
    package too) the package is the archive's."""
    d = run_program(tenant_config)

    def check() -> None:
        found = {}
        for deployment in d.mocks.of_type("kubernetes:apps/v1:Deployment"):
            spec = pod_spec(deployment)
            for index, container in enumerate(spec["containers"]):
                env = {e["name"]: e.get("value", "") for e in container.get("env", [])}
                if "PYTHONPATH" not in env:
                    continue
                root = tmp_path / container["name"]
                materialize(spec, config_maps_of(d), root, container=index)
                pythonpath = {"PYTHONPATH": relocate(env["PYTHONPATH"], root)}
                where = "import tfk8s_train; print(tfk8s_train.__file__)"
                done = subprocess.run([sys.executable, "-S", "-c", where], env=pythonpath, capture_output=True, text=True)
                assert done.returncode == 0, (container["name"], done.stderr)
                found[container["name"]] = done.stdout.strip()
                # What the container runs: the gate's command, Jupyter's in-graph trainer.
                command = container.get("command", ["python", "-c", "import tfk8s_train.in_graph"])
                argv = [sys.executable, *command[1:], *(["--help"] if "-m" in command else [])]
                ran = subprocess.run(
                    argv, env={**os.environ, **pythonpath}, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT
                )
                assert ran.returncode == 0, (container["name"], ran.stderr)
        assert set(found) == {"jupyter", "token-gate"}, found
        archive = f"{tmp_path}/{{}}/opt/tfk8s/trainer/tfk8s_train.zip/tfk8s_train/__init__.py"
        assert found == {name: archive.format(name) for name in found}, found

    return after(d, check)
