"""Program evaluation cost: tfk8s under Pulumi mocks vs rendering the seed's Jinja template.

For each topology (users x clusters per user x workers per cluster, 1 PS each) it measures
  * tfk8s: wall time from declaring the stack to every output resolved, under
    `pulumi.runtime.set_mocks` (no engine, no provider: the program's own cost), and the
    resource count;
  * seed: time to render tests/fixtures/seed/tfcluster_template.yaml.jinja once per cluster
    (with that worker count) and parse the YAML, and its object count.
Both run in this one process, side by side, best of --repeat runs; ratios are tfk8s / seed.

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

from mocks import RecordingMocks  # noqa: E402
from tfk8s import config, program  # noqa: E402

TOPOLOGIES = [(1, 1, 2), (10, 3, 2), (100, 3, 2), (1, 1, 1000)]
SEED = (ROOT / "tests" / "fixtures" / "seed" / "tfcluster_template.yaml.jinja").read_text()


def stack_config(users: int, clusters: int, workers: int) -> dict[str, Any]:
    base = yaml.safe_load((ROOT / "stacks" / "Pulumi.dev.yaml").read_text())["config"]
    template = base["tfk8s:users"][0]["clusters"][0]
    result = []
    for u in range(users):
        cs = []
        for c in range(clusters):
            cluster = copy.deepcopy(template)
            cluster["name"], cluster["workers"]["count"] = f"c{c}", workers
            cs.append(cluster)
        result.append({"name": f"user{u}", "clusters": cs})
    return {"platform": base["tfk8s:platform"], "users": result}


def run_tfk8s(raw: dict[str, Any]) -> tuple[float, int]:
    mocks = RecordingMocks()
    pulumi.runtime.set_mocks(mocks, project="tfk8s", stack="bench", preview=False)
    default_thresholds = gc.get_threshold()
    gc.set_threshold(*program.EVALUATION_GC_THRESHOLDS)  # as program.main() does
    started = time.perf_counter()

    @pulumi.runtime.test
    def evaluate() -> pulumi.Output[Any]:
        settings = config.parse(raw["platform"], raw["users"], ROOT)
        return program.build(settings, ROOT)["readiness"]

    try:
        evaluate()
        return time.perf_counter() - started, len(mocks.resources)
    finally:
        gc.set_threshold(*default_thresholds)  # the seed's side runs with Python's defaults


def run_seed(users: int, clusters: int, workers: int) -> tuple[float, int]:
    started = time.perf_counter()
    objects = 0
    env = jinja2.Environment()
    for u in range(users):
        for c in range(clusters):
            text = re.sub(r'set name = "imagenet"', f'set name = "user{u}-c{c}"', SEED)
            text = re.sub(r"set worker_replicas = \d+", f"set worker_replicas = {workers}", text)
            text = re.sub(r"set ps_replicas = \d+", "set ps_replicas = 1", text)
            objects += sum(1 for doc in yaml.safe_load_all(env.from_string(text).render()) if doc)
    return time.perf_counter() - started, objects


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    run_tfk8s(stack_config(1, 1, 2))  # warm-up: imports and first-use costs are not per-resource costs
    run_seed(1, 1, 2)
    print(
        "| users x clusters x workers | tfk8s resources | tfk8s ms | tfk8s ms/resource | seed objects | seed ms "
        "| seed ms/object | time ratio tfk8s/seed |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for users, clusters, workers in TOPOLOGIES:
        raw = stack_config(users, clusters, workers)
        ours = min((run_tfk8s(raw) for _ in range(args.repeat)), key=lambda r: r[0])
        seed = min((run_seed(users, clusters, workers) for _ in range(args.repeat)), key=lambda r: r[0])
        print(
            f"| {users} x {clusters} x {workers} | {ours[1]} | {ours[0] * 1e3:.0f} | {ours[0] * 1e3 / ours[1]:.2f} "
            f"| {seed[1]} | {seed[0] * 1e3:.0f} | {seed[0] * 1e3 / seed[1]:.2f} | {ours[0] / seed[0]:.2f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
