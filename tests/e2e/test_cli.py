"""The plain `pulumi` CLI as users type it, with tfk8s's own language host, on the e2e cluster.

A platform stack `platform-cli`, a tenant `tenant-cli` on it (user carol, keepOnDestroy false) and an
experiment `cli` of that tenant, all created from nothing with `stack init` and `config set --path`,
taken through preview, up, a no-change up, refresh, errors, an interrupted up and destroy. It runs before test_local_cluster.py
(file order) and leaves nothing behind.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from drivers import Cli, Kube

import toolenv

STACK, TENANT, PLATFORM = "cli", "tenant-cli", "platform-cli"
NAMESPACE = "tfk8s-carol"
TOKEN = secrets.token_hex(16)
# What users type to write stack files without copying YAML: (path, value, --type).
PLATFORM_CONFIG = [
    ("tfk8s:kind", "platform", None),
    ("tfk8s:platform.userNode.name", "tfk8s-user-node", None),
    ("tfk8s:platform.storage.backend", "local", None),
    ("tfk8s:platform.storage.className", "tfk8s-cli", None),
    ("tfk8s:platform.kubernetesVersion", "1.34", "string"),
    ("tfk8s:platform.awaitTimeoutSeconds", "180", None),
    # kwok enforces no NetworkPolicy (a platform on a cluster that does names its pod ranges instead).
    ("tfk8s:platform.network.policyEnforced", "false", None),
]
TENANT_CONFIG = [
    ("tfk8s:kind", "tenant", None),
    ("tfk8s:platformStack", PLATFORM, None),
    ("tfk8s:tenant.name", "carol", None),
    ("tfk8s:tenant.identities.users[0]", "carol", None),
    ("tfk8s:tenant.volumes.dataSize", "1Gi", None),
    ("tfk8s:tenant.volumes.logSize", "1Gi", None),
    ("tfk8s:tenant.volumes.keepOnDestroy", "false", None),
]
# A new experiment in one step: the `stack init` + `config set --path` flow of docs/guide/usage.md.
EXPERIMENT_CONFIG = [
    ("tfk8s:kind", "experiment", None),
    ("tfk8s:namespace", NAMESPACE, None),
    ("tfk8s:clusters[0].name", "cifar", None),
    ("tfk8s:clusters[0].workers.count", "2", None),
    ("tfk8s:clusters[0].workers.cpu", "500m", None),
    ("tfk8s:clusters[0].workers.memory", "1Gi", None),
]


def init(cli: Cli, stack: str, config: list[tuple[str, str, str | None]]) -> None:
    cli("stack", "init", stack)
    for path, value, kind in config:
        cli("config", "set", "--stack", stack, "--path", path, value, *(["--type", kind] if kind else []))


def stack_file(project: Path, stack: str = STACK) -> Path:
    return project / "stacks" / f"Pulumi.{stack}.yaml"


def output_of(done: subprocess.CompletedProcess[str]) -> str:
    return done.stdout + done.stderr


def langhost_processes() -> list[str]:
    """tfk8s's language host and the programs it started, working on this test's state backend."""
    return toolenv.langhost_processes(os.environ["PULUMI_BACKEND_URL"])


def test_stack_init_and_config_set_write_the_stack_files_with_an_encrypted_secret(cli: Cli, project: Path) -> None:
    init(cli, PLATFORM, PLATFORM_CONFIG)
    init(cli, TENANT, TENANT_CONFIG)
    cli("config", "set", "--stack", TENANT, "--secret", "tfk8s:jupyterToken", TOKEN)
    init(cli, STACK, EXPERIMENT_CONFIG)

    text = stack_file(project, TENANT).read_text()
    assert TOKEN not in text
    document = yaml.safe_load(text)
    assert document["encryptionsalt"].startswith("v1:")  # the salt lives with the stack file, as Pulumi users expect
    assert set(document["config"]["tfk8s:jupyterToken"]) == {"secure"}
    assert document["config"]["tfk8s:tenant"]["volumes"]["keepOnDestroy"] is False  # typed, not strings
    assert yaml.safe_load(stack_file(project, PLATFORM).read_text())["config"]["tfk8s:platform"]["kubernetesVersion"] == "1.34"
    assert cli("config", "get", "--stack", TENANT, "tfk8s:jupyterToken").stdout.strip() == TOKEN
    experiment = yaml.safe_load(stack_file(project).read_text())["config"]
    assert experiment["tfk8s:kind"] == "experiment" and experiment["tfk8s:clusters"][0]["workers"]["count"] == 2
    listed = cli("stack", "ls").stdout
    assert {STACK, TENANT, PLATFORM} <= {line.split()[0].rstrip("*") for line in listed.splitlines()[1:]}, listed


def test_an_experiment_without_its_tenant_and_a_tenant_without_its_platform_stop_before_creating_anything(
    cli: Cli, kube: Kube
) -> None:
    done = cli("up", "--stack", STACK, "--yes", "--skip-preview", check=False)
    text = output_of(done)
    assert done.returncode != 0
    assert f"tfk8s:namespace: namespace '{NAMESPACE}' has no tfk8s tenant contract (ConfigMap tfk8s-contract)" in text, text
    assert "`pulumi up` the tenant stack first" in text and "Traceback" not in text, text
    done = cli("up", "--stack", TENANT, "--yes", "--skip-preview", check=False)
    text = output_of(done)
    assert done.returncode != 0
    assert f"tfk8s:platformStack: stack 'organization/tfk8s/{PLATFORM}' has no" in text, text
    assert f"pulumi up --stack {PLATFORM}" in text and "Traceback" not in text, text
    assert NAMESPACE not in {n["metadata"]["name"] for n in kube.get("namespaces")}


def test_preview_shows_the_plan_and_creates_nothing(cli: Cli, kube: Kube) -> None:
    cli("stack", "select", PLATFORM)
    done = cli("preview", "--diff")  # the selected stack, as a user would run it
    assert "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition" in done.stdout and "+ " in done.stdout
    assert not [c for c in kube.get("storageclasses") if c["metadata"]["name"] == "tfk8s-cli"]


def test_up_of_all_three_reaches_ready_and_the_chosen_token_is_a_secret_output(cli: Cli, kube: Kube) -> None:
    cli("up", "--stack", PLATFORM, "--yes", "--skip-preview")
    assert cli.outputs(PLATFORM)["ready"] is True
    preview = cli("preview", "--stack", TENANT, "--diff")
    assert "kubernetes:core/v1:Namespace" in preview.stdout and TOKEN not in output_of(preview)
    assert NAMESPACE not in {n["metadata"]["name"] for n in kube.get("namespaces")}
    done = cli("up", "--stack", TENANT, "--yes", "--skip-preview")
    assert TOKEN not in output_of(done)
    outputs = cli.outputs(TENANT)
    assert outputs["ready"] is True, outputs["readiness"]
    # A stack experiments read exports nothing secret: where the token is, not the token.
    assert "jupyterToken" not in outputs and outputs["jupyterTokenSecret"]["name"] == "tfk8s-jupyter-token"
    assert TOKEN not in json.dumps(cli.outputs(TENANT, show_secrets=True))
    secret = kube.get("secret", NAMESPACE, outputs["jupyterTokenSecret"]["name"])
    assert base64.b64decode(secret["data"]["token"]).decode() == TOKEN

    cli("stack", "select", STACK)
    preview = cli("preview", "--diff")
    assert "kubernetes:batch/v1:Job" in preview.stdout and not kube.get("jobs", NAMESPACE)
    cli("up", "--stack", STACK, "--yes", "--skip-preview")
    experiment = cli.outputs(STACK)
    assert experiment["ready"] is True, experiment["readiness"]
    # The experiment links the user's apps from the tenant.
    assert experiment["readiness"]["jupyter"] == outputs["readiness"]["jupyter"]["url"]
    (job,) = kube.get("jobs", NAMESPACE)
    assert job["metadata"]["name"] == "cli-cifar-worker"


def test_second_up_changes_nothing_and_refresh_reads_live_status(cli: Cli) -> None:
    for stack in (PLATFORM, TENANT, STACK):
        cli("up", "--stack", stack, "--yes", "--skip-preview", "--expect-no-changes")
        cli("preview", "--stack", stack, "--expect-no-changes")
    refreshed = cli("refresh", "--stack", STACK, "--yes")
    assert "unchanged" in refreshed.stdout, refreshed.stdout
    # Readiness is recomputed from live status by `up --refresh` (what `make up` runs).
    cli("up", "--stack", STACK, "--yes", "--skip-preview", "--refresh")
    assert cli.outputs(STACK)["ready"] is True


def test_commands_write_no_automatic_log_unless_pulumi_has_its_logs_directory(cli: Cli, tmp_path: Path) -> None:
    """Pulumi logs every command under $PULUMI_HOME/logs when it can make that directory; the
    toolchain's home has a file there (hack/env.sh), so an `up` of the experiment writes none
    (docs/benchmarks.md "Fixed cost": 0.19 s of a no-change `up`). The same command in a home with the directory
    (how the benches run revisions from before) writes one: the file is what turns them off."""
    home = Path(os.environ["PULUMI_HOME"])
    logs = sorted(home.rglob("*.log"))
    cli("up", "--stack", STACK, "--yes", "--skip-preview", "--expect-no-changes")
    assert (home / "logs").is_file() and sorted(home.rglob("*.log")) == logs

    logged = toolenv.with_automatic_logs(os.environ, tmp_path / "pulumi-home")
    cli("up", "--stack", STACK, "--yes", "--skip-preview", "--expect-no-changes", env=logged)
    assert list((tmp_path / "pulumi-home" / "logs").glob("*.log"))


def test_a_stack_file_without_its_salt_takes_the_states_and_still_decrypts(cli: Cli, project: Path) -> None:
    """What `make up` relies on: it refreshes the demo stack files from the repository, which carry
    no salt, and `make env` sets PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER. Without it Pulumi would
    make a new salt, and the secrets of the stack's state and file would no longer decrypt."""
    path = stack_file(project, TENANT)
    salted = path.read_text()
    salt = yaml.safe_load(salted)["encryptionsalt"]
    path.write_text("".join(line for line in salted.splitlines(keepends=True) if not line.startswith("encryptionsalt:")))

    exported = cli("stack", "export", "--stack", TENANT, "--show-secrets").stdout
    assert TOKEN in exported  # the state's secret (the token Secret's inputs) still decrypts
    cli("preview", "--stack", TENANT, "--expect-no-changes")  # and the file's `secure:` token
    assert yaml.safe_load(path.read_text())["encryptionsalt"] == salt


def test_a_config_error_is_one_message_naming_the_key_and_the_fix(cli: Cli, kube: Kube) -> None:
    key = "tfk8s:clusters[0].workers.count"
    cli("config", "set", "--stack", STACK, "--path", key, "0")
    try:
        done = cli("up", "--stack", STACK, "--yes", "--skip-preview", check=False)
    finally:
        cli("config", "set", "--stack", STACK, "--path", key, "2")
    text = output_of(done)
    assert done.returncode != 0
    assert f"{key}: must be at least 1, got 0" in text, text
    # One error in the summary (the progress display shows it live too), no traceback, no generic second error.
    diagnostics = text.split("Diagnostics:", 1)[1]
    assert diagnostics.count(key) == 1 and diagnostics.count("error:") == 1, text
    assert "Traceback" not in text, text
    (job,) = kube.get("jobs", NAMESPACE)
    assert job["spec"]["completions"] == 2  # nothing changed


def test_a_program_error_is_one_message_without_a_traceback(cli: Cli, kube: Kube) -> None:
    """A taint someone else put on the User Node: the program refuses, through the engine, in one message."""
    kube.run("taint", "node", "tfk8s-user-node", "dedicated=infra:NoSchedule")
    try:
        done = cli("preview", "--stack", PLATFORM, check=False)
    finally:
        kube.run("taint", "node", "tfk8s-user-node", "dedicated-")
    text = output_of(done)
    assert done.returncode != 0
    assert "tfk8s:platform.userNode.name: node 'tfk8s-user-node' already has taints" in text, text
    assert "Traceback" not in text and "an unhandled exception" not in text, text


@pytest.mark.parametrize(
    ("args", "drop", "extra", "message"),
    [
        (["preview", "--stack", "no-such-stack"], [], {}, "no stack named 'no-such-stack' found"),
        (
            ["preview", "--stack", STACK],
            ["PULUMI_CONFIG_PASSPHRASE", "PULUMI_CONFIG_PASSPHRASE_FILE"],
            {},
            "PULUMI_CONFIG_PASSPHRASE",
        ),
        (["preview", "--stack", STACK], [], {"PULUMI_CONFIG_PASSPHRASE": "wrong"}, "incorrect passphrase"),
        (
            ["preview", "--stack", STACK],
            [],
            {"KUBECONFIG": "/nonexistent/kubeconfig"},
            "kubeconfig /nonexistent/kubeconfig does not exist; start the local cluster",
        ),
    ],
    ids=["missing-stack", "missing-passphrase", "wrong-passphrase", "missing-cluster"],
)
def test_setup_mistakes_get_one_clear_message(
    cli: Cli, args: list[str], drop: list[str], extra: dict[str, str], message: str
) -> None:
    env = {k: v for k, v in os.environ.items() if k not in drop} | extra
    done = cli(*args, check=False, env=env)
    text = output_of(done)
    assert done.returncode != 0
    assert message in text, text
    assert "Traceback" not in text, text


def test_sigint_during_up_stops_the_program_and_leaves_no_process(cli: Cli, project: Path) -> None:
    assert not langhost_processes()
    cli("config", "set", "--stack", STACK, "--path", "tfk8s:clusters[0].workers.count", "3")
    up = subprocess.Popen(
        ["pulumi", "up", "--stack", STACK, "--yes", "--skip-preview", "--non-interactive", "--color", "never"],
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while not any("run_program.py" in p for p in langhost_processes()):
        assert up.poll() is None and time.monotonic() < deadline, "the program never started"
        time.sleep(0.05)
    up.send_signal(signal.SIGINT)  # what ^C in the terminal sends to the CLI
    out, _ = up.communicate(timeout=120)
    leftovers, _ = toolenv.langhost_left(os.environ["PULUMI_BACKEND_URL"], within=5)
    assert not leftovers, f"{leftovers}\n{out}"
    # The stack is usable at once: no pending operations to clear, the next up finishes the change.
    cli("up", "--stack", STACK, "--yes", "--skip-preview")
    assert cli.outputs(STACK)["ready"] is True


def test_destroy_and_stack_rm_leave_nothing(cli: Cli, kube: Kube, project: Path) -> None:
    cli("destroy", "--stack", STACK, "--yes")
    assert not kube.get("jobs", NAMESPACE) and cli.outputs(TENANT)["ready"] is True  # the tenant is untouched
    cli("destroy", "--stack", TENANT, "--yes")
    cli("destroy", "--stack", PLATFORM, "--yes")
    namespaces = {n["metadata"]["name"]: n["status"]["phase"] for n in kube.get("namespaces")}
    assert namespaces.get(NAMESPACE) in (None, "Terminating")  # keepOnDestroy: false
    assert not [v for v in kube.get("pv") if v["spec"].get("claimRef", {}).get("namespace") == NAMESPACE]
    assert "tfk8s-cli" not in {c["metadata"]["name"] for c in kube.get("storageclasses")}
    for stack in (STACK, TENANT, PLATFORM):
        cli("stack", "rm", stack, "--yes")
        assert not stack_file(project, stack).exists()
