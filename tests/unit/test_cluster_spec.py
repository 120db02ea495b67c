"""Pure builders of the TF cluster layout. (What the pods make of it, TF_CONFIG and the classic
flags, is the launcher's: tests/training/test_launch.py tests it on this spec.)"""

from __future__ import annotations

from tfk8s.settings.experiment import ClusterSettings, PsSettings, RunSettings, WorkerSettings
from tfk8s.specs import cluster_spec as cs
from tfk8s.specs import run_policy

CLUSTER = ClusterSettings(name="mnist", ps=PsSettings(count=2), workers=WorkerSettings(count=3))
# The Jobs' immutable fields on today's Kubernetes (tests/unit/test_run_policy.py changes them).
JOBS = run_policy.immutable_fields(CLUSTER, (1, 34))


def run_id(cluster: ClusterSettings, spec: dict[str, list[str]], image: str, code: str) -> str:
    return cs.run_id(cluster, spec, image, code, JOBS)


def test_run_id_is_stable_and_changes_with_what_runs() -> None:
    spec = cs.cluster_spec(CLUSTER, 2222)
    base = run_id(CLUSTER, spec, "tf:2", "code1")
    assert base == run_id(CLUSTER, spec, "tf:2", "code1")
    more_workers = CLUSTER.model_copy(update=dict(workers=WorkerSettings(count=4)))
    variants = {
        run_id(CLUSTER, spec, "tf:3", "code1"),
        run_id(CLUSTER, spec, "tf:2", "code2"),
        run_id(more_workers, cs.cluster_spec(more_workers, 2222), "tf:2", "code1"),
        run_id(CLUSTER.model_copy(update=dict(training="sync")), spec, "tf:2", "code1"),
        # Same layout, GPUs added: the Job is replaced, so it is a new run too.
        run_id(CLUSTER.model_copy(update=dict(workers=WorkerSettings(count=3, gpus=1))), spec, "tf:2", "code1"),
    }
    assert base not in variants and len(variants) == 5


def test_run_id_counts_settings_as_written_not_their_defaults() -> None:
    """A setting a newer tfk8s adds, at its default, starts no new run of a running experiment; a
    default written out is the same run; a value set is a new one."""
    spec = cs.cluster_spec(CLUSTER, 2222)
    base = run_id(CLUSTER, spec, "tf:2", "code1")

    class NewerPsSettings(PsSettings):
        a_new_knob: int = 7

    class NewerClusterSettings(ClusterSettings):
        ps: NewerPsSettings = NewerPsSettings()
        another_new_knob: str = "default"

    newer = NewerClusterSettings.model_validate(CLUSTER.model_dump())
    assert run_id(newer, spec, "tf:2", "code1") == base
    written_out = CLUSTER.model_copy(update=dict(ps=PsSettings(count=2, memory="1Gi", nodeSelector={})))
    assert run_id(written_out, spec, "tf:2", "code1") == base
    placed = CLUSTER.model_copy(update=dict(ps=PsSettings(count=2, nodeSelector={"pool": "cpu"})))
    assert run_id(placed, spec, "tf:2", "code1") != base
    assert run_id(newer.model_copy(update=dict(another_new_knob="set")), spec, "tf:2", "code1") != base


def test_a_lineage_is_what_the_user_decides_of_a_run_not_what_tfk8s_does() -> None:
    """tfk8s's changes (its trainer, the platform's image, the host names: each a new run id) keep a
    run's lineage, so an upgrade's new run continues the interrupted one; the user's own changes
    (settings, run.number, code) start a new lineage, from step 0."""
    spec = cs.cluster_spec(CLUSTER, 2222)
    base = cs.lineage(CLUSTER, "code1")
    assert run_id(CLUSTER, spec, "tf:2", "trainer1code1") != run_id(CLUSTER, spec, "tf:3", "trainer2code1")
    assert cs.lineage(CLUSTER, "code1") == base  # whatever the trainer and the image were
    assert cs.lineage(CLUSTER.model_copy(update=dict(run=RunSettings(priority="urgent"))), "code1") == base
    # How long its pods wait for a lost node: other pods, so a new run, of the same training.
    waits = CLUSTER.model_copy(update=dict(run=RunSettings(node_lost_seconds=20)))
    assert cs.lineage(waits, "code1") == base
    assert run_id(waits, spec, "tf:2", "code1") != run_id(CLUSTER, spec, "tf:2", "code1")
    changed = {
        cs.lineage(CLUSTER, "code2"),
        cs.lineage(CLUSTER.model_copy(update=dict(run=RunSettings(number=1))), "code1"),
        cs.lineage(CLUSTER.model_copy(update=dict(training="sync")), "code1"),
        cs.lineage(CLUSTER.model_copy(update=dict(image="example.com/tf:2.21.0")), "code1"),
    }
    assert base not in changed and len(changed) == 4


def test_experiments_prefix_names_unless_the_cluster_is_named_like_the_experiment() -> None:
    assert cs.cluster_spec(CLUSTER, 2222, experiment="exp1")["ps"][0] == "exp1-mnist-ps-0:2222"
    assert cs.cluster_spec(CLUSTER, 2222, experiment="mnist")["ps"][0] == "mnist-ps-0:2222"


def test_in_graph_spec_has_a_chief_only_when_someone_drives_it() -> None:
    chief = CLUSTER.model_copy(update=dict(replication="in-graph", in_graph_client="chief"))
    notebook = CLUSTER.model_copy(update=dict(replication="in-graph", in_graph_client="notebook"))
    assert cs.cluster_spec(chief, 2222)["chief"] == ["mnist-chief-0.mnist-chief:2222"]
    assert cs.cluster_spec(notebook, 2222, notebook_host="alice-jupyter-tf:2222")["chief"] == ["alice-jupyter-tf:2222"]
    assert "chief" not in cs.cluster_spec(CLUSTER, 2222, notebook_host="x:1")
