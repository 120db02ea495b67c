"""Program evaluation cost: tfk8s under Pulumi mocks vs rendering the seed's Jinja template.

For each experiment topology (clusters x workers per cluster, 1 PS each) it measures
  * tfk8s: wall time from declaring the experiment stack to every resource registered and its
    readiness resolved, under `pulumi.runtime.set_mocks` (no engine, no provider: the program's
    own cost; the tenant's and the platform's outputs mocked), and the resource count;
  * seed: time to render tests/fixtures/seed/tfcluster_template.yaml.jinja once per cluster
    (with that worker count) and parse the YAML, and its object count.
Both run in this one process, side by side, best of --repeat runs; ratios are tfk8s / seed.
Then each kind of stack alone, as the repository's files declare it: the platform (platform-dev),
a tenant (tenant-alice) and an experiment (dev), each under mocks with the stacks it builds on
mocked (the seed had no template for the first two). A platform no longer grows with its users:
a tenant is a stack of its own, so its cost is the one row, whatever the number of tenants
(bench/tenant_scale.py measures that against a cluster).

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

from mocked_program import after, facts_for, run_program, stack_config, tenant_facts_for  # noqa: E402
from tfk8s import gc_policy  # noqa: E402

TOPOLOGIES = [(1, 2), (30, 2), (300, 2), (1, 1000)]
KINDS = ["platform-dev", "tenant-alice", "dev"]  # one stack of each kind, from stacks/
SEED = (ROOT / "tests" / "fixtures" / "seed" / "tfcluster_template.yaml.jinja").read_text()


def experiment_config(clusters: int, workers: int) -> dict[str, Any]:
    base = stack_config("dev")
    template = base["clusters"][0]
    result = []
    for c in range(clusters):
        cluster = copy.deepcopy(template)
        cluster["name"], cluster["workers"]["count"] = f"c{c}", workers
        result.append(cluster)
    return base | {"clusters": result}


# What the stacks an experiment or a tenant builds on publish, built once: their reads are mocked.
PLATFORM_FACTS = facts_for(stack_config("platform-dev"))
TENANT_FACTS = tenant_facts_for("tenant-alice", PLATFORM_FACTS)


def run_tfk8s(raw: dict[str, Any]) -> tuple[float, int]:
    """Seconds from declaring the stack to every resource registered and readiness resolved, and
    the resources the mocks saw created (reads apart)."""
    default_thresholds = gc.get_threshold()
    gc_policy.use_evaluation_thresholds()  # as the entry point does
    started = time.perf_counter()
    seen = []

    @pulumi.runtime.test
    def evaluate() -> pulumi.Output[Any]:
        d = run_program(raw, platform=PLATFORM_FACTS, tenant=TENANT_FACTS)
        return after(d, lambda: seen.append(len(d.mocks.resources)))

    try:
        evaluate()
        return time.perf_counter() - started, seen[0]
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
    print("\n| stack (kind) | tfk8s resources | tfk8s ms | tfk8s ms/resource |")
    print("|---|---|---|---|")
    for stack in KINDS:
        raw = stack_config(stack)
        ours = min((run_tfk8s(raw) for _ in range(args.repeat)), key=lambda r: r[0])
        print(f"| {stack} ({raw['kind']}) | {ours[1]} | {ours[0] * 1e3:.0f} | {ours[0] * 1e3 / ours[1]:.2f} |", flush=True)


if __name__ == "__main__":
    main()
