"""The run policy builder (pure): what a Job gets per Kubernetes version, and what preview says."""

from __future__ import annotations

import pytest
from tfk8s.schema.experiment import ClusterSettings, RunSettings, WorkerSettings
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
