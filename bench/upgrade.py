"""A fleet's upgrade: N tenants of the previous release moved to this tree by the GitOps apply,
beside a no-change apply of the same fleet (issue 55, point 5; goal: an upgrade costs a tenant no
more than 1.2x its no-change `up`).

For each N in --sizes, on a throwaway kwok cluster of its own (`tfk8s-bench-upgrade-<N>`, started
and deleted here, with its file backend), a team repository whose history is a team's:

  1. the previous release's tree (the commit releases.toml records, `git archive`), platform-dev's
     stack file and the team file, applied by that release's own `hack/gitops.sh` (not timed);
  2. N tenant stack files (tenant_scale.py's tenant), applied by the same release, --parallel P
     (not timed);
  3. this tree in place of the previous release's (every tracked file but the stack files): a
     change of the program, so this tree's `hack/gitops.sh apply --parallel P` updates every stack,
     the platform first: **the upgrade**, timed;
  4. a comment added to the program: the same apply again, every stack with nothing to change:
     **the no-change apply**, timed, once the machine is quiet (tenant_scale.py's `settle`) as before 3.

Both timed applies run the same plan (the platform, then N tenants) with the same --parallel, the
policy pack off (`--policy-pack none`: the previous release's pack judges nothing here), and count
only if the command exits 0 and every stack's summary row says `ready` yes. The table gives each
one's wall seconds and seconds per tenant and their ratio.

    make tools && .venv/bin/python bench/upgrade.py [--sizes 10,100] [--parallel 2]
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "lab")]

from fleet import ready_count  # noqa: E402
from tenant_scale import PLATFORM, make_room_on_user_node, settle, tenant_config  # noqa: E402
from tfk8s.release import VERSION  # noqa: E402

import releases  # noqa: E402
import toolenv  # noqa: E402

CLUSTER = "tfk8s-bench-upgrade"
NO_COMMIT = "0" * 40
GOAL = 1.2  # an upgrade's cost per tenant over a no-change `up`'s
Tree = dict[str, tuple[bytes, int]]  # a release's files: path -> (content, mode)


@dataclass(frozen=True, kw_only=True)
class Apply:
    seconds: float
    returncode: int
    ready: int
    stacks: int

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and self.ready == self.stacks


class Team:
    """The team's repository: a git history whose tree is one release's, then another's."""

    def __init__(self, repo: Path, venv: Path, summaries: Path) -> None:
        self.repo, self.venv, self.summaries = repo, venv, summaries
        repo.mkdir(parents=True)
        self.git("init", "-q", "-b", "main")
        self.git("config", "user.email", "platform@example.com")
        self.git("config", "user.name", "platform team")

    def git(self, *args: str) -> str:
        return subprocess.run(["git", "-C", str(self.repo), *args], check=True, capture_output=True, text=True).stdout.strip()

    def take_tree(self, files: Tree) -> None:
        """The repository's files, the stack files aside, become `files`."""
        for path in self.git("ls-files", "-z").split("\0"):
            if path and not path.startswith("stacks/"):
                (self.repo / path).unlink()
        for path, (content, mode) in files.items():
            if path.startswith("stacks/"):
                continue
            target = self.repo / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
            target.chmod(mode)
        venv = self.repo / ".venv"
        if not venv.exists():
            venv.symlink_to(self.venv)

    def write_stack(self, name: str, config: dict[str, Any]) -> None:
        (self.repo / "stacks").mkdir(exist_ok=True)
        (self.repo / "stacks" / f"Pulumi.{name}.yaml").write_text(yaml.safe_dump({"config": config}, sort_keys=False))

    def declare(self, platforms: list[str], tenants: list[str]) -> None:
        (self.repo / "stacks").mkdir(exist_ok=True)
        (self.repo / "stacks" / "team.yaml").write_text(yaml.safe_dump({"platforms": platforms, "tenants": tenants}))

    def commit(self, message: str) -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message)
        return self.git("rev-parse", "HEAD")

    def apply(self, label: str, base: str, head: str, parallel: int, stacks: int) -> Apply:
        """The checkout's own `hack/gitops.sh apply` of base..head (its release's pipeline)."""
        summary = self.summaries / f"{label}.md"
        argv = [str(self.repo / "hack" / "gitops.sh"), "apply", "--base", base, "--head", head]
        argv += ["--parallel", str(parallel), "--policy-pack", "none", "--summary", str(summary)]
        started = time.perf_counter()
        done = subprocess.run(argv, cwd=self.repo, capture_output=True, text=True)
        seconds = time.perf_counter() - started
        text = summary.read_text() if summary.exists() else ""
        if done.returncode != 0:
            print(f"{label}: exited {done.returncode}\n{(done.stdout + done.stderr)[-4000:]}", file=sys.stderr, flush=True)
        return Apply(seconds=seconds, returncode=done.returncode, ready=ready_count(text), stacks=stacks)


def files_of(root: Path, paths: list[str]) -> Tree:
    return {p: ((root / p).read_bytes(), (root / p).stat().st_mode & 0o777) for p in paths if (root / p).is_file()}


def archived(commit: str) -> Tree:
    """Every file of `commit`'s tree (git archive), with its mode."""
    scratch = Path(tempfile.mkdtemp(prefix="tfk8s-bench-upgrade-tree-"))
    try:
        tar = subprocess.run(["git", "archive", commit], cwd=ROOT, check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(scratch)], input=tar, check=True)
        return files_of(scratch, [str(p.relative_to(scratch)) for p in scratch.rglob("*")])
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def this_tree() -> Tree:
    """This checkout's tracked files as they are in the working tree (its changes included)."""
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], check=True, capture_output=True, text=True).stdout
    return files_of(ROOT, [p for p in listed.split("\0") if p])


def one_size(n: int, parallel: int, old: Tree, new: Tree, scratch: Path, settle_limit: float) -> tuple[Apply, Apply]:
    """Steps 1 to 4 of the module for N tenants, on a cluster and backend of their own: the
    upgrade's and the no-change apply's records."""
    os.environ["PULUMI_BACKEND_URL"] = f"file://{scratch / 'state'}"
    (scratch / "state").mkdir()
    with toolenv.throwaway_cluster(f"{CLUSTER}-{n}") as kubeconfig:
        os.environ["KUBECONFIG"] = str(kubeconfig)
        make_room_on_user_node(n)
        return _upgrade(n, parallel, old, new, scratch, settle_limit)


def _upgrade(n: int, parallel: int, old: Tree, new: Tree, scratch: Path, settle_limit: float) -> tuple[Apply, Apply]:
    summaries = scratch / "summaries"
    summaries.mkdir()
    toolenv.linked_venv(scratch / "venv")  # this interpreter's packages; each release's tfk8s from its infra/
    team = Team(scratch / "team", scratch / "venv", summaries)
    platform = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{PLATFORM}.yaml").read_text())["config"]
    tenants = {}
    for i in range(n):
        config, user = tenant_config(i), f"u{n}-{i}"
        config["tfk8s:tenant"] = {**config["tfk8s:tenant"], "name": user, "identities": {"users": [user]}}
        tenants[f"tenant-{user}"] = config

    team.take_tree(old)
    team.write_stack(PLATFORM, platform)
    team.declare([PLATFORM], list(tenants))
    first = team.commit("the previous release, and the team's platform")
    done = team.apply(f"platform-{n}", NO_COMMIT, first, 1, 1)
    if not done.ok:
        raise RuntimeError(f"N={n}: the platform's apply on the previous release failed")
    for name, config in tenants.items():
        team.write_stack(name, config)
    onboarded = team.commit(f"{n} tenants")
    done = team.apply(f"onboard-{n}", first, onboarded, parallel, n)
    if not done.ok:
        raise RuntimeError(f"N={n}: onboarding on the previous release failed ({done.ready}/{n} ready)")
    print(f"N={n}: {n} tenants up on the previous release in {done.seconds:.1f} s (not timed)", flush=True)

    team.take_tree(new)
    upgraded = team.commit("tfk8s: the next release")
    waited, busy = settle(limit=settle_limit)
    print(f"N={n}: settled in {waited:.0f} s ({busy:.0%} busy); upgrading", flush=True)
    upgrade = team.apply(f"upgrade-{n}", onboarded, upgraded, parallel, n + 1)
    program = team.repo / "infra" / "tfk8s" / "__init__.py"
    program.write_text(program.read_text() + "# (a comment: the program changes, nothing it declares does)\n")
    touched = team.commit("a comment in the program")
    waited, busy = settle(limit=settle_limit)
    print(f"N={n}: settled in {waited:.0f} s ({busy:.0%} busy); the no-change apply", flush=True)
    unchanged = team.apply(f"no-change-{n}", upgraded, touched, parallel, n + 1)
    return upgrade, unchanged


def report(rows: list[tuple[int, int, Apply, Apply]], release: str) -> None:
    print(
        f"\nFrom {release} to this tree ({VERSION}): `hack/gitops.sh apply --parallel P --policy-pack none` of every "
        f"stack (the platform, then N tenants); kwok, {os.cpu_count()} cores; one run each"
    )
    print("| N | P | upgrade: s | s per tenant | no-change: s | s per tenant | upgrade / no-change | goal <= 1.2 | ready |")
    print("|---:|---:|---:|---:|---:|---:|---:|---|---|")
    for n, p, upgrade, unchanged in rows:
        ratio = upgrade.seconds / unchanged.seconds
        ready = f"{upgrade.ready}/{upgrade.stacks}, {unchanged.ready}/{unchanged.stacks}"
        print(
            f"| {n} | {p} | {upgrade.seconds:.1f} | {upgrade.seconds / n:.2f} | {unchanged.seconds:.1f} | "
            f"{unchanged.seconds / n:.2f} | {ratio:.2f} | {'yes' if ratio <= GOAL else 'no'} | {ready} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10,100", help="the N tenants of each fleet, comma-separated")
    parser.add_argument("--parallel", type=int, default=2, help="the applies' --parallel")
    parser.add_argument(
        "--settle", type=float, default=300.0, help="seconds at most to wait for a quiet machine before a timed apply"
    )
    args = parser.parse_args()
    sizes = sorted({int(n) for n in args.sizes.split(",")})
    try:
        release = releases.previous()
    except LookupError as missing:
        raise SystemExit(str(missing)) from None
    old, new = archived(release["commit"]), this_tree()
    pins = "hack/versions.sh"  # compared by content: a checkout's modes follow its umask, an archive's git's
    if old.get(pins, (b"", 0))[0] != new.get(pins, (b"", 0))[0]:
        raise SystemExit(f"{release['version']} pins another toolchain (hack/versions.sh): not implemented here")
    toolenv.time_as_a_user()
    for key in [k for k in os.environ if k.startswith(("PULUMI_", "AWS_"))]:
        del os.environ[key]
    os.environ["PULUMI_CONFIG_PASSPHRASE"] = secrets.token_urlsafe(24)
    os.environ.update(toolenv.exported())
    rows = []
    scratch = Path(tempfile.mkdtemp(prefix="tfk8s-bench-upgrade-"))
    try:
        for n in sizes:
            (scratch / str(n)).mkdir()
            upgrade, unchanged = one_size(n, args.parallel, old, new, scratch / str(n), args.settle)
            rows.append((n, args.parallel, upgrade, unchanged))
        report(rows, release["version"])
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    sys.exit(0 if all(u.ok and c.ok for _, _, u, c in rows) else 1)


if __name__ == "__main__":
    main()
