"""The experimenter's permission table and the access check, against a fake API server's reviews.

The fake grants rules as RBAC would store them (rules_for_role's output) and answers both kinds of
review from them; the real API server's answers are checked in tests/e2e/test_identity.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mocked_program import facts_for, stack_config
from tfk8s.checks import access
from tfk8s.kube import api_paths
from tfk8s.settings.contract import PlatformFacts
from tfk8s.specs import experimenter_rights

GOLDEN = Path(__file__).resolve().parent / "golden"
NAMESPACE = "tfk8s-alice"
ALICE = {"username": "alice", "groups": ["tfk8s-users", "system:authenticated"]}
# The platform the golden manifests were rendered against (mocked_program.facts_for).
LAYOUTS = PlatformFacts.model_validate(facts_for(stack_config("platform-dev")), strict=False).layouts
TABLE = experimenter_rights.experimenter_rules(LAYOUTS)


class FakeApi:
    """Reviews answered from `rules` (Role rules in `namespace`); records every request."""

    def __init__(self, rules: list[dict[str, Any]], *, rules_review: bool = True, user: dict[str, Any] | None = ALICE) -> None:
        self.rules, self.rules_review, self.user = rules, rules_review, user
        self.requests: list[tuple[str, dict[str, Any]]] = []

    def _allows(self, attributes: dict[str, Any]) -> bool:
        if attributes.get("namespace") != NAMESPACE:
            return False
        resource = attributes["resource"] + (f"/{attributes['subresource']}" if attributes.get("subresource") else "")
        return any(
            attributes["group"] in r["apiGroups"]
            and resource in r["resources"]
            and attributes["verb"] in r["verbs"]
            and (not r.get("resourceNames") or attributes.get("name") in r["resourceNames"])
            for r in self.rules
        )

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.requests.append((path, body))
        if path == access.RULES_REVIEW and self.rules_review:
            listed = self.rules if body["spec"]["namespace"] == NAMESPACE else []
            return {"status": {"resourceRules": listed, "incomplete": False}}
        if path == access.ACCESS_REVIEW:
            return {"status": {"allowed": self._allows(body["spec"]["resourceAttributes"])}}
        if path == access.SUBJECT_REVIEW and self.user:
            return {"status": {"userInfo": self.user}}
        raise RuntimeError(f"POST {path}: HTTP 404 Not Found")


def without(rules: list[dict[str, Any]], resource: str, verb: str) -> list[dict[str, Any]]:
    return [{**r, "verbs": [v for v in r["verbs"] if not (r["resources"] == [resource] and v == verb)]} for r in rules]


def test_a_full_grant_is_one_request_and_no_refusal() -> None:
    api = FakeApi(experimenter_rights.rules_for_role(TABLE))
    missed = access.missing(api.post, NAMESPACE, TABLE)
    assert missed == []
    assert access.refusals(missed, access.identity(api.post), NAMESPACE, "tfk8s:user") == []
    assert [path for path, _ in api.requests] == [access.RULES_REVIEW, access.SUBJECT_REVIEW]


def test_a_missing_verb_is_one_message_naming_who_where_what_and_the_fix() -> None:
    api = FakeApi(without(experimenter_rights.rules_for_role(TABLE), "events", "watch"))
    missed = access.missing(api.post, NAMESPACE, TABLE)
    assert [(p.resource, verb) for p, verb in missed] == [("events", "watch")]
    (message,) = access.refusals(missed, access.identity(api.post), NAMESPACE, "tfk8s:user")
    assert message.startswith("tfk8s:user: user 'alice' (groups tfk8s-users) may not watch events in namespace 'tfk8s-alice'")
    assert "add user 'alice' (groups tfk8s-users) to the tenant's identities (tfk8s:tenant.identities)" in message
    assert "`pulumi up` the tenant stack" in message
    # Only what the listed rules did not show was asked one by one.
    assert [path for path, _ in api.requests].count(access.ACCESS_REVIEW) == 1


def test_a_namespace_without_a_binding_refuses_every_rule_with_its_verbs() -> None:
    api = FakeApi(experimenter_rights.rules_for_role(TABLE))
    missed = access.missing(api.post, "tfk8s-bob", TABLE)
    assert len(missed) == sum(len(p.verbs) for p in TABLE)
    (message,) = access.refusals(missed, access.UNKNOWN_IDENTITY, "tfk8s-bob", "tfk8s:user")
    assert message.startswith("tfk8s:user: the kubeconfig's identity may not get namespaces; ")
    assert "; create, patch, get, list, watch or delete deployments.apps; " in message
    assert f"in namespace 'tfk8s-bob' ({len(TABLE)} of the experimenter role's rules)" in message
    assert message.count("tfk8s:tenant.identities") == 1 and "\n" not in message


@pytest.mark.parametrize(
    "rules",
    [
        pytest.param([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}], id="wildcards (cluster-admin)"),
        pytest.param([], id="rules from another authorizer the rules review does not list"),
    ],
)
def test_grants_the_listed_rules_do_not_spell_out_are_still_grants(rules: list[dict[str, Any]]) -> None:
    """Wildcards are matched as RBAC matches them; what the listed rules do not show is asked one by one."""
    api = FakeApi(experimenter_rights.rules_for_role(TABLE))
    real_post = api.post

    def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
        if path == access.RULES_REVIEW:
            return {"status": {"resourceRules": rules, "incomplete": True}}
        return real_post(path, body)

    assert access.missing(post, NAMESPACE, TABLE) == []


def test_without_a_rules_review_each_distinct_question_is_asked_once() -> None:
    api = FakeApi(experimenter_rights.rules_for_role(TABLE), rules_review=False)
    assert access.missing(api.post, NAMESPACE, [*TABLE, *TABLE]) == []
    asked = [json.dumps(body, sort_keys=True) for path, body in api.requests if path == access.ACCESS_REVIEW]
    assert len(asked) == len(set(asked)) == sum(len(p.verbs) for p in TABLE)


def test_a_cluster_scoped_rule_is_asked_without_a_namespace_and_by_name() -> None:
    (storage_class,) = experimenter_rights.experimenter_cluster_rules("tfk8s-scratch")
    api = FakeApi([])
    assert access.missing(api.post, NAMESPACE, [storage_class]) == [(storage_class, "get")]
    (_, body) = api.requests[-1]
    assert body["spec"]["resourceAttributes"] == {
        "verb": "get",
        "group": "storage.k8s.io",
        "resource": "storageclasses",
        "name": "tfk8s-scratch",
    }
    (message,) = access.refusals([(storage_class, "get")], "user 'alice'", NAMESPACE, "tfk8s:user")
    assert "may not get storageclasses.storage.k8s.io 'tfk8s-scratch' cluster-wide" in message
    assert experimenter_rights.experimenter_cluster_rules(None) == ()


@pytest.mark.parametrize(
    ("user", "expected"),
    [
        (ALICE, "user 'alice' (groups tfk8s-users)"),
        ({"username": "ci", "groups": ["system:authenticated"]}, "user 'ci'"),
        (None, access.UNKNOWN_IDENTITY),  # before Kubernetes 1.28: no SelfSubjectReview
    ],
    ids=["user and groups", "user alone", "older server"],
)
def test_the_identity_is_named_as_the_api_server_reports_it(user: dict[str, Any] | None, expected: str) -> None:
    assert access.identity(FakeApi([], user=user).post) == expected


def test_rules_render_as_role_rules() -> None:
    rules = experimenter_rights.rules_for_role(TABLE + experimenter_rights.experimenter_cluster_rules("tfk8s-scratch"))
    assert rules[0] == {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"]}
    assert rules[-1]["resourceNames"] == ["tfk8s-scratch"]
    assert all(set(r) <= {"apiGroups", "resources", "verbs", "resourceNames"} for r in rules)


_PLURALS = {k.kind: k.plural for k in vars(api_paths).values() if isinstance(k, api_paths.ApiKind)}


def _experiment_kinds(*, queued: bool = False) -> set[tuple[str, str]]:
    """(API group, resource) of every Kubernetes object the experiment goldens declare, those of
    experiments on a queueing platform (`queued`: each training cluster a JobSet) or the others."""
    kinds = set()
    for path in sorted(GOLDEN.glob("*.jsonl")):
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        if not any(row["type"] == "tfk8s:index:Experiment" for row in rows):
            continue  # a platform stack's manifests
        if any(row["type"].endswith(":JobSet") for row in rows) is not queued:
            continue
        for row in rows:
            api_version, kind = row["inputs"].get("apiVersion"), row["inputs"].get("kind")
            if api_version and kind:
                group = api_version.rpartition("/")[0]
                # The API's plural where api_paths knows the kind (NetworkPolicy: networkpolicies), else
                # the regular one; the Layout's plural is the platform's.
                plural = _PLURALS.get(kind, f"{kind.lower()}s")
                kinds.add((group, LAYOUTS.plural if (group, kind) == (LAYOUTS.group, LAYOUTS.kind) else plural))
    return kinds


@pytest.mark.parametrize("queued", [False, True], ids=["jobs-and-deployments", "queued-jobsets"])
def test_every_kind_an_experiment_creates_can_be_applied_read_and_deleted(queued: bool) -> None:
    kinds = _experiment_kinds(queued=queued)
    assert (LAYOUTS.group, LAYOUTS.plural) in kinds
    assert (("jobset.x-k8s.io", "jobsets") if queued else ("apps", "deployments")) in kinds
    verbs: dict[tuple[str, str], set[str]] = {}
    for p in experimenter_rights.experimenter_rules(LAYOUTS, queueing=queued):
        verbs.setdefault((p.api_group, p.resource), set()).update(p.verbs)
    for kind in sorted(kinds):
        assert {"create", "patch", "get", "delete"} <= verbs.get(kind, set()), kind


# --- the experiment's preflight (program.refuse_without_access) ---------------------------------------


def reviews(denied: set[tuple[str, str]]) -> tuple[Any, list[str]]:
    """A `post` answering as an authorizer the rules review lists nothing of (as for a webhook
    authorizer): every (verb, resource) allowed but `denied`; the caller is alice. And the paths asked."""
    asked: list[str] = []

    def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
        asked.append(path)
        if path == access.RULES_REVIEW:
            return {"status": {"resourceRules": [], "incomplete": True}}
        if path == access.ACCESS_REVIEW:
            attributes = body["spec"]["resourceAttributes"]
            return {"status": {"allowed": (attributes["verb"], attributes["resource"]) not in denied}}
        if path == access.SUBJECT_REVIEW:
            return {"status": {"userInfo": {"username": "alice", "groups": ["system:authenticated"]}}}
        raise AssertionError(f"unexpected POST {path}")

    return post, asked


def test_an_experiment_its_caller_may_not_run_is_refused_before_any_read_or_declaration(
    dev_config: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from mocked_program import run_program
    from tfk8s.errors import AccessDenied
    from tfk8s.stack_kinds import experiment as experiment_stack

    monkeypatch.setattr(experiment_stack, "build", lambda *args, **kwargs: pytest.fail("declared resources"))
    reads: list[str] = []
    post, asked = reviews({("create", "jobs")})
    with pytest.raises(AccessDenied) as error:
        run_program(dev_config, post=post, read=lambda path: reads.append(path), read_whole=lambda path: reads.append(path))
    message = str(error.value)
    assert message.startswith("refusing: nothing was changed:\n  - tfk8s:namespace: user 'alice' may not create jobs.batch")
    assert "in namespace 'tfk8s-alice'" in message and "tfk8s:tenant.identities" in message
    assert message.count("\n  - ") == 1  # only what is missing
    assert reads == []  # asked before the namespace's owner or the quota is read
    assert asked[0] == access.RULES_REVIEW and access.SUBJECT_REVIEW in asked


def test_an_experiment_its_caller_may_run_proceeds(dev_config: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    from mocked_program import run_program
    from tfk8s.stack_kinds import experiment as experiment_stack

    declared: list[bool] = []
    monkeypatch.setattr(experiment_stack, "build", lambda *args, **kwargs: declared.append(True) or {})
    post, asked = reviews(set())
    run_program(dev_config, post=post)
    assert declared == [True]
    # Each rule the program needs asked, none refused; not `kubectl logs`, which only people use.
    assert asked.count(access.ACCESS_REVIEW) == sum(len(p.verbs) for p in experimenter_rights.program_rules(LAYOUTS))
    assert not [p for p in experimenter_rights.program_rules(LAYOUTS) if p.resource == "pods/log"]
    assert [p.resource for p in TABLE if p.resource in experimenter_rights.FOR_PEOPLE] == ["pods/log"]
    assert access.SUBJECT_REVIEW not in asked  # nobody to name


# --- a platform that queues: a training cluster is one JobSet (issue 38) -----------------------------

QUEUED_TABLE = experimenter_rights.experimenter_rules(LAYOUTS, queueing=True)


def verbs_of(table: tuple[experimenter_rights.Permission, ...]) -> dict[tuple[str, str], set[str]]:
    found: dict[tuple[str, str], set[str]] = {}
    for p in table:
        found.setdefault((p.api_group, p.resource), set()).update(p.verbs)
    return found


def test_without_queueing_the_table_is_todays() -> None:
    assert experimenter_rights.experimenter_rules(LAYOUTS, queueing=False) == TABLE


def test_a_queued_experiment_applies_jobsets_and_creates_no_workload_of_another_kind() -> None:
    queued, today = verbs_of(QUEUED_TABLE), verbs_of(TABLE)
    assert queued[("jobset.x-k8s.io", "jobsets")] == set(experimenter_rights.MANAGED)
    # What only the PS's Deployments, the worker Jobs and the PS retirement needed: read and deleted
    # (clusters declared before the platform queued), never created or changed.
    for kind in (
        ("", "serviceaccounts"),
        ("apps", "deployments"),
        ("batch", "jobs"),
        ("rbac.authorization.k8s.io", "roles"),
        ("rbac.authorization.k8s.io", "rolebindings"),
    ):
        assert queued[kind] == {"get", "list", "watch", "delete"}, kind
    # Nothing needs these: the PS retirement Role's grant and its binding's preview, and the awaits of
    # Deployments and of Job Services.
    for kind in (("apps", "deployments/scale"), ("apps", "replicasets"), ("", "endpoints")):
        assert kind not in queued, kind
    # Everything else is as today: a smaller grant, plus JobSets.
    unchanged = set(today) - {("", "serviceaccounts"), ("apps", "deployments"), ("batch", "jobs")}
    unchanged -= {("rbac.authorization.k8s.io", "roles"), ("rbac.authorization.k8s.io", "rolebindings")}
    unchanged -= {("apps", "deployments/scale"), ("apps", "replicasets"), ("", "endpoints")}
    assert {k: queued[k] for k in unchanged} == {k: today[k] for k in unchanged}
    assert queued[("kueue.x-k8s.io", "workloads")] == {"get", "list"}  # readiness reads its clusters' Workloads
    assert set(queued) == unchanged | {("jobset.x-k8s.io", "jobsets"), ("kueue.x-k8s.io", "workloads")} | {
        ("", "serviceaccounts"),
        ("apps", "deployments"),
        ("batch", "jobs"),
        ("rbac.authorization.k8s.io", "roles"),
        ("rbac.authorization.k8s.io", "rolebindings"),
    }


def test_a_queued_experiment_is_refused_without_jobsets_before_any_read(
    dev_config: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from mocked_program import run_program
    from test_queued_cluster import queueing_facts
    from tfk8s.errors import AccessDenied
    from tfk8s.stack_kinds import experiment as experiment_stack

    monkeypatch.setattr(experiment_stack, "build", lambda *args, **kwargs: pytest.fail("declared resources"))
    post, asked = reviews({("patch", "jobsets")})
    with pytest.raises(AccessDenied, match=r"may not patch jobsets\.jobset\.x-k8s\.io in namespace 'tfk8s-alice'"):
        run_program(dev_config, platform=queueing_facts(), post=post)
    # The queued table is what was asked, one question per verb: no create of Jobs or Deployments among them.
    assert asked.count(access.ACCESS_REVIEW) == sum(
        len(p.verbs) for p in experimenter_rights.program_rules(LAYOUTS, queueing=True)
    )
