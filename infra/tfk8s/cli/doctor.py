"""`tfk8s doctor`: whether the cluster of the current kubeconfig can run a tfk8s platform (tfk8s.doctor).

    tfk8s doctor [--stack platform-prod] [--json] [--node-selector KEY=VALUE] [--toleration KEY]
                 [--image IMAGE] [--timeout 60] [--no-probes]

Exit codes: 0 when every required check passed; 1 when one failed or was not proven; 2 when the
doctor could not start (no kubeconfig, an unreachable server, a stack file it cannot check against:
one line naming what is missing and the fix).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO

from tfk8s.doctor import report
from tfk8s.doctor.checkup import Options, checkup
from tfk8s.doctor.target import Placement, load
from tfk8s.errors import Tfk8sError
from tfk8s.kube import client as kube_client
from tfk8s.kube.api_error import KubeApiError

Connect = Callable[[Mapping[str, str]], kube_client.Cluster]


def connect(environ: Mapping[str, str]) -> kube_client.Cluster:
    return kube_client.connect(environ, kubeconfig_in_config=False)


def label(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text}: give KEY=VALUE, e.g. tfk8s.io/training=true")
    return key, value


def seconds(text: str) -> float:
    value = float(text)
    if not value >= 5:
        raise argparse.ArgumentTypeError(f"{text}: give at least 5 seconds (an image's first pull takes longer)")
    return value


def add_parser(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    doctor = commands.add_parser("doctor", help="whether this cluster can run a tfk8s platform, each check's verdict and fix")
    doctor.add_argument(
        "--stack", help="the platform stack whose settings to check (its name in --cwd, or its file); the defaults without"
    )
    doctor.add_argument("--cwd", type=Path, default=Path.cwd(), help="the Pulumi project's directory (the current one)")
    doctor.add_argument("--json", action="store_true", help="the report as JSON")
    doctor.add_argument(
        "--node-selector",
        type=label,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="the probes' pods ask for nodes with this label (repeatable)",
    )
    doctor.add_argument(
        "--toleration",
        action="append",
        default=[],
        metavar="KEY",
        help="the probes' pods tolerate taints of this key (repeatable)",
    )
    doctor.add_argument("--image", help="the probes' image, with python3 (the stack's TensorFlow image by default)")
    doctor.add_argument(
        "--timeout", type=seconds, default=60.0, help="seconds each probe pod may take, its image's pull included (60)"
    )
    doctor.add_argument("--no-probes", dest="probes", action="store_false", help="read only: create nothing")


def run(args: argparse.Namespace, environ: Mapping[str, str], out: IO[str], err: IO[str], connect: Connect = connect) -> int:
    try:
        target = load(args.stack, args.cwd)
        cluster = connect(environ)
    except Tfk8sError as error:  # the stack file's (TargetError) or the cluster's (ClusterUnreachable)
        print(f"tfk8s doctor: {error}", file=err)
        return 2
    if cluster.api is None:
        print(
            "tfk8s doctor: the kubeconfig's credentials cannot be used by tfk8s; point KUBECONFIG at the platform team's",
            file=err,
        )
        return 2
    options = Options(
        placement=Placement(dict(args.node_selector), tuple(args.toleration)),
        image=args.image,
        timeout=args.timeout,
        probes=args.probes,
    )
    try:
        found = checkup(cluster.api, cluster.api.server, cluster.version, target, options)
    except KubeApiError as error:
        print(f"tfk8s doctor: {error}; check the kubeconfig's credentials and the server", file=err)
        return 2
    out.write(report.dumps(found) + "\n" if args.json else "\n".join(report.text(found)) + "\n")
    return 0 if found.ready else 1
