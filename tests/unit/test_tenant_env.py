"""hack/env.sh --tenant USER: an experimenter's environment holds nothing of the platform team's
(docs/guide/usage.md "Secrets and the passphrase"): her own state store, passphrase and client certificate."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENV_SH = ROOT / "hack" / "env.sh"
USER = "envtest-carol"  # no demo tenant's name: the test removes its state directory afterwards
MINE = (
    "PULUMI_BACKEND_URL",
    "PULUMI_CONFIG_PASSPHRASE",
    "PULUMI_CONFIG_PASSPHRASE_FILE",
    "KUBECONFIG",
    "TFK8S_CLUSTER_NAME",
    "TFK8S_TENANT",
    "TFK8S_TEAM_PULUMI_BACKEND_URL",
    "TFK8S_TEAM_PULUMI_CONFIG_PASSPHRASE_FILE",
    "TFK8S_TEAM_KUBECONFIG",
)


def printed(cache: Path, *args: str, **mine: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in MINE} | {"TFK8S_CACHE": str(cache)} | mine
    return subprocess.run([str(ENV_SH), *args], capture_output=True, text=True, env=base)


def exports(done: subprocess.CompletedProcess[str]) -> dict[str, str]:
    """What the printed lines export (an `unset NAME` line: NAME mapped to None)."""
    assert done.returncode == 0, done.stderr
    found: dict[str, str] = {}
    for line in done.stdout.splitlines():
        verb, *assignments = shlex.split(line)
        for assignment in assignments:
            name, _, value = assignment.partition("=")
            found[name] = value if verb == "export" else None  # type: ignore[assignment]
    return found


@pytest.fixture
def cache(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path
    shutil.rmtree(ROOT / ".state" / "tenants" / USER, ignore_errors=True)


def test_a_tenants_environment_has_its_own_state_passphrase_and_certificate(cache: Path) -> None:
    team, tenant = exports(printed(cache)), exports(printed(cache, "--tenant", USER))
    assert team["PULUMI_BACKEND_URL"] == f"file://{ROOT}/.state/backend"
    assert tenant["PULUMI_BACKEND_URL"] == f"file://{ROOT}/.state/tenants/{USER}/backend"
    assert (ROOT / ".state" / "tenants" / USER / "backend").is_dir()
    assert team["PULUMI_CONFIG_PASSPHRASE_FILE"] == str(ROOT / ".state" / "passphrase")
    assert tenant["PULUMI_CONFIG_PASSPHRASE_FILE"] == str(ROOT / ".state" / "tenants" / USER / "passphrase")
    ours, theirs = (Path(env["PULUMI_CONFIG_PASSPHRASE_FILE"]).read_text() for env in (team, tenant))
    assert ours != theirs and len(theirs) >= 40
    assert Path(tenant["PULUMI_CONFIG_PASSPHRASE_FILE"]).stat().st_mode & 0o077 == 0  # hers alone
    assert tenant["KUBECONFIG"] == str(cache / "kwok" / f"tfk8s.user-{USER}.kubeconfig")  # hack/cluster.sh user-kubeconfig
    assert exports(printed(cache, "--tenant", USER))["PULUMI_CONFIG_PASSPHRASE_FILE"] == tenant["PULUMI_CONFIG_PASSPHRASE_FILE"]
    assert Path(tenant["PULUMI_CONFIG_PASSPHRASE_FILE"]).read_text() == theirs  # made once, then kept


def test_the_passphrase_outlives_the_cache_and_an_older_cached_one_is_carried_over(cache: Path) -> None:
    """The passphrase opens the state's secrets: it lives beside the state, not in the tool cache that
    `rm -rf ~/.cache` empties; one an earlier version kept in the cache is the one used (copied)."""
    (cache / "passphrases").mkdir()
    (cache / "passphrases" / USER).write_text("an-older-passphrase")
    first = exports(printed(cache, "--tenant", USER))["PULUMI_CONFIG_PASSPHRASE_FILE"]
    assert Path(first).read_text() == "an-older-passphrase"
    assert Path(first).stat().st_mode & 0o077 == 0
    assert (cache / "passphrases" / USER).exists()  # copied: another checkout's state may need it
    shutil.rmtree(cache)
    cache.mkdir()
    again = exports(printed(cache, "--tenant", USER))["PULUMI_CONFIG_PASSPHRASE_FILE"]
    assert again == first and Path(again).read_text() == "an-older-passphrase"


def test_the_teams_environment_keeps_what_is_already_set(cache: Path) -> None:
    env = exports(printed(cache, PULUMI_CONFIG_PASSPHRASE="shared", KUBECONFIG="/k", PULUMI_BACKEND_URL="s3://team"))
    assert "PULUMI_CONFIG_PASSPHRASE_FILE" not in env and env["KUBECONFIG"] == "/k" and env["PULUMI_BACKEND_URL"] == "s3://team"
    assert env["PATH"].split(":")[:2] == [str(cache / "bin"), str(ROOT / ".venv" / "bin")]  # pulumi, then tfk8s


def test_a_tenants_environment_replaces_the_teams_and_says_so(cache: Path) -> None:
    """As usage.md runs it: `eval "$(make env)"`, then `eval "$(hack/env.sh --tenant alice)"` in the same shell."""
    team = {"PULUMI_CONFIG_PASSPHRASE": "shared", "KUBECONFIG": "/admin", "PULUMI_BACKEND_URL": "s3://team"}
    done = printed(cache, "--tenant", USER, **team)
    env = exports(done)
    assert env["PULUMI_CONFIG_PASSPHRASE"] is None
    assert env["PULUMI_CONFIG_PASSPHRASE_FILE"] == str(ROOT / ".state" / "tenants" / USER / "passphrase")
    assert env["KUBECONFIG"] == str(cache / "kwok" / f"tfk8s.user-{USER}.kubeconfig")
    assert env["PULUMI_BACKEND_URL"] == f"file://{ROOT}/.state/tenants/{USER}/backend"
    assert "replaced PULUMI_BACKEND_URL KUBECONFIG PULUMI_CONFIG_PASSPHRASE" in done.stderr
    # Evaluated in a shell that has the team's values, nothing of the team's is left.
    script = f'eval "$({ENV_SH} --tenant {USER})"; echo "$KUBECONFIG|${{PULUMI_CONFIG_PASSPHRASE:-none}}|$PULUMI_BACKEND_URL"'
    base = {k: v for k, v in os.environ.items() if k not in MINE} | {"TFK8S_CACHE": str(cache)} | team
    shell = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=base, check=True)
    assert shell.stdout.strip() == f"{env['KUBECONFIG']}|none|{env['PULUMI_BACKEND_URL']}"


@pytest.mark.parametrize("args", [["--tenant", "../bob"], ["--tenant", "Alice"], ["--tenant", ""], ["--user", "alice"]])
def test_a_bad_tenant_name_or_flag_is_refused(cache: Path, args: list[str]) -> None:
    done = printed(cache, *args)
    assert done.returncode == 2 and done.stdout == "" and ("not a tenant user name" in done.stderr or "usage:" in done.stderr)


def test_make_env_after_a_tenants_goes_back_to_the_teams(cache: Path) -> None:
    """Usage.md's block: `make env`, then alice's, then `make env` again for the platform team's work:
    the team's backend, passphrase file and kubeconfig come back, nothing of alice's stays."""
    team = {"PULUMI_CONFIG_PASSPHRASE_FILE": "/team/pass", "KUBECONFIG": "/admin", "PULUMI_BACKEND_URL": "s3://team"}
    script = (
        f'eval "$({ENV_SH})"; eval "$({ENV_SH} --tenant {USER})"; echo "$KUBECONFIG|$PULUMI_BACKEND_URL"; '
        f'eval "$({ENV_SH})"; echo "$KUBECONFIG|$PULUMI_BACKEND_URL|$PULUMI_CONFIG_PASSPHRASE_FILE|${{TFK8S_TENANT:-none}}"; '
        'env | grep -c "^TFK8S_TEAM_" || true'
    )
    base = {k: v for k, v in os.environ.items() if k not in MINE} | {"TFK8S_CACHE": str(cache)} | team
    shell = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=base, check=True)
    hers, back, left = shell.stdout.splitlines()
    assert hers == f"{cache}/kwok/tfk8s.user-{USER}.kubeconfig|file://{ROOT}/.state/tenants/{USER}/backend"
    assert back == "/admin|s3://team|/team/pass|none" and left == "0"
    assert "back to the team's environment" in shell.stderr
