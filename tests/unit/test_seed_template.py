"""The seed's Jinja template (restored as a fixture) renders parseable YAML, and our layout keeps its names."""

from __future__ import annotations

from pathlib import Path

import jinja2
import yaml
from tfk8s.settings.experiment import ClusterSettings, PsSettings, WorkerSettings
from tfk8s.specs import cluster_spec as cs

TEMPLATE = Path(__file__).resolve().parents[1] / "fixtures" / "seed" / "tfcluster_template.yaml.jinja"


def render_seed() -> list[dict]:
    text = jinja2.Environment().from_string(TEMPLATE.read_text()).render()
    return [doc for doc in yaml.safe_load_all(text) if doc]


def test_seed_template_renders_valid_yaml_objects() -> None:
    kinds = sorted((d["kind"], d["metadata"]["name"]) for d in render_seed())
    assert kinds == sorted(
        [("Service", f"imagenet-{job}-{i}") for job, n in (("worker", 3), ("ps", 2)) for i in range(n)]
        + [("Job", f"imagenet-worker-{i}") for i in range(3)]
        + [("Deployment", f"imagenet-ps-{i}") for i in range(2)]
        + [("PersistentVolumeClaim", "imagenet-log-pvc"), ("PersistentVolumeClaim", "imagenet-data-pvc")]
    )


def test_our_cluster_spec_keeps_the_seeds_task_names() -> None:
    seed_job = next(d for d in render_seed() if d["kind"] == "Job")
    seed_args = seed_job["spec"]["template"]["spec"]["containers"][0]["args"][0]
    seed_ps = seed_args.split("--ps_hosts=")[1].split()[0]
    seed_workers = seed_args.split("--worker_hosts=")[1].split()[0].split(",")
    ours = cs.cluster_spec(ClusterSettings(name="imagenet", ps=PsSettings(count=2), workers=WorkerSettings(count=3)), 2222)
    assert ",".join(ours["ps"]) == seed_ps  # one Service per PS, same names
    # Workers: the seed's per-worker Service name is our pod hostname under one headless Service.
    assert [h.split(".")[0] for h in ours["worker"]] == [w.split(":")[0] for w in seed_workers]
