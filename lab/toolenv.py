"""The workshop's helpers, shared by the e2e tests and the benchmarks (not by anything a user
runs): the environment `hack/env.sh` (`make env`) prints (the shell script stays the one source;
this runs it and parses its `export`s), a throwaway local cluster, the checks on tfk8s's language
host processes, a language host as of another revision, a free port and a wait for a server on
it. The project copy and the shared salt are the product's (hack/project.py, which `make up`
runs); they are re-exported here for the tests.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import shlex
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "hack") not in sys.path:  # hack/project.py, wherever this is imported from
    sys.path.append(str(ROOT / "hack"))

from project import project_copy as project_copy  # noqa: E402
from project import share_salt as share_salt  # noqa: E402

CACHE = Path(os.environ.get("TFK8S_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tfk8s")
BIN = CACHE / "bin"
KUBECTL = str(BIN / "kubectl")


def build(name: str) -> None:
    """One of hack/tools.sh's tools or groups (`cyclonus`, `yaml-host`, `node`, ...), built if it is
    not there yet. `make test` builds the tests' tools in the background while the tests run
    (lab/suite.py): a test that asks for one being built waits for that build, under its lock, and
    one that asks first builds it itself, so no test depends on the order of the two."""
    subprocess.run([str(ROOT / "hack" / "tools.sh"), name], check=True, stdout=subprocess.DEVNULL)


def tool(name: str) -> str:
    """The path of one of hack/tools.sh's tools, built first if it is not there yet (`build`)."""
    build(name)
    return str(BIN / name)


def pinned(name: str) -> str:
    """A version hack/versions.sh pins (`PULUMI_VERSION`, `K8S_PROVIDER_VERSION`, ...)."""
    for line in (ROOT / "hack" / "versions.sh").read_text().splitlines():
        if line.startswith(f"{name}="):
            return line.split("=", 1)[1].strip()
    raise KeyError(f"hack/versions.sh pins no {name}")


def program_project(work: Path, name: str, program: str) -> Path:
    """`program` as the `__main__.py` of a project of its own in `work` (a benchmark's floor), with
    tfk8s's runtime options and virtualenv, and a `stacks/` folder for its stack files."""
    (work / "stacks").mkdir(parents=True)
    project = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())
    project.update({"name": name, "main": "__main__.py"})
    project.pop("config", None)
    project["runtime"]["options"]["virtualenv"] = str(ROOT / ".venv")
    (work / "Pulumi.yaml").write_text(yaml.safe_dump(project))
    (work / "__main__.py").write_text(program)
    return work


def exported(
    overrides: dict[str, str] | None = None, *, tree: Path = ROOT, base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The variables hack/env.sh of `tree` (this checkout, or another revision's) exports, as a
    user's `eval "$(make env)"` would get them, run in `base` (default: this process's
    environment) with `overrides`."""
    env = {**(os.environ if base is None else base), **(overrides or {})}
    printed = subprocess.run([str(tree / "hack" / "env.sh")], check=True, capture_output=True, text=True, env=env).stdout
    result = {}
    for line in printed.splitlines():
        word, assignment = shlex.split(line)
        if word != "export":
            raise ValueError(f"hack/env.sh printed {line!r}, not an export")
        key, value = assignment.split("=", 1)
        result[key] = value
    return result


def cli_env(state: Path, **extra: str) -> dict[str, str]:
    """This process's environment for the toolchain's `pulumi` with a file backend of its own in
    `state` (made here) and a passphrase of its own: no update check, no plugin download (get.pulumi.com
    is out of reach), plus `extra`. What the language host's CLI-judged tests run commands in."""
    state.mkdir(parents=True, exist_ok=True)
    return {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
        "PULUMI_HOME": str(CACHE / "pulumi-home"),
        "PULUMI_BACKEND_URL": f"file://{state}",
        "PULUMI_CONFIG_PASSPHRASE": secrets.token_urlsafe(16),
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        **extra,
    }


def free_port() -> int:
    """A TCP port of loopback nobody listens on now (the OS's pick), for a server a test starts."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(server: subprocess.Popen[bytes], port: int, what: str, timeout: float = 30) -> None:
    """Until `server` accepts connections on loopback's `port`; RuntimeError naming `what` if it
    exits or `timeout` seconds pass first."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not listen on 127.0.0.1:{port}") from None
            time.sleep(0.1)


def linked_venv(venv: Path) -> Path:
    """A virtualenv at `venv` whose site-packages lead to this interpreter's (a `.pth` path entry):
    what this interpreter has installed, its pip among them, is installed there, so a `pip install
    -r` of the project's requirements finds everything satisfied and asks no index. Returns its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(purelib, "tfk8s-linked.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


@contextlib.contextmanager
def throwaway_cluster(name: str, kube: str | None = None, *, queueing: bool = False, real_node: bool = False) -> Iterator[Path]:
    """A kwok cluster of its own (hack/cluster.sh start [--kube X] [--real-node] [--queueing]: with
    this machine's real node, with Kueue and JobSet), deleted afterwards whatever happens (its real
    node with it); yields its kubeconfig."""
    env = {**os.environ, "TFK8S_CLUSTER_NAME": name}
    script = str(ROOT / "hack" / "cluster.sh")
    flags = [*(["--kube", kube] if kube else []), *(["--real-node"] if real_node else []), *(["--queueing"] if queueing else [])]
    # `start` reuses a running cluster of the name (what `make up` wants); one left running by a
    # session killed before its clean-up would hand this one its objects, so it goes first.
    subprocess.run([script, "stop"], check=False, env=env)
    try:  # a start that fails half way (Kueue not ready) leaves a cluster to stop too
        subprocess.run([script, "start", *flags], check=True, env=env)
        found = subprocess.run([script, "kubeconfig"], check=True, env=env, capture_output=True, text=True)
        yield Path(found.stdout.strip())
    finally:
        subprocess.run([script, "stop"], check=False, env=env)


@contextlib.contextmanager
def no_cluster_created() -> Iterator[None]:
    """Holds hack/cluster.sh's creation lock: no local cluster is created meanwhile. kwokctl gives
    a new cluster's components the first ports down from 32767 that nothing listens on, so a test
    that stops one of its cluster's components for a while (its API server) holds this until the
    component is back, or another test's cluster takes the port and one of the two cannot bind."""
    locks = CACHE / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    with (locks / "kwokctl-create.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


# What tfk8s's language host runs as (hack/langhost): its executable, and the program runner it starts.
LANGHOST_COMMANDS = ("pulumi-language-python", "langhost/run_program.py")


def langhost_processes(backend_url: str, plugins: Sequence[Path] = ()) -> list[str]:
    """`<pid>: <command line>` of every live process of tfk8s's language host, or of a program it
    started, or of a source-based plugin it runs from one of the directories `plugins` (`python -u
    <dir>`), that works on the state backend `backend_url` (its environment's PULUMI_BACKEND_URL):
    the caller's own, never another run's on the machine. Also a CLI's fork that its CLI left
    before the fork's exec (a CLI that dies while it starts a plugin): it becomes the plugin a
    moment later, so a check that looked only for the host's name would pass at once and find the
    host alive the next instant (CI did, on a loaded machine)."""
    ours = f"PULUMI_BACKEND_URL={backend_url}".encode()
    commands = (*LANGHOST_COMMANDS, *(str(plugin) for plugin in plugins))
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            environ = (proc / "environ").read_bytes().split(b"\0")
            parent = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ours not in environ:
            continue
        line = " ".join(a.decode(errors="replace") for a in argv if a)
        if any(command in line for command in commands):
            found.append(f"{proc.name}: {line}")
        elif parent == 1 and Path(argv[0].decode(errors="replace")).name == "pulumi":
            # An orphan with the CLI's own command line: the CLI's fork before its exec (a CLI
            # run by a caller has that caller as its parent, never pid 1).
            found.append(f"{proc.name}: {line} (a fork of a CLI that has ended, before its exec)")
    return found


def langhost_left(backend_url: str, within: float) -> tuple[list[str], float]:
    """What of tfk8s's language host is still alive on `backend_url` once none has been seen for
    a while (or `within` seconds have passed), and the seconds that took. A single look can miss a
    process in the middle of its exec: its command line and environment read empty for that
    moment, so two looks 50 ms apart must both find none."""
    started = time.monotonic()
    quiet_since = None
    while True:
        found = langhost_processes(backend_url)
        now = time.monotonic()
        if found:
            quiet_since = None
        elif quiet_since is None:
            quiet_since = now
        elif now - quiet_since >= 0.05:
            return [], quiet_since - started
        if now - started >= within:
            return found, now - started
        time.sleep(0.01)


def language_host(revision: str) -> Path:
    """A directory with a `pulumi-language-python` that is the language host as of `revision`, built
    as that revision's hack/tools.sh built it: a Go host (hack/langhost/go.mod) with `go build`, a
    Python host (until 2026-11-26) as a wrapper running its host.py in a virtualenv with the
    `pulumi` wheel of the toolchain's version. First on PATH, it is the host the CLI runs: the CLI
    looks on PATH before its own directory (checked: a CLI hard-linked into a directory beside
    another host still ran the toolchain's, on PATH)."""
    directory = Path(tempfile.mkdtemp(prefix=f"tfk8s-host-{revision}-"))
    archive = subprocess.run(["git", "archive", revision, "hack/langhost/"], cwd=ROOT, check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(directory)], input=archive.stdout, check=True)
    sources = directory / "hack" / "langhost"
    (directory / "langhost").mkdir()
    shutil.copy(sources / "run_program.py", directory / "langhost" / "run_program.py")
    host = directory / "pulumi-language-python"
    if (sources / "go.mod").exists():
        env = {**os.environ, "GOFLAGS": "-mod=readonly", "CGO_ENABLED": "0"}
        # hack/tools.sh's compiler flags today, so that the packages its build compiled are reused.
        build = ["go", "build", "-trimpath", "-gcflags=all=-dwarf=false", "-o", str(host), "."]
        subprocess.run(build, cwd=sources, check=True, env=env)
        return directory
    for source in sources.glob("*.py"):
        shutil.copy(source, directory / "langhost" / source.name)
    venv = directory / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    wheel = f"pulumi=={pinned('PULUMI_VERSION')}"
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", wheel], check=True)
    host.write_text(f'#!/bin/sh\nexec "{venv / "bin" / "python"}" "{directory / "langhost" / "host.py"}" "$@"\n')
    host.chmod(0o755)
    return directory


def turns_off_pulumi_logs(tree: Path) -> bool:
    """Whether hack/env.sh of `tree` (this checkout, or another revision's) runs Pulumi without its
    automatic logs, as this one does (see there)."""
    return "TFK8S_PULUMI_LOGS" in (tree / "hack" / "env.sh").read_text()


def with_automatic_logs(env: Mapping[str, str], into: Path) -> dict[str, str]:
    """`env` with a PULUMI_HOME (`into`) where Pulumi writes its automatic logs, as it does wherever
    hack/env.sh has not turned them off: the plugins of `env`'s home (linked), a logs directory of
    its own. For benchmarks that run revisions from before env.sh did, or that measure what the
    logs cost, and the test that the logs directory is what turns them on."""
    (into / "logs").mkdir(parents=True, exist_ok=True)
    if not (into / "plugins").exists():
        (into / "plugins").symlink_to(Path(env["PULUMI_HOME"]) / "plugins")
    return {**env, "PULUMI_HOME": str(into)}


def time_as_a_user() -> None:
    """Have the commands a benchmark times run as in a user's shell, where Python caches bytecode.

    A PYTHONDONTWRITEBYTECODE inherited from the machine (this one's environment sets it) made every
    timed `pulumi` command compile tfk8s's modules from source, 0.05 s of each no-change `up`,
    while the SDK's and pydantic's came precompiled from the virtualenv: a cost no user pays."""
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
