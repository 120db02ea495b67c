"""Cluster role parsing: TF_CONFIG, the classic flags, JOB_COMPLETION_INDEX, and clear errors."""

from __future__ import annotations

import json

import pytest
from tfk8s_train.role import LOCAL, RoleError, parse_role

CLUSTER = {"ps": ["p0:1", "p1:1"], "worker": ["w0:1", "w1:1"]}


def tf_config(task_type: str, index: int | None, cluster: dict[str, list[str]] | None = None) -> str:
    task: dict[str, object] = {"type": task_type}
    if index is not None:
        task["index"] = index
    return json.dumps({"cluster": cluster or CLUSTER, "task": task})


@pytest.mark.parametrize(
    ("kwargs", "environ", "task", "is_chief", "workers"),
    [
        ({}, {}, "local-0", True, 0),
        ({}, {"TF_CONFIG": ""}, "local-0", True, 0),
        ({}, {"TF_CONFIG": '{"cluster": {}, "task": {}}'}, "local-0", True, 0),
        ({}, {"TF_CONFIG": tf_config("worker", 0)}, "worker-0", True, 2),
        ({}, {"TF_CONFIG": tf_config("worker", 1)}, "worker-1", False, 2),
        ({}, {"TF_CONFIG": tf_config("ps", 1)}, "ps-1", False, 2),
        ({}, {"TF_CONFIG": tf_config("worker", None), "JOB_COMPLETION_INDEX": "1"}, "worker-1", False, 2),
        ({}, {"TF_CONFIG": tf_config("worker", 0, {**CLUSTER, "chief": ["c:1"]})}, "worker-0", False, 2),
        ({}, {"TF_CONFIG": tf_config("chief", 0, {**CLUSTER, "chief": ["c:1"]})}, "chief-0", True, 2),
        ({"ps_hosts": "p0:1", "worker_hosts": "w0:1,w1:1", "job_name": "worker", "task_index": 1}, {}, "worker-1", False, 2),
        (
            {"ps_hosts": "p0:1", "worker_hosts": "w0:1,w1:1", "job_name": "worker"},
            {"JOB_COMPLETION_INDEX": "0"},
            "worker-0",
            True,
            2,
        ),
        # flags win over TF_CONFIG, but the chief (which flags cannot express) comes from TF_CONFIG
        (
            {"ps_hosts": "p0:1", "worker_hosts": "w0:1", "job_name": "chief", "task_index": 0},
            {"TF_CONFIG": tf_config("worker", 1, {**CLUSTER, "chief": ["c:1"]})},
            "chief-0",
            True,
            1,
        ),
    ],
    ids=[
        "nothing",
        "empty-tf-config",
        "empty-cluster",
        "tf-config-worker0",
        "tf-config-worker1",
        "tf-config-ps",
        "indexed-job",
        "with-chief-worker0-not-chief",
        "chief",
        "flags",
        "flags-indexed-job",
        "flags-and-chief",
    ],
)
def test_role_sources(kwargs: dict, environ: dict[str, str], task: str, is_chief: bool, workers: int) -> None:
    role = parse_role(environ=environ, **kwargs)
    assert (role.task, role.is_chief, role.num_workers) == (task, is_chief, workers)


def test_role_is_frozen_and_local_role_has_no_cluster() -> None:
    role = parse_role(environ={"TF_CONFIG": tf_config("worker", 1)})
    with pytest.raises(AttributeError):
        role.task_index = 0  # type: ignore[misc]
    assert role.cluster_dict() == CLUSTER
    assert parse_role(environ={}) is LOCAL and LOCAL.cluster_dict() == {}


@pytest.mark.parametrize(
    ("kwargs", "environ", "message"),
    [
        ({}, {"TF_CONFIG": "{not json"}, "TF_CONFIG is not valid JSON"),
        ({}, {"TF_CONFIG": "[]"}, "must be a JSON object"),
        ({}, {"TF_CONFIG": tf_config("worker", None)}, "no task index for job 'worker'"),
        ({}, {"TF_CONFIG": tf_config("worker", None), "JOB_COMPLETION_INDEX": "x"}, "JOB_COMPLETION_INDEX='x'"),
        ({}, {"TF_CONFIG": tf_config("ps", None), "JOB_COMPLETION_INDEX": "0"}, "no task index for job 'ps'"),
        ({}, {"TF_CONFIG": tf_config("worker", 2)}, "task index 2 out of range"),
        ({}, {"TF_CONFIG": tf_config("evaluator", 0)}, "job 'evaluator' is not one of"),
        ({}, {"TF_CONFIG": tf_config("worker", 0, {"worker": ["w0"]})}, "must be host:port"),
        ({}, {"TF_CONFIG": tf_config("worker", 0, {**CLUSTER, "evaluator": ["e:1"]})}, "unsupported job"),
        ({"ps_hosts": "p0:1", "worker_hosts": "w0:1"}, {}, "--job_name is required"),
        ({"ps_hosts": "p0:1", "job_name": "worker", "task_index": 0}, {}, "job 'worker' has no hosts"),
    ],
    ids=[
        "bad-json",
        "not-object",
        "no-index",
        "bad-completion-index",
        "ps-no-index",
        "index-range",
        "unknown-type",
        "no-port",
        "unknown-job",
        "flags-no-job",
        "flags-no-workers",
    ],
)
def test_role_errors_name_the_source(kwargs: dict, environ: dict[str, str], message: str) -> None:
    with pytest.raises(RoleError, match=message):
        parse_role(environ=environ, **kwargs)


@pytest.mark.parametrize(
    ("mode", "environ", "tf_config_value", "expected"),
    [
        ("auto", {}, None, "local"),
        ("auto", {}, tf_config("worker", 0), "between-graph"),
        ("auto", {}, tf_config("chief", 0, {**CLUSTER, "chief": ["c:1"]}), "in-graph"),
        ("auto", {"TFK8S_REPLICATION": "in-graph"}, tf_config("worker", 0), "in-graph"),  # notebook client, no chief
        ("between-graph", {"TFK8S_REPLICATION": "in-graph"}, tf_config("worker", 0), "between-graph"),
    ],
    ids=["local", "cluster", "chief", "infra-says-in-graph", "flag-wins"],
)
def test_training_mode_resolution(mode: str, environ: dict[str, str], tf_config_value: str | None, expected: str) -> None:
    from tfk8s_train.cli import resolve_mode
    from tfk8s_train.config import TrainConfig

    role = parse_role(environ={"TF_CONFIG": tf_config_value} if tf_config_value else {})
    assert resolve_mode(TrainConfig(mode=mode), role, environ) == expected


@pytest.mark.parametrize(
    ("argv", "environ", "message"),
    [
        (["--mode", "in-graph"], {}, "--mode in-graph needs a cluster"),
        (["--mode", "local"], {"TF_CONFIG": tf_config("worker", 0)}, "--mode local, but this process has a cluster role"),
        (["--mode", "between-graph"], {"TF_CONFIG": tf_config("chief", 0, {**CLUSTER, "chief": ["c:1"]})}, "no chief job"),
        (["--ps_hosts", "p:1", "--worker_hosts", "w:1", "--job_name", "worker", "--task_index", "3"], {}, "out of range"),
        (["--steps", "0"], {}, "--steps must be positive"),
        (["--checkpoint-seconds", "0"], {}, "--checkpoint-seconds must be positive"),
        ([], {"TFK8S_CHECKPOINT_SECONDS": "soon"}, "TFK8S_CHECKPOINT_SECONDS='soon': expected a number of seconds"),
    ],
    ids=[
        "in-graph-without-cluster",
        "local-with-cluster",
        "between-graph-chief",
        "flag-index-range",
        "zero-steps",
        "zero-checkpoint-seconds",
        "checkpoint-seconds-variable-not-a-number",
    ],
)
def test_train_command_rejects_bad_setups_before_training(
    argv: list[str], environ: dict[str, str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from tfk8s_train.cli import main

    assert main(["train", *argv], environ) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "environ", "seconds"),
    [
        ([], {}, 60.0),
        ([], {"TFK8S_CHECKPOINT_SECONDS": "20"}, 20.0),
        (["--checkpoint-seconds", "5"], {"TFK8S_CHECKPOINT_SECONDS": "20"}, 5.0),
    ],
    ids=["default", "from-the-experiment", "flag-wins"],
)
def test_the_checkpoint_interval_comes_from_the_flag_then_the_experiment_then_the_default(
    argv: list[str], environ: dict[str, str], seconds: float
) -> None:
    from tfk8s_train.cli import build_parser, config_from_args

    args = build_parser().parse_args(["train", *argv])
    assert config_from_args(args, environ).checkpoint_seconds == seconds


def test_train_module_alias_reports_errors_with_exit_code_2(training_env: dict[str, str]) -> None:
    import subprocess
    import sys

    env = {k: v for k, v in training_env.items() if k != "TF_CONFIG"}
    run = subprocess.run(
        [sys.executable, "-m", "tfk8s_train.train", "--mode", "between-graph"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2 and "needs a cluster" in run.stderr
