"""`tfk8s status` and `tfk8s logs`: an experiment's training progress and its tasks' logs, read through
the tenant's TensorBoard gate (docs/guide/status.md); `tfk8s doctor`: whether a cluster can run a
tfk8s platform (tfk8s.cli.doctor, its own exit codes).

    tfk8s status --stack dev [--watch] [--interval 2] [--json]
    tfk8s logs --stack dev --cluster mnist --task worker-0 [--run UID] [--tail 100]
    tfk8s doctor [--stack platform-prod] [--json]
    tfk8s --version

Exit codes: 0; with --watch, 0 once every cluster succeeded and 1 once every cluster finished and
one failed; 2 when the gate, the stack or the token could not be found (the message says which and
the fix); 130 on Ctrl-C.
"""

from __future__ import annotations

import argparse
import codecs
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from tfk8s import tenant_gate
from tfk8s.cli import doctor, gate_client, render
from tfk8s.cli.discovery import Api, Discovery, DiscoveryError, Run, kube_api, pulumi_runner
from tfk8s.release import VERSION


@dataclass
class World:
    """What the commands touch, so tests can stand in for it."""

    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    out: IO[str] = field(default_factory=lambda: sys.stdout)
    err: IO[str] = field(default_factory=lambda: sys.stderr)
    run: Callable[[Path], Run] = pulumi_runner
    connect: Callable[[Mapping[str, str]], Api] = kube_api
    open_url: tenant_gate.Opener = tenant_gate.opener
    sleep: Callable[[float], None] = time.sleep
    cluster: doctor.Connect = doctor.connect
    terminal: bool | None = None  # whether `out` is a terminal (None: ask it)

    def is_terminal(self) -> bool:
        return self.out.isatty() if self.terminal is None else self.terminal


def positive(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text}: must be above 0")
    return value


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="tfk8s", description=__doc__.splitlines()[0])
    top.add_argument("--version", action="version", version=f"tfk8s {VERSION}")
    commands = top.add_subparsers(dest="command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--stack", required=True, help="the experiment stack (its outputs name the experiment, its TensorBoard)")
    common.add_argument("--cwd", type=Path, default=Path.cwd(), help="the Pulumi project's directory (the current one)")
    common.add_argument("--url", help="the TensorBoard URL (else $TFK8S_TENSORBOARD_URL, else the stack's outputs)")
    common.add_argument("--namespace", help="the tenant's namespace (else $TFK8S_NAMESPACE, else the stack's tfk8s:namespace)")
    status = commands.add_parser("status", parents=[common], help="a progress bar per training cluster")
    status.add_argument("--watch", action="store_true", help="refresh until every cluster has finished")
    status.add_argument("--interval", type=positive, default=2.0, help="seconds between refreshes (2)")
    status.add_argument("--json", action="store_true", help="the gate's JSON (one line per refresh with --watch)")
    status.add_argument("--no-tasks", dest="tasks", action="store_false", help="one line per cluster, without its tasks")
    logs = commands.add_parser("logs", parents=[common], help="a task's log, kept on the log volume after its pod is gone")
    logs.add_argument("--cluster", required=True)
    logs.add_argument("--task", required=True, help="<job>-<index>: ps-0, worker-1, chief-0")
    logs.add_argument("--run", help="the run's uid (the latest run by default; `tfk8s status` lists them)")
    logs.add_argument("--tail", type=int, help="the last N lines only (across rotated files)")
    doctor.add_parser(commands)
    return top


def main(argv: Sequence[str] | None = None, world: World | None = None) -> int:
    world = world or World()
    args = parser().parse_args(argv)
    if args.command == "doctor":
        try:
            return doctor.run(args, world.environ, world.out, world.err, world.cluster)
        except KeyboardInterrupt:
            return 130
    discovery = Discovery(
        args.stack,
        environ=world.environ,
        run=world.run(args.cwd),
        connect=lambda: world.connect(world.environ),
        url=args.url,
        namespace=args.namespace,
    )
    try:
        if args.command == "status":
            return status(args, discovery, world)
        return logs(args, discovery, world)
    except (DiscoveryError, tenant_gate.GateError) as error:
        print(f"tfk8s: {error}", file=world.err)
        return 2
    except KeyboardInterrupt:
        return 130


def status(args: argparse.Namespace, discovery: Discovery, world: World) -> int:
    gate = discovery.gate()
    drawn = 0  # lines drawn last time, redrawn in place on a terminal
    while True:
        found = gate_client.status(gate, world.open_url)
        if args.json:
            world.out.write(json.dumps(found, sort_keys=True, indent=None if args.watch else 2) + "\n")
        else:
            lines = render.render(gate.experiment, found, tasks=args.tasks)
            if args.watch and world.is_terminal():
                width = shutil.get_terminal_size().columns
                lines = [line[: width - 1] for line in lines]  # a wrapped line would throw off the redraw
                world.out.write(f"\x1b[{drawn}F\x1b[J" if drawn else "")  # up to the first line drawn, clear below
            elif drawn:
                world.out.write("\n")  # not a terminal: one block per refresh
            world.out.write("\n".join(lines) + "\n")
            drawn = len(lines)
        world.out.flush()
        clusters: dict[str, Any] = (found or {}).get("clusters") or {}
        if not args.watch:
            return 0
        if clusters and all(c.get("finished") for c in clusters.values()):
            return 1 if any(c.get("state") == "failed" for c in clusters.values()) else 0
        world.sleep(args.interval)


def logs(args: argparse.Namespace, discovery: Discovery, world: World) -> int:
    if args.tail is not None and args.tail < 1:
        raise DiscoveryError(f"--tail {args.tail}: must be at least 1 line")
    gate = discovery.gate()
    # The bytes as written; a text stream without bytes beneath (tests) gets them decoded.
    out: gate_client.Sink = getattr(world.out, "buffer", None) or _TextSink(world.out)
    world.out.flush()
    run = gate_client.logs(gate, args.cluster, args.task, out, run=args.run, tail=args.tail, open_url=world.open_url)
    out.flush()
    print(f"tfk8s: {gate.experiment}/{args.cluster} {args.task}, run {run}", file=world.err)
    return 0


class _TextSink:
    def __init__(self, text: IO[str]) -> None:
        self.text = text
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def write(self, data: bytes) -> int:
        return self.text.write(self.decoder.decode(data))

    def flush(self) -> None:
        self.text.flush()


if __name__ == "__main__":
    sys.exit(main())
