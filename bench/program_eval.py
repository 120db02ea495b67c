"""Program evaluation cost: tfk8s under Pulumi mocks vs rendering the seed's Jinja template.

For each experiment topology (clusters x workers per cluster, 1 PS each) it measures
  * tfk8s: wall time from declaring the experiment stack to every output resolved, under
    `pulumi.runtime.set_mocks` (no engine, no provider: the program's own cost; the platform's
    output mocked), and the resource count;
  * seed: time to render tests/fixtures/seed/tfcluster_template.yaml.jinja once per cluster
    (with that worker count) and parse the YAML, and its object count.
Both run in this one process, side by side, best of --repeat runs; ratios are tfk8s / seed.
Then the same for platform stacks of 1 and 100 users (the seed had no template for those).

    .venv/bin/python bench/program_eval.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import copy
import gc
import re
import sys
import time
from pathlib import Path
from typing import Any

import jinja2
import pulumi
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "infra"), str(ROOT / "tests" / "unit")]

from mocked_program import facts_for  # noqa: E402
from mocks import RecordingMocks, plain_nodes  # noqa: E402
from tfk8s import program  # noqa: E402
from tfk8s.schema_platform import PlatformStack  # noqa: E402
from tfk8s.stack_config import validate  # noqa: E402

TOPOLOGIES = [(1, 2), (30, 2), (300, 2), (1, 1000)]
PLATFORM_USERS = [1, 100]
SEED = (ROOT / "tests" / "fixtures" / "seed" / "tfcluster_template.yaml.jinja").read_text()


def experiment_config(clusters: int, workers: int) -> dict[str, Any]:
    base = yaml.safe_load((ROOT / "stacks" / "Pulumi.dev.yaml").read_text())["config"]
    template = base["tfk8s:clusters"][0]
    result = []
    for c in range(clusters):
        cluster = copy.deepcopy(template)
        cluster["name"], cluster["workers"]["count"] = f"c{c}", workers
        result.append(cluster)
    return {k.removeprefix("tfk8s:"): v for k, v in base.items()} | {"clusters": result}


def platform_config(users: int) -> dict[str, Any]:
    base = yaml.safe_load((ROOT / "stacks" / "Pulumi.platform-dev.yaml").read_text())["config"]
    raw = {k.removeprefix("tfk8s:"): v for k, v in base.items()}
    return raw | {"users": [{"name": f"user{u}", "volumes": {"dataSize": "1Gi", "logSize": "1Gi"}} for u in range(users)]}


PLATFORM_FACTS = facts_for(platform_config(1) | {"users": [{"name": "alice"}]})


def roomy_nodes(typ: str, object_id: str) -> dict[str, Any]:
    """Nodes whose User Node has room for 100 users' apps (kubelet --max-pods=250): tfk8s refuses less."""
    live = plain_nodes(typ, object_id)
    if typ == "kubernetes:core/v1:Node":
        live["status"] = {"allocatable": {"pods": "250"}}
    return live


def run_tfk8s(raw: dict[str, Any]) -> tuple[float, int]:
    mocks = RecordingMocks(live_hook=roomy_nodes)
    stack = "platform-bench" if raw["kind"] == "platform" else "dev"
    pulumi.runtime.set_mocks(mocks, project="tfk8s", stack=stack, preview=False, organization="organization")
    default_thresholds = gc.get_threshold()
    gc.set_threshold(*program.EVALUATION_GC_THRESHOLDS)  # as program.main() does
    started = time.perf_counter()

    @pulumi.runtime.test
    def evaluate() -> pulumi.Output[Any]:
        validated = validate(raw)
        if isinstance(validated, PlatformStack):
            return program.run_platform(validated, None, None, {}, ROOT)["readiness"]
        return program.run_experiment(validated, None, None, {}, ROOT, read_outputs=lambda _: {"platform": PLATFORM_FACTS})[
            "readiness"
        ]

    try:
        evaluate()
        return time.perf_counter() - started, len(mocks.resources)
    finally:
        gc.set_threshold(*default_thresholds)  # the seed's side runs with Python's defaults


def run_seed(clusters: int, workers: int) -> tuple[float, int]:
    started = time.perf_counter()
    objects = 0
    env = jinja2.Environment()
    for c in range(clusters):
        text = re.sub(r'set name = "imagenet"', f'set name = "c{c}"', SEED)
        text = re.sub(r"set worker_replicas = \d+", f"set worker_replicas = {workers}", text)
        text = re.sub(r"set ps_replicas = \d+", "set ps_replicas = 1", text)
        objects += sum(1 for doc in yaml.safe_load_all(env.from_string(text).render()) if doc)
    return time.perf_counter() - started, objects


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    run_tfk8s(experiment_config(1, 2))  # warm-up: imports and first-use costs are not per-resource costs
    run_seed(1, 2)
    print(
        "| experiment: clusters x workers | tfk8s resources | tfk8s ms | tfk8s ms/resource | seed objects | seed ms "
        "| seed ms/object | time ratio tfk8s/seed |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for clusters, workers in TOPOLOGIES:
        raw = experiment_config(clusters, workers)
        ours = min((run_tfk8s(raw) for _ in range(args.repeat)), key=lambda r: r[0])
        seed = min((run_seed(clusters, workers) for _ in range(args.repeat)), key=lambda r: r[0])
        print(
            f"| {clusters} x {workers} | {ours[1]} | {ours[0] * 1e3:.0f} | {ours[0] * 1e3 / ours[1]:.2f} "
            f"| {seed[1]} | {seed[0] * 1e3:.0f} | {seed[0] * 1e3 / seed[1]:.2f} | {ours[0] / seed[0]:.2f} |",
            flush=True,
        )
    print("\n| platform: users | tfk8s resources | tfk8s ms | tfk8s ms/resource |")
    print("|---|---|---|---|")
    for users in PLATFORM_USERS:
        ours = min((run_tfk8s(platform_config(users)) for _ in range(args.repeat)), key=lambda r: r[0])
        print(f"| {users} | {ours[1]} | {ours[0] * 1e3:.0f} | {ours[0] * 1e3 / ours[1]:.2f} |", flush=True)


if __name__ == "__main__":
    main()
