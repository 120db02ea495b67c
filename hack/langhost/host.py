"""tfk8s's Pulumi Python language host: `pulumi-language-python`, written from the public plugin contract.

The `pulumi` CLI starts this executable (found next to the CLI or on PATH) with the engine's
address as its last argument, reads the port it prints on stdout, and calls the
`pulumirpc.LanguageRuntime` service. Why our own: the official host is not served by the Go
module proxy this project builds its toolchain from; users with the official installers keep the
official host (nothing here is declared in Pulumi.yaml).

Design: the host runs in its own small virtualenv (grpc and the `pulumi` wheel's servicer
classes); each `Run` starts the program in a child process with the *project's* interpreter (the
`virtualenv` runtime option, as the official host does), through `run_program.py`. A child keeps
the program's imports, event loop and crashes out of the host, makes `Cancel` a signal to one
process, and lets the host serve any project, whatever its virtualenv.

Exit code 32 from the child means "bail": the program already reported its error through the
engine, so the CLI shows that message alone (no second, generic error).
"""

from __future__ import annotations

import gc
import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

# The CLI starts this host twice per `preview` or `up` and waits for its port each time. The
# imports below (grpc, protobuf, the generated modules) make ~37,000 objects and no garbage, and
# the cyclic collector scanned them again and again while they were made: ~10 ms of each start.
# Collection is off until they are done, then they are frozen (never scanned again) and it resumes.
gc.disable()
import grpc  # noqa: E402
from google.protobuf import empty_pb2  # noqa: E402
from google.protobuf.json_format import MessageToDict  # noqa: E402

import toolchain  # noqa: E402


def _import_grpc_modules() -> tuple[Any, Any, Any]:
    """The `pulumi` wheel's generated LanguageRuntime modules, without running the SDK's package
    __init__s (they import the whole SDK: 0.21 s against 0.11 s per host start, and the CLI starts
    the host twice per command). The generated modules import each other relatively, so empty
    package objects over the real directories are all they need; nothing else in this process
    uses the SDK."""
    import importlib.util
    import types

    spec = importlib.util.find_spec("pulumi")
    assert spec is not None and spec.submodule_search_locations, "the pulumi wheel is not installed"
    root = Path(list(spec.submodule_search_locations)[0])
    for name, path in (
        ("pulumi", root),
        ("pulumi.runtime", root / "runtime"),
        ("pulumi.runtime.proto", root / "runtime" / "proto"),
    ):
        package = types.ModuleType(name)
        package.__path__ = [str(path)]
        sys.modules.setdefault(name, package)
    from pulumi.runtime.proto import language_pb2, language_pb2_grpc, plugin_pb2

    return language_pb2, language_pb2_grpc, plugin_pb2


language_pb2, language_pb2_grpc, plugin_pb2 = _import_grpc_modules()
gc.freeze()
gc.enable()

HERE = Path(__file__).resolve().parent
RUN_PROGRAM = HERE / "run_program.py"
BAIL_EXIT_CODE = 32
VERSION = "0.1.0+tfk8s"
# How long a cancelled program gets to stop after SIGINT before it is killed.
CANCEL_GRACE_SECONDS = 5.0


def program_info(info: Any, pwd: str) -> toolchain.Program:
    """The project facts the CLI sends with most requests (ProgramInfo), with the legacy fields as fallback."""
    root = info.root_directory or pwd
    options = MessageToDict(info.options) if info.HasField("options") else {}
    return toolchain.Program(
        root=Path(root),
        directory=Path(info.program_directory or pwd),
        entry_point=info.entry_point or ".",
        options=options,
    )


def child_command(request: Any, engine_address: str, python: Path) -> list[str]:
    """argv of the program runner for one RunRequest."""
    argv = [
        str(python),
        str(RUN_PROGRAM),
        "--monitor",
        request.monitor_address,
        "--engine",
        engine_address,
        "--project",
        request.project,
        "--stack",
        request.stack,
        "--pwd",
        request.pwd,
        "--parallel",
        str(request.parallel),
        "--root-directory",
        request.info.root_directory or request.pwd,
    ]
    if request.organization:
        argv += ["--organization", request.organization]
    if request.dryRun:
        argv.append("--dry-run")
    return [*argv, request.info.entry_point or request.program or ".", "--", *request.args]


def child_env(request: Any, program: toolchain.Program) -> dict[str, str]:
    """The program's environment: ours, its config (as the official host passes it), its virtualenv first on PATH."""
    env = dict(os.environ)
    env["PULUMI_CONFIG"] = json.dumps(dict(request.config))
    env["PULUMI_CONFIG_SECRET_KEYS"] = json.dumps(list(request.configSecretKeys))
    env["PYTHONUNBUFFERED"] = "1"
    venv = program.virtualenv()
    if venv is not None:
        env["VIRTUAL_ENV"] = str(venv)
        env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env.pop("PYTHONHOME", None)
    return env


def interpreter_version(python: Path) -> str:
    """`3.11.7`, as `platform.python_version()` in that interpreter says it. `--version` is answered
    before the interpreter imports `site` or anything else: 2 ms, against 24 ms for running the
    `platform` module in the project's virtualenv. The CLI asks (About) before every `preview` and
    `up`, ahead of the program."""
    answer = subprocess.run([str(python), "--version"], capture_output=True, text=True)
    words = (answer.stdout or answer.stderr).split()  # "Python 3.11.7"
    return words[1] if len(words) == 2 and words[0] == "Python" else ""


class LanguageHost(language_pb2_grpc.LanguageRuntimeServicer):  # type: ignore[name-defined]
    def __init__(self, engine_address: str) -> None:
        self.engine_address = engine_address
        self._children: set[subprocess.Popen[bytes]] = set()
        self._lock = threading.Lock()

    # -- identity ------------------------------------------------------------------------------
    def Handshake(self, request: Any, context: Any) -> Any:
        if request.engine_address:
            self.engine_address = request.engine_address
        return language_pb2.LanguageHandshakeResponse()

    def GetPluginInfo(self, request: Any, context: Any) -> Any:
        return plugin_pb2.PluginInfo(version=VERSION)

    def About(self, request: Any, context: Any) -> Any:
        program = program_info(request.info, os.getcwd())
        python = program.python()
        return language_pb2.AboutResponse(executable=str(python), version=interpreter_version(python), metadata={"host": VERSION})

    def GetProgramDependencies(self, request: Any, context: Any) -> Any:
        """The distributions installed in the project's interpreter (`pulumi about` lists them)."""
        program = program_info(request.info, request.pwd)
        listed = subprocess.run(
            [str(program.python()), "-m", "pip", "list", "--format", "json", "--disable-pip-version-check"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return language_pb2.GetProgramDependenciesResponse(
            dependencies=[language_pb2.DependencyInfo(name=d["name"], version=d["version"]) for d in json.loads(listed)]
        )

    # -- plugins the program needs -------------------------------------------------------------
    def GetRequiredPackages(self, request: Any, context: Any) -> Any:
        program = program_info(request.info, os.getcwd())
        return language_pb2.GetRequiredPackagesResponse(
            packages=[
                plugin_pb2.PackageDependency(name=p.name, kind=p.kind, version=p.version, server=p.server)
                for p in program.resource_plugins()
            ]
        )

    def GetRequiredPlugins(self, request: Any, context: Any) -> Any:
        program = program_info(request.info, request.pwd)
        return language_pb2.GetRequiredPluginsResponse(
            plugins=[
                plugin_pb2.PluginDependency(name=p.name, kind=p.kind, version=p.version, server=p.server)
                for p in program.resource_plugins()
            ]
        )

    # -- dependencies (`pulumi install`) -------------------------------------------------------
    def InstallDependencies(self, request: Any, context: Any) -> Iterator[Any]:
        program = program_info(request.info, request.directory)
        try:
            commands = program.install_commands()
        except toolchain.ToolchainError as error:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(error))
        for command in commands:
            code = None
            for stream, data in self._output_of(command, cwd=str(program.root), env=dict(os.environ)):
                if stream == "exit":
                    code = int(data)
                elif stream == "stdout":
                    yield language_pb2.InstallDependenciesResponse(stdout=data)
                else:
                    yield language_pb2.InstallDependenciesResponse(stderr=data)
            if code != 0:
                context.abort(grpc.StatusCode.UNKNOWN, f"{' '.join(command)} exited with code {code}")

    # -- running the program -------------------------------------------------------------------
    def Run(self, request: Any, context: Any) -> Any:
        program = program_info(request.info, request.pwd)
        try:
            python = program.python()
        except toolchain.ToolchainError as error:
            return language_pb2.RunResponse(error=str(error))
        child = subprocess.Popen(
            child_command(request, self.engine_address, python),
            cwd=request.pwd or str(program.root),
            env=child_env(request, program),
            stdin=subprocess.DEVNULL,
        )
        with self._lock:
            self._children.add(child)
        try:
            code = child.wait()
        finally:
            with self._lock:
                self._children.discard(child)
        if code == 0:
            return language_pb2.RunResponse()
        if code == BAIL_EXIT_CODE:
            return language_pb2.RunResponse(bail=True)
        if code < 0:
            return language_pb2.RunResponse(error=f"the program was stopped by signal {-code}")
        return language_pb2.RunResponse(error=f"the program exited with code {code}")

    def Cancel(self, request: Any, context: Any) -> Any:
        self.stop_children()
        return empty_pb2.Empty()

    def stop_children(self) -> None:
        """SIGINT to every running program, SIGKILL to whatever is left after the grace period."""
        with self._lock:
            children = list(self._children)
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGINT)
        for child in children:
            try:
                child.wait(timeout=CANCEL_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()

    # -- policy packs --------------------------------------------------------------------------
    def RunPlugin(self, request: Any, context: Any) -> Iterator[Any]:
        """Start a Python policy pack (`python -u -m pulumi.policy <args> <pack dir>`) and stream its output."""
        program = program_info(request.info, request.pwd)
        try:
            python = program.python()
        except toolchain.ToolchainError as error:
            yield language_pb2.RunPluginResponse(stderr=f"{error}\n".encode())
            yield language_pb2.RunPluginResponse(exitcode=1)
            return
        extra = dict(item.split("=", 1) for item in request.env if "=" in item)
        env = {**os.environ, **extra, "PYTHONUNBUFFERED": "1"}
        command = [str(python), "-u", "-m", "pulumi.policy", *request.args, request.program or str(program.directory)]
        for stream, data in self._output_of(command, cwd=request.pwd or str(program.directory), env=env):
            if stream == "exit":
                yield language_pb2.RunPluginResponse(exitcode=int(data))
            elif stream == "stdout":
                yield language_pb2.RunPluginResponse(stdout=data)
            else:
                yield language_pb2.RunPluginResponse(stderr=data)

    def _output_of(self, command: list[str], *, cwd: str, env: dict[str, str]) -> Iterator[tuple[str, bytes]]:
        """Run `command`: ("stdout"|"stderr", bytes) as the output comes, then ("exit", b"<code>")."""
        child = subprocess.Popen(
            command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        with self._lock:
            self._children.add(child)
        chunks: queue.Queue[tuple[str, bytes]] = queue.Queue()

        def pump(name: str, stream: Any) -> None:
            for chunk in iter(lambda: stream.read1(65536), b""):
                chunks.put((name, chunk))
            chunks.put((name, b""))  # end of this stream

        for name, stream in (("stdout", child.stdout), ("stderr", child.stderr)):
            threading.Thread(target=pump, args=(name, stream), daemon=True).start()
        try:
            open_streams = 2
            while open_streams:
                name, chunk = chunks.get()
                if chunk:
                    yield name, chunk
                else:
                    open_streams -= 1
            yield "exit", str(child.wait()).encode()
        finally:
            if child.poll() is None:  # the CLI went away mid-stream
                child.kill()
                child.wait()
            with self._lock:
                self._children.discard(child)


def engine_address_from(argv: list[str]) -> str:
    """The CLI passes flags (`-v=9`, `--tracing X`, `--logtostderr`) first and the engine address last."""
    return argv[-1] if argv and not argv[-1].startswith("-") else ""


def serve(argv: list[str]) -> int:
    host = LanguageHost(engine_address_from(argv))
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=8),
        options=[("grpc.max_receive_message_length", 400 * 1024 * 1024)],
    )
    language_pb2_grpc.add_LanguageRuntimeServicer_to_server(host, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()

    stopped = threading.Event()

    def stop(signum: int, frame: Any) -> None:
        # The CLI stops its plugins with SIGINT when it is done: that is a normal end, not an error.
        stopped.set()

    # Before the port is printed: a CLI may stop the host as soon as it has read it (a SIGINT
    # before this was a KeyboardInterrupt and exit status -2: tests/langhost caught it in CI).
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    print(port, flush=True)
    # A CLI that dies without stopping its plugins (SIGKILL, a crash) leaves this process
    # reparented, with its programs, for good: leave too when the parent is no longer the CLI.
    cli = os.getppid()
    while not stopped.wait(1.0) and os.getppid() == cli:
        pass
    host.stop_children()
    server.stop(grace=0)
    return 0


if __name__ == "__main__":
    status = serve(sys.argv[1:])
    # The CLI waits for each plugin it stops to exit, and it starts and stops this host twice per
    # `preview` or `up` (About, then the run). The interpreter's teardown of grpc and the other
    # modules was 23 of the 27 ms from the CLI's SIGINT to this process's end; nothing is left to
    # clean up once the server has stopped and the programs are gone.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
