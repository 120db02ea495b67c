"""Runs one Pulumi Python program for tfk8s's language host, in the project's own interpreter.

    python run_program.py --monitor ADDR --engine ADDR --project P --stack S --pwd DIR
        --parallel N --root-directory DIR [--organization O] [--dry-run] ENTRY -- [ARGS...]

Config arrives as the official host passes it: `PULUMI_CONFIG` (a JSON map) and
`PULUMI_CONFIG_SECRET_KEYS` (a JSON list). ENTRY is a file, or a directory holding
`__main__.py` (Pulumi.yaml's `main: infra/` arrives as pwd `<root>/infra` and entry `.`).

Errors: a `pulumi.RunError` is the program's own, already-worded message (tfk8s's own errors
leave its program as RunErrors): it is reported once, without a traceback. Anything else is a
bug and is reported with its traceback. Either way the process exits 32 ("bail": the engine has
the message, the CLI adds no second one). SIGINT (the host's Cancel) stops the program quietly.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import gc
import json
import logging
import os
import queue
import runpy
import signal
import sys
import threading
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

BAIL_EXIT_CODE = 32


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="run_program.py")
    parser.add_argument("--monitor", required=True)
    parser.add_argument("--engine", default="")
    parser.add_argument("--project", required=True)
    parser.add_argument("--stack", required=True)
    parser.add_argument("--pwd", required=True)
    parser.add_argument("--parallel", type=int, default=0)
    parser.add_argument("--root-directory", default="")
    parser.add_argument("--organization", default="")
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("entry")
    parser.add_argument("args", nargs="*")
    return parser.parse_args(argv)


def entry_file(pwd: str, entry: str) -> Path:
    path = Path(pwd) / entry
    return path / "__main__.py" if path.is_dir() else path


def program_traceback(error: BaseException, root: Path) -> str:
    """The traceback from the program's first frame on: the runner's, runpy's and the SDK's frames above it are noise."""
    frames = traceback.extract_tb(error.__traceback__)
    mine = [os.path.isabs(f.filename) and Path(f.filename).resolve().is_relative_to(root.resolve()) for f in frames]
    first = mine.index(True) if True in mine else 0
    lines = ["Traceback (most recent call last):\n", *traceback.format_list(frames[first:])]
    return "".join(lines + traceback.format_exception_only(error))


# How long the program's last debug messages get to reach the engine after the program's end.
DEBUG_LOG_DRAIN_SECONDS = 5.0


class BackgroundDebugLogs:
    """The engine client the SDK logs through, which sends debug messages from a thread of its own.

    The SDK sends a debug message for every step of every resource's registration (5 per
    resource), each a blocking call on the event loop that registers the resources: 70 round
    trips and ~30 ms of an experiment's `up`, whether or not anyone shows them (`pulumi up
    --debug`, `--event-log`). Here the loop only queues them; one sender thread sends them in
    order, and `drain` waits until it has sent every one before the program ends, so none is lost.
    (A gRPC future per message instead still cost the loop 0.3 ms each to create.) Every other
    severity (info, warnings, errors) is sent and waited for as before, so a program's error is
    with the engine before it exits."""

    def __init__(self, stub: Any) -> None:
        from pulumi.runtime.proto import engine_pb2

        self._stub = stub
        self._debug = engine_pb2.DEBUG
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._unsent = 0
        self._all_sent = threading.Condition(self._lock)
        self._sender: threading.Thread | None = None

    def Log(self, request: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N802 -- the gRPC stub's method name
        if request.severity != self._debug:
            return self._stub.Log(request, *args, **kwargs)
        with self._lock:
            self._unsent += 1
            if self._sender is None:
                self._sender = threading.Thread(target=self._send, name="debug-logs", daemon=True)
                self._sender.start()
        self._queue.put((request, args, kwargs))
        return None  # the SDK does not read the (empty) answer

    def _send(self) -> None:
        while True:
            request, args, kwargs = self._queue.get()
            try:
                self._stub.Log(request, *args, **kwargs)
            except Exception:  # noqa: BLE001 -- the engine is gone: there is no one left to tell
                pass
            finally:
                with self._lock:
                    self._unsent -= 1
                    if not self._unsent:
                        self._all_sent.notify_all()

    def drain(self, timeout: float) -> bool:
        """Wait until every debug message has been sent; False if some were not within `timeout`."""
        with self._lock:
            return self._all_sent.wait_for(lambda: not self._unsent, timeout)

    def __getattr__(self, name: str) -> Any:  # the engine's other calls, unchanged
        return getattr(self._stub, name)


def main(argv: list[str]) -> int:
    options = parse(argv)
    # Imported here so `--help` and argument errors need no SDK. The SDK's import makes ~60,000
    # objects and no garbage, which the cyclic collector scanned again and again while they were
    # made (~15 ms of every `preview` and `up`): collection is off until it is done, then what it
    # made is frozen (never scanned again), and the program starts with Python's collection as it
    # is, to set its own (tfk8s's: tfk8s.gc_policy).
    gc.disable()
    import grpc
    import pulumi
    from pulumi.runtime import Settings, configure, run_in_stack, set_all_config
    from pulumi.runtime.proto import engine_pb2_grpc

    gc.freeze()
    gc.enable()

    # An unobserved failed task is reported through the engine already; asyncio's own
    # "exception was never retrieved" lines would only repeat it.
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)

    engine = BackgroundDebugLogs(engine_pb2_grpc.EngineStub(grpc.insecure_channel(options.engine))) if options.engine else None
    configure(  # as the SDK's reset_options would, but for the engine client
        Settings(
            project=options.project,
            stack=options.stack,
            monitor=options.monitor,
            engine=engine,
            parallel=options.parallel,
            dry_run=options.dry_run,
            organization=options.organization or "organization",
            root_directory=options.root_directory or options.pwd,
        )
    )
    set_all_config(
        json.loads(os.environ.get("PULUMI_CONFIG") or "{}"), json.loads(os.environ.get("PULUMI_CONFIG_SECRET_KEYS") or "[]")
    )

    program = entry_file(options.pwd, options.entry)
    if not program.exists():
        pulumi.log.error(f"the program's entry point {program} does not exist: check `main` in Pulumi.yaml")
        return BAIL_EXIT_CODE
    sys.argv = [str(program), *options.args]
    sys.path.insert(0, str(program.parent))

    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    loop.set_default_executor(ThreadPoolExecutor(max_workers=max(options.parallel, 1) * 4))

    def run() -> None:
        runpy.run_path(str(program), run_name="__main__")

    try:
        loop.run_until_complete(run_in_stack(run))
    except pulumi.RunError as error:
        pulumi.log.error(str(error))
        return BAIL_EXIT_CODE
    except grpc.RpcError as error:
        if error.code() == grpc.StatusCode.UNAVAILABLE:  # the engine is shutting down (e.g. cancelled)
            return BAIL_EXIT_CODE
        pulumi.log.error(f"RPC error: {error.details()}")
        return BAIL_EXIT_CODE
    except KeyboardInterrupt:
        return BAIL_EXIT_CODE
    except Exception as error:
        pulumi.log.error(
            "the program failed with an unhandled exception:\n"
            + program_traceback(error, Path(options.root_directory or options.pwd))
        )
        return BAIL_EXIT_CODE
    finally:
        pending = asyncio.all_tasks(loop)
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.close()
        if engine is not None:
            engine.drain(DEBUG_LOG_DRAIN_SECONDS)
        sys.stdout.flush()
        sys.stderr.flush()
    return 0


def end_without_teardown(code: list[int]) -> None:
    """The process's last act: registered before anything else, so it runs after every other exit
    handler (atexit is last in, first out) and after the interpreter has joined every thread. What
    it skips is only the interpreter's teardown of its modules and heap, which the CLI would wait
    for: 43 ms with the SDK alone, 64 ms with tfk8s's program (bench/program_exit.py). Output the
    process still holds is written first."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code[0])


if __name__ == "__main__":
    # Cancel is a SIGINT from the host: end without a KeyboardInterrupt traceback.
    signal.signal(signal.SIGINT, lambda signum, frame: os._exit(BAIL_EXIT_CODE))
    exit_code = [1]  # until main returns: what an exception escaping it exits with
    atexit.register(end_without_teardown, exit_code)
    try:
        exit_code[0] = main(sys.argv[1:])
    except SystemExit as stop:  # argparse's --help (0) and usage errors (2): their status, as sys.exit gives it
        exit_code[0] = stop.code if isinstance(stop.code, int) else int(stop.code is not None)
        raise
    sys.exit(exit_code[0])
