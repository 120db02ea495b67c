"""What the GitOps pipeline reads from the engine (tfk8s_gitops.engine), the Markdown it writes
(tfk8s_gitops.summary), and the operator objects it renders (tfk8s_gitops.operator)."""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from tfk8s.errors import ConfigError
from tfk8s_gitops import operator, summary
from tfk8s_gitops.engine import NOT_RUN_LEVEL, Result, _read_events
from tfk8s_gitops.identity import identity
from tfk8s_gitops.pipeline import FAILED, SKIPPED, Report, StepReport
from tfk8s_gitops.plan import Plan, Step
from tfk8s_gitops.repo import Repo

JOB = "urn:pulumi:exp::tfk8s::tfk8s:index:Experiment$tfk8s:index:TrainingCluster$kubernetes:batch/v1:Job::exp-mnist-worker"
POLICY = "urn:pulumi:exp::tfk8s::tfk8s:index:Experiment$kubernetes:networking.k8s.io/v1:NetworkPolicy::exp-mnist"


def _step(op: str, urn: str, diffs: list[str] | None = None) -> dict[str, Any]:
    return {"resOutputsEvent": {"metadata": {"op": op, "urn": urn, "type": urn.split("::")[2].split("$")[-1], "diffs": diffs}}}


def _policy(name: str, level: str, message: str) -> dict[str, Any]:
    return {"policyEvent": {"policyName": name, "enforcementLevel": level, "message": message, "color": "never"}}


def test_events_give_changes_verdicts_and_the_last_phase_only() -> None:
    result = Result("pulumi up", 0, "", 1.0)
    preview_phase = [{"preludeEvent": {"config": {}}}, _step("update", POLICY, ["spec"])]
    update_phase = [
        {"preludeEvent": {"config": {}}},
        _step("same", POLICY),
        _step("create-replacement", JOB),
        _step("replace", JOB, ["spec"]),
        _step("delete-replaced", JOB),
        _policy("jobs-deadline", "advisory", "Training Jobs have a deadline.\nmore"),
        _policy("namespaces-isolated", "advisory", "can't run policy 'namespaces-isolated' during preview: unknown"),
        _policy("no-latest-image", "mandatory", "runs 'tf:latest'"),
        {"diagnosticEvent": {"severity": "error", "message": "update failed\n", "color": "never"}},
        {"summaryEvent": {"resourceChanges": {"same": 11, "replace": 1}, "maybeCorrupt": False, "durationSeconds": 2}},
    ]
    _read_events(result, preview_phase + update_phase)
    assert result.phases == 2 and result.applied
    assert result.changes == {"replace": 1}
    assert result.changed == [("replace", JOB, ["spec"])]  # a replacement once; the preview phase forgotten
    assert {n: v.level for n, v in result.verdicts.items()} == {
        "jobs-deadline": "advisory",
        "namespaces-isolated": NOT_RUN_LEVEL,
        "no-latest-image": "mandatory",
    }
    assert result.errors == ["update failed"]


STACK = "urn:pulumi:t::tfk8s::pulumi:pulumi:Stack::tfk8s-t"


def _stack_outputs(op: str, outputs: dict[str, Any]) -> dict[str, Any]:
    """The root stack's resOutputsEvent as `pulumi up --event-log` writes it (pulumi 3.259): its
    outputs under `new`, the state after the step."""
    new = {"type": "pulumi:pulumi:Stack", "urn": STACK, "id": "", "parent": "", "inputs": {}, "outputs": outputs, "provider": ""}
    metadata = {"op": op, "urn": STACK, "type": "pulumi:pulumi:Stack", "old": None, "new": new, "provider": "", "logical": True}
    return {"resOutputsEvent": {"metadata": metadata}}


def test_the_stacks_outputs_are_its_root_resources_in_the_last_phase() -> None:
    """`ready` comes from the `up`'s own events (no `pulumi stack output` after it): the update's,
    not the preview's, where outputs that depend on the cluster are still unknown."""
    result = Result("pulumi up", 0, "", 1.0)
    unknown = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
    preview_phase = [{"preludeEvent": {"config": {}}}, _stack_outputs("create", {"ready": unknown})]
    update_phase = [
        {"preludeEvent": {"config": {}}},
        _step("create", POLICY),
        _stack_outputs("create", {"ready": True, "notReady": [], "token": "[secret]"}),
        {"summaryEvent": {"resourceChanges": {"create": 2}, "maybeCorrupt": False, "durationSeconds": 2}},
    ]
    _read_events(result, preview_phase + update_phase)
    assert result.outputs == {"ready": True, "notReady": [], "token": "[secret]"}
    assert result.changed == [("create", POLICY, [])]  # the root stack is no change of its own


@pytest.mark.parametrize(
    "events",
    [
        [],
        [{"preludeEvent": {"config": {}}}, _step("create", POLICY)],
        [_stack_outputs("create", {"ready": True}), {"preludeEvent": {"config": {}}}],
    ],
    ids=["no-events", "no-stack-event", "only-an-earlier-phases"],
)
def test_events_without_the_root_stacks_outputs_report_none(events: list[dict[str, Any]]) -> None:
    result = Result("pulumi up", 0, "", 1.0)
    _read_events(result, events)
    assert result.outputs is None


@pytest.mark.parametrize(
    ("is_preview", "applied", "shown"),
    [(False, True, "+30"), (True, False, "+32 proposed, none made")],
    ids=["update-failed", "preview-refused"],
)
def test_a_failed_up_says_whether_its_changes_were_made_from_its_logs_one_phase(
    is_preview: bool, applied: bool, shown: str
) -> None:
    """`pulumi up --event-log` (3.259) keeps only the last phase's events: one prelude, whether the
    preview was refused or the update failed half way (a Deployment's await timing out). The
    summary event says which."""
    result = Result("pulumi up --yes --diff", 1, "", 1.0)
    changes = {"create": 32} if is_preview else {"create": 30, "same": 1}
    summary_event = {"resourceChanges": changes, "maybeCorrupt": False, "durationSeconds": 2, "isPreview": is_preview}
    _read_events(result, [{"preludeEvent": {"config": {}}}, {"summaryEvent": summary_event}])
    assert result.phases == 1 and result.applied is applied
    assert summary._changes(result) == shown


def _report(*steps: StepReport) -> Report:
    plan = Plan("a" * 40, "b" * 40, tuple(Step(s.stack, "update", s.kind, s.reason, None) for s in steps), False)
    return Report("apply", plan, list(steps), 3.0)


def test_the_summary_has_a_row_per_step_with_counts_verdicts_and_readiness() -> None:
    ok = StepReport("exp", "experiment", "update", "changed", result=Result("pulumi up --policy-pack p", 0, "out", 2.5))
    ok.result.changes = {"create": 2, "update": 1}  # type: ignore[union-attr]
    ok.ready = True
    bad = StepReport(
        "exp2", "experiment", "update", "added", outcome=FAILED, result=Result("pulumi up --policy-pack p", 1, "", 1)
    )
    _read_events(bad.result, [_policy("no-latest-image", "mandatory", "runs 'tf:latest'")])  # type: ignore[arg-type]
    skipped = StepReport("exp3", "experiment", "update", "downstream of exp2", outcome=SKIPPED, note="not run: exp2 failed")
    text = summary.markdown(_report(ok, bad, skipped))
    rows = [line for line in text.splitlines() if line.startswith("| ") and "`exp" in line]
    assert len(rows) == 3
    assert "+2 ~1" in rows[0] and "all passed" in rows[0] and "| yes |" in rows[0] and "2.5 s" in rows[0]
    assert "❌ no-latest-image (mandatory)" in rows[1] and "❌ failed" in rows[1]
    assert "no changes proposed, none made" in rows[1]  # the engine stopped at its preview
    assert "⏭️ skipped: not run: exp2 failed" in rows[2]
    assert "**1 stack(s) failed**" in text
    assert "- policy **no-latest-image** (mandatory): runs 'tf:latest'" in text
    bad.result.errors.append("preview failed: 1 policy violation\nmore")  # type: ignore[union-attr]
    assert "- **error**: preview failed: 1 policy violation\n" in summary.markdown(_report(ok, bad, skipped))


def test_cli_output_cannot_close_the_summarys_code_block_and_is_cut_to_its_end() -> None:
    output = "start\n" + "x" * (summary.OUTPUT_LIMIT + 10) + "\n````\n<b>end</b>"
    step = StepReport("exp", "experiment", "update", "changed", result=Result("pulumi preview", 0, output, 1))
    text = summary.markdown(_report(step))
    body = text.split("```", 1)[1]
    assert "start" not in text and "<b>end</b>" in text
    fence = text.split("\n")[[i for i, line in enumerate(text.split("\n")) if line.endswith("text")][0]][:-4]
    assert len(fence) == 5 and body  # longer than the output's own run of 4 backticks


class StackFiles:
    def __init__(self, root: Path) -> None:
        self.root = root
        subprocess.run(["git", "init", "-q", str(root)], check=True)
        (root / "stacks").mkdir()
        (root / "Pulumi.yaml").write_text(yaml.safe_dump({"name": "tfk8s", "stackConfigDir": "stacks"}))

    def write(self, name: str, config: dict[str, Any]) -> None:
        (self.root / "stacks" / f"Pulumi.{name}.yaml").write_text(yaml.safe_dump({"config": config}))
        self.commit()

    def declare(self, team: dict[str, list[str]]) -> None:
        """The team file (tfk8s_gitops.repo.TEAM_FILE)."""
        (self.root / "stacks" / "team.yaml").write_text(yaml.safe_dump(team))
        self.commit()

    def commit(self) -> None:
        for command in (["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "-m", "c"]):
            subprocess.run(["git", "-C", str(self.root), *command], check=True, capture_output=True)


def _args(stack: str, **overrides: Any) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    operator.add_arguments(parser)
    args = parser.parse_args([stack, "--repo", "https://git.example.com/ml/tfk8s.git", "--backend", "s3://b?endpoint=http://s3"])
    for key, value in overrides.items():
        setattr(args, key, value)
    return args


WORKSPACE = identity("exp", "tfk8s-gitops")


@pytest.fixture
def files(tmp_path: Path) -> StackFiles:
    result = StackFiles(tmp_path)
    result.declare({"platforms": ["platform-dev"], "tenants": ["tenant-alice"]})
    result.write(
        "platform-dev", {"tfk8s:kind": "platform", "tfk8s:platform": {"userNode": {"name": "n"}, "storage": {"backend": "local"}}}
    )
    tenant = {"name": "alice", "identities": {"users": ["alice", WORKSPACE]}, "volumes": {"keepOnDestroy": True}}
    result.write("tenant-alice", {"tfk8s:kind": "tenant", "tfk8s:platformStack": "platform-dev", "tfk8s:tenant": tenant})
    clusters = [{"name": "mnist"}]
    result.write("exp", {"tfk8s:kind": "experiment", "tfk8s:namespace": "tfk8s-alice", "tfk8s:clusters": clusters})
    return result


def _by_kind(objects: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for obj in objects:
        found.setdefault(obj["kind"], []).append(obj)
    return found


def test_an_experiments_workspace_is_a_tenant_identity_with_no_cluster_rights(files: StackFiles) -> None:
    objects = _by_kind(operator.render(Repo(files.root), _args("exp")))
    (stack,) = objects["Stack"]
    assert stack["spec"]["stack"] == "organization/tfk8s/exp"
    assert stack["spec"]["destroyOnFinalize"] is True  # its logs are the tenant's
    assert stack["spec"]["prerequisites"] == [{"name": "tfk8s-tenant-alice"}]
    assert [b["roleRef"]["name"] for b in objects["ClusterRoleBinding"]] == ["system:auth-delegator"]
    assert set(stack["spec"]["envRefs"]) == {"PULUMI_CONFIG_PASSPHRASE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}
    assert all(ref["type"] == "Secret" for ref in stack["spec"]["envRefs"].values())


def _secrets_read(stack: dict[str, Any]) -> dict[str, str]:
    return {name: ref["secret"]["name"] for name, ref in stack["spec"]["envRefs"].items()}


def test_an_experiments_workspace_reads_its_tenants_secrets_and_the_teams_stacks_the_teams(files: StackFiles) -> None:
    """The team's passphrase opens every platform's and tenant's secrets; an experiment's workspace
    gets its tenant's passphrase and store keys instead."""
    (experiment,) = _by_kind(operator.render(Repo(files.root), _args("exp")))["Stack"]
    assert _secrets_read(experiment) == {
        "PULUMI_CONFIG_PASSPHRASE": "tfk8s-tenant-alice-passphrase",
        "AWS_ACCESS_KEY_ID": "tfk8s-tenant-alice-s3",
        "AWS_SECRET_ACCESS_KEY": "tfk8s-tenant-alice-s3",
    }
    for stack in ("platform-dev", "tenant-alice"):
        (team,) = _by_kind(operator.render(Repo(files.root), _args(stack)))["Stack"]
        assert set(_secrets_read(team).values()) == {"tfk8s-gitops-passphrase", "tfk8s-gitops-s3"}, stack
    (team,) = _by_kind(operator.render(Repo(files.root), _args("tenant-alice", passphrase_secret="ours")))["Stack"]
    assert _secrets_read(team)["PULUMI_CONFIG_PASSPHRASE"] == "ours"


@pytest.mark.parametrize("flag", ["passphrase_secret", "backend_secret"])
def test_a_secret_named_for_an_experiment_is_refused_it_may_be_the_teams(files: StackFiles, flag: str) -> None:
    option = "--" + flag.replace("_", "-")
    with pytest.raises(
        operator.OperatorError,
        match=rf"{option} tfk8s-gitops-x: an experiment's workspace reads its tenant's Secrets alone, "
        r"tfk8s-tenant-alice-passphrase and tfk8s-tenant-alice-s3 in tfk8s-gitops, never the team's; drop " + option,
    ):
        operator.render(Repo(files.root), _args("exp", **{flag: "tfk8s-gitops-x"}))


def test_scratch_data_keeps_an_experiment_and_a_tenant_follows_keep_on_destroy(files: StackFiles) -> None:
    clusters = [{"name": "mnist", "scratch": {"size": "1Gi"}}]
    files.write("exp", {"tfk8s:kind": "experiment", "tfk8s:namespace": "tfk8s-alice", "tfk8s:clusters": clusters})
    (stack,) = _by_kind(operator.render(Repo(files.root), _args("exp")))["Stack"]
    assert stack["spec"]["destroyOnFinalize"] is False
    tenant = _by_kind(operator.render(Repo(files.root), _args("tenant-alice")))
    assert tenant["Stack"][0]["spec"]["destroyOnFinalize"] is True
    assert {b["roleRef"]["name"] for b in tenant["ClusterRoleBinding"]} == {"system:auth-delegator", "cluster-admin"}
    platform = _by_kind(operator.render(Repo(files.root), _args("platform-dev")))["Stack"][0]
    assert platform["spec"]["destroyOnFinalize"] is False and "prerequisites" not in platform["spec"]


def test_the_team_file_not_the_stack_files_kind_gives_the_operator_workspace_cluster_admin(files: StackFiles) -> None:
    """A merged file that says `kind: tenant` gets no cluster-admin unless the team file declares it."""
    tenant = {"name": "mallory", "identities": {"users": ["mallory"]}}
    files.write("tenant-mallory", {"tfk8s:kind": "tenant", "tfk8s:platformStack": "platform-dev", "tfk8s:tenant": tenant})
    with pytest.raises(operator.OperatorError, match=r"does not declare tenant-mallory among the team's tenants"):
        operator.render(Repo(files.root), _args("tenant-mallory"))
    # A declared tenant whose file now says experiment keeps no admin either: refused.
    files.write("tenant-alice", {"tfk8s:kind": "experiment", "tfk8s:namespace": "tfk8s-alice", "tfk8s:clusters": [{"name": "m"}]})
    with pytest.raises(operator.OperatorError, match=r"declares tenant-alice a tenant: a team stack's file keeps its kind"):
        operator.render(Repo(files.root), _args("tenant-alice"))
    files.declare({"platforms": ["platform-dev"], "tenants": ["tenant-mallory"]})
    bindings = _by_kind(operator.render(Repo(files.root), _args("tenant-mallory")))["ClusterRoleBinding"]
    assert {b["roleRef"]["name"] for b in bindings} == {"system:auth-delegator", "cluster-admin"}


@pytest.mark.parametrize(
    ("stack", "overrides", "match"),
    [
        (
            "exp",
            {"namespace": "elsewhere"},
            r"tfk8s:tenant.identities.users does not list 'system:serviceaccount:elsewhere:tfk8s-exp'",
        ),
        ("exp", {"backend": "file:///tmp/state"}, r"--backend file:///tmp/state: the workspace pod cannot reach"),
        ("exp", {"backend": None}, r"--backend \(unset\)"),
        ("exp", {"resync_seconds": 10}, r"at least 60"),
        ("nope", {}, r"nope: no stack file of that name at HEAD \(have: exp, platform-dev, tenant-alice\)"),
    ],
    ids=["workspace-not-a-tenant-identity", "file-backend", "no-backend", "resync-too-often", "unknown-stack"],
)
def test_what_the_operator_cannot_run_is_refused_with_the_fix(
    files: StackFiles, stack: str, overrides: dict[str, Any], match: str
) -> None:
    with pytest.raises(operator.OperatorError, match=match):
        operator.render(Repo(files.root), _args(stack, **overrides))


def test_an_experiments_workspace_outside_the_gitops_namespace_is_refused_as_its_tenant_would(files: StackFiles) -> None:
    """A tenant accepts service accounts of its own namespace and of tfk8s-gitops alone (tfk8s.checks.tenant)."""
    elsewhere = identity("exp", "elsewhere")
    tenant = {"name": "alice", "identities": {"users": ["alice", elsewhere]}}
    files.write("tenant-alice", {"tfk8s:kind": "tenant", "tfk8s:platformStack": "platform-dev", "tfk8s:tenant": tenant})
    with pytest.raises(
        operator.OperatorError, match=r"--namespace: a tenant accepts service accounts of its own namespace and of "
    ):
        operator.render(Repo(files.root), _args("exp", namespace="elsewhere"))


def test_a_secret_of_another_kind_in_a_stack_file_is_the_programs_own_error(files: StackFiles) -> None:
    clusters = [{"name": "mnist"}]
    files.write(
        "exp",
        {"tfk8s:kind": "experiment", "tfk8s:namespace": "tfk8s-alice", "tfk8s:clusters": clusters, "tfk8s:jupyterToken": "x"},
    )
    with pytest.raises(ConfigError, match="tfk8s:jupyterToken: is a secret of tenant stacks, not of experiment stacks"):
        operator.render(Repo(files.root), _args("exp"))


def test_an_invalid_stack_file_is_the_programs_own_error(files: StackFiles) -> None:
    files.write("exp", {"tfk8s:kind": "experiment", "tfk8s:namespace": "tfk8s-alice", "tfk8s:clusters": []})
    with pytest.raises(ConfigError, match="tfk8s:clusters"):
        operator.render(Repo(files.root), _args("exp"))
