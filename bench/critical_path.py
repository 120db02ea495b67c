"""Where a no-change `pulumi up` of the dev experiment waits: for its program, or for the Kubernetes
provider. The part of tfk8s's fixed cost that is the program's own is what the program takes after
the provider is ready; work the program does while the provider starts costs nothing.

On a throwaway kwok cluster (`tfk8s-bench`, as bench/deploy_vs_apply.py sets it up: platform-dev
and tenant-alice deployed once), the dev experiment is created as alice runs it (her certificate,
state and passphrase: `hack/env.sh --tenant alice`, what the quick start does); then `--repeat`
no-change `up`s, each traced (`--otel-traces file://...`: the CLI's, the host's and the provider's
gRPC calls) and with the program's phases marked (tfk8s.timings). Per run, in seconds since the
trace's first span (the CLI's start): the host's `Run`, the program's first line (`start`), the
provider warm-up's invoke (tfk8s.kube.objects.warm_up_provider), the provider's `Configure` done,
the program's import done, its reads and declarations done (`declared`), the engine's first
`RegisterResource`, the program's exit and the trace's end; and the slack: how long the provider
was ready before the program's first registration. Medians of the runs.

    make tools && .venv/bin/python bench/critical_path.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "lab"), str(ROOT / "bench")]

from deploy_vs_apply import BASE, CLUSTER, as_experimenter, platform, pulumi_cli  # noqa: E402

import toolenv  # noqa: E402

CLI, PROVIDER = "pulumi-cli", "pulumi-resource-provider"


@dataclass(frozen=True)
class Span:
    service: str
    name: str
    start: int  # ns since the epoch
    end: int


def spans(trace: Path) -> list[Span]:
    """Every span of an OTLP JSON file (one export per line), with the service that recorded it."""
    found = []
    for line in trace.read_text().splitlines():
        for resource in json.loads(line).get("resourceSpans", []):
            attributes = {a["key"]: a["value"].get("stringValue") for a in resource["resource"].get("attributes", [])}
            for scope in resource.get("scopeSpans", []):
                for span in scope.get("spans", []):
                    found.append(
                        Span(
                            attributes.get("service.name") or "",
                            span["name"],
                            int(span["startTimeUnixNano"]),
                            int(span["endTimeUnixNano"]),
                        )
                    )
    return found


def first(found: list[Span], service: str, name: str) -> Span:
    matching = [s for s in found if s.service == service and s.name == name]
    if not matching:
        raise SystemExit(f"no {name} span from {service} in the trace: has the CLI's tracing changed?")
    return min(matching, key=lambda s: s.start)


def critical_path(trace: Path, marks: Path) -> dict[str, float]:
    """One traced run's moments, in seconds since its first span."""
    found = spans(trace)
    origin = min(s.start for s in found if s.service == CLI)
    phase = {m["phase"]: m["time"] for m in map(json.loads, marks.read_text().splitlines())}

    def at(ns: int) -> float:
        return (ns - origin) / 1e9

    def marked(name: str) -> float:
        return phase[name] - origin / 1e9

    configured = at(first(found, CLI, "pulumirpc.ResourceProvider/Configure").end)
    registered = at(first(found, CLI, "pulumirpc.ResourceMonitor/RegisterResource").start)
    return {
        "the host's Run": at(first(found, CLI, "pulumirpc.LanguageRuntime/Run").start),
        "the program's first line": marked("start"),
        "the provider warm-up's invoke": at(first(found, CLI, "pulumirpc.ResourceMonitor/Invoke").start),
        "the provider configured": configured,
        "the program's import done": marked("import"),
        "its reads and declarations done": marked("declared"),
        "the first RegisterResource": registered,
        "the program's exit": marked("exit"),
        "the trace's end": at(max(s.end for s in found)),
        "slack: provider ready before the first registration": registered - configured,
    }


def traced_runs(scratch: Path, repeat: int) -> list[dict[str, float]]:
    work = toolenv.project_copy(scratch / "after")
    platform(work)
    alice = as_experimenter(work, scratch / "alice")
    pulumi_cli(work, "up", "--yes", "--skip-preview", stack=alice.stack, env=alice.env)
    runs = []
    for i in range(repeat):
        trace, marks = scratch / f"trace-{i}.json", scratch / f"marks-{i}.jsonl"
        env = {**alice.env, "TFK8S_TIMINGS": str(marks)}
        pulumi_cli(work, "up", "--yes", "--skip-preview", f"--otel-traces=file://{trace}", stack=alice.stack, env=env)
        runs.append(critical_path(trace, marks))
    pulumi_cli(work, "destroy", "--yes", stack=alice.stack, env=alice.env)
    for stack in reversed(BASE):
        pulumi_cli(work, "destroy", "--yes", stack=stack)
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5, help="traced no-change ups; medians are reported")
    args = parser.parse_args()
    toolenv.time_as_a_user()
    with toolenv.throwaway_cluster(CLUSTER) as kubeconfig:
        os.environ.update(toolenv.exported({"KUBECONFIG": str(kubeconfig)}))
        scratch = Path(tempfile.mkdtemp(prefix="tfk8s-bench-"))
        try:
            runs = traced_runs(scratch, args.repeat)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    print(f"a no-change `up` of the dev experiment as alice, medians of {args.repeat} traced runs\n")
    print("| moment | s since the CLI's first span | min | max |\n|---|---:|---:|---:|")
    for moment in runs[0]:
        values = [run[moment] for run in runs]
        print(f"| {moment} | {statistics.median(values):.3f} | {min(values):.3f} | {max(values):.3f} |")


if __name__ == "__main__":
    main()
