"""The run policy builder (pure): what a Job gets per Kubernetes version, and what preview says."""

from __future__ import annotations

import pytest
from tfk8s.settings.experiment import ClusterSettings, RunSettings, WorkerSettings
from tfk8s.specs import run_policy


def cluster(**run: int) -> ClusterSettings:
    return ClusterSettings(name="mnist", workers=WorkerSettings(count=4, backoff_limit_per_index=2), run=RunSettings(**run))


@pytest.mark.parametrize(("version", "warned"), [((1, 25), True), ((1, 28), True), ((1, 29), False), ((1, 34), False)])
def test_the_retry_budget_is_the_same_whether_per_index_or_shared(version: tuple[int, int], warned: bool) -> None:
    fields = run_policy.job_fields(cluster(), 4, version)
    total = fields.get("backoffLimit") or fields["backoffLimitPerIndex"] * 4
    assert total == 8
    warning = run_policy.shared_retries_warning(cluster(), 4, version)
    assert (warning is not None) == warned
    if warning:
        assert "backoffLimitPerIndex needs 1.29" in warning and "share backoffLimit 8" in warning


def test_deadline_and_ttl_are_passed_through_only_when_set() -> None:
    assert not {"activeDeadlineSeconds", "ttlSecondsAfterFinished"} & set(run_policy.job_fields(cluster(), 4, (1, 34)))
    fields = run_policy.job_fields(cluster(active_deadline_seconds=60, ttl_seconds_after_finished=0), 4, (1, 25))
    assert (fields["activeDeadlineSeconds"], fields["ttlSecondsAfterFinished"]) == (60, 0)


@pytest.mark.parametrize(("version", "has_policy"), [((1, 25), False), ((1, 26), True), ((1, 34), True)])
def test_what_is_not_the_tasks_fault_uses_none_of_its_retries(version: tuple[int, int], has_policy: bool) -> None:
    """A pod the cluster took away, and a task exiting with RESTART_EXIT_CODE in its own container
    (the in-graph chief that lost a PS), are ignored; nothing else is, so a worker's bug still counts."""
    fields = run_policy.job_fields(cluster(), 4, version)
    if not has_policy:  # alpha and off in 1.25: an API server would drop it
        assert "podFailurePolicy" not in fields
        return
    rules = fields["podFailurePolicy"]["rules"]
    assert all(rule["action"] == "Ignore" for rule in rules)
    assert [r["onPodConditions"] for r in rules if "onPodConditions" in r] == [[{"type": "DisruptionTarget"}]]
    (codes,) = [r["onExitCodes"] for r in rules if "onExitCodes" in r]
    assert codes == {"containerName": "tensorflow", "operator": "In", "values": [run_policy.RESTART_EXIT_CODE]}


def test_a_kubernetes_version_that_changes_a_jobs_immutable_fields_changes_the_run() -> None:
    """Retries per index (1.29) and the failure policy (1.26) cannot be changed in a Job: a platform
    moving across either version must replace the run's Jobs, so its run id changes; a version that
    changes none of them keeps the run."""
    from tfk8s.specs import cluster_spec as cs

    def run_id(version: tuple[int, int]) -> str:
        return cs.run_id(cluster(), {"ps": ["a:1"]}, "tf:2", "digest", run_policy.immutable_fields(cluster(), version))

    assert len({run_id((1, 25)), run_id((1, 26)), run_id((1, 29))}) == 3
    assert run_id((1, 29)) == run_id((1, 34))
    assert run_id((1, 26)) == run_id((1, 28))
