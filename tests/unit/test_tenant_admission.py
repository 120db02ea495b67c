"""The platform's admission policies for its tenants' namespaces, as declared (tfk8s.components.tenant_admission).

What they refuse is proven against the real API server with a tenant's own certificate
(tests/e2e/test_tenant_boundary.py); here: that the platform declares them, each bound with Deny,
selecting its own tenants' namespaces only, binding everyone but the platform team and the
controllers, with the platform's User Node and placement settings in them; and that a tenant's
namespace carries the label they select.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pytest
from mocked_program import after, facts_for, run_program
from tfk8s.components import guard
from tfk8s.settings.contract import PlatformKind
from tfk8s.settings.platform import PlacementSettings, UserNodeSettings
from tfk8s.specs import experimenter_rights, tenant_admission
from tfk8s.specs.labels import TENANT_NAMESPACE

VAP = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
BINDING = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"
NAMESPACE = "kubernetes:core/v1:Namespace"
TENANTS = PlatformKind(group="p1.layouts.tfk8s.io", version="v1", kind="Tenant", plural="tenants", namespaced=False)
EVERYONE_BOUND = {"pod-storage"}  # about the pod itself, whoever creates it: controllers too


def declared(d: Any) -> tuple[list[Any], list[Any]]:
    """The admission policies (the guards are the ones with params) and every binding."""
    return [r for r in d.mocks.of_type(VAP) if "paramKind" not in r.inputs["spec"]], d.mocks.of_type(BINDING)


def test_the_platform_binds_each_policy_with_deny_in_its_own_tenants_namespaces(platform_config: dict[str, Any]) -> None:
    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        d = run_program(platform_config)

        def check() -> None:
            policies, bindings = declared(d)
            (crd,) = [
                r
                for r in d.mocks.of_type("kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition")
                if "tenants." in r.inputs["metadata"]["name"]
            ]
            group = crd.inputs["spec"]["group"]
            assert len(policies) == len(
                tenant_admission.policies(group, TENANTS, UserNodeSettings(name="n"), PlacementSettings())
            )
            bound = {b.inputs["spec"]["policyName"]: b.inputs["spec"] for b in bindings}
            for policy in policies:
                spec = policy.inputs["spec"]
                assert bound[f"{policy.name}-auto"] == {"policyName": f"{policy.name}-auto", "validationActions": ["Deny"]}
                assert spec["failurePolicy"] == "Fail"
                # Only namespaces labelled with this platform's group: a second platform's tenants are its own.
                assert spec["matchConstraints"]["namespaceSelector"] == {"matchLabels": {TENANT_NAMESPACE: group}}
                conditions = "\n".join(c["expression"] for c in spec["matchConditions"])
                if policy.name.endswith(tuple(EVERYONE_BOUND)):
                    assert conditions == ""
                else:
                    # The platform team: whoever may register this platform's tenants.
                    assert f'authorizer.group("{group}").resource("tenants").check(\'create\')' in conditions
                    # Kubernetes' own controllers by name; no other kube-system account (a CNI's, an add-on's).
                    assert '"system:serviceaccount:kube-system:job-controller"' in conditions
                    assert "startsWith" not in conditions and "kube-system:default" not in conditions
                assert policy.inputs["metadata"]["labels"]["tfk8s.io/stack-kind"] == "platform"
            # The experimenter role, which every tenant binds, goes first on destroy: after it, the policies.
            (role,) = d.mocks.of_type("kubernetes:rbac.authorization.k8s.io/v1:ClusterRole")
            depends = {
                getattr(r, "_name", None)
                for r in d.options[f"kubernetes:rbac.authorization.k8s.io/v1:ClusterRole::{role.name}"].depends_on
            }
            assert "tenant-admission" in depends

        return after(d, check)

    run()


def test_a_platform_without_admission_policies_declares_none_and_warns(platform_config: dict[str, Any]) -> None:
    platform_config["platform"]["kubernetesVersion"] = "1.25"

    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        d = run_program(platform_config)

        def check() -> None:
            assert d.mocks.of_type(VAP) == [] and d.mocks.of_type(BINDING) == []

        return after(d, check)

    run()


def test_a_tenants_namespace_is_labelled_for_its_platforms_policies(
    platform_config: dict[str, Any], tenant_config: dict[str, Any]
) -> None:
    facts = facts_for(platform_config)

    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        d = run_program(tenant_config, platform=facts)

        def check() -> None:
            (namespace,) = d.mocks.of_type(NAMESPACE)
            assert namespace.inputs["metadata"]["labels"][TENANT_NAMESPACE] == facts["layouts"]["group"]

        return after(d, check)

    run()


def validations(name: str, **settings: Any) -> str:
    user_node = UserNodeSettings(name="gpu-gateway", taint_key="example.com/users")
    specs = tenant_admission.policies("p1.layouts.tfk8s.io", TENANTS, user_node, PlacementSettings(**settings))
    return "\n".join(v["expression"] for v in specs[name]["validations"])


def test_placement_names_the_platforms_user_node_and_control_plane() -> None:
    rules = validations("pod-placement")
    assert '"example.com/users"' in rules and '"gpu-gateway"' in rules and '"node-role.kubernetes.io/"' in rules
    assert "nodeName" in rules and "tolerations" in rules and "nodeSelector" in rules and "variables.nodeTerms" in rules
    # No priority class but none at all, unless the platform lists some.
    assert "priorityClassName.orValue('') in [\"\"]" in rules
    assert 'in ["", "tfk8s-batch"]' in validations("pod-placement", priority_classes=["tfk8s-batch"])


@pytest.mark.parametrize(
    ("setting", "value", "expected"),
    [
        ("toleration_keys", ["nvidia.com/gpu"], 't.key in ["nvidia.com/gpu"]'),
        ("node_selector_keys", ["example.com/gpu"], 'k in ["example.com/gpu"]'),
    ],
    ids=["tolerations", "selectors"],
)
def test_placement_enforces_the_platforms_allow_lists_when_it_has_them(setting: str, value: list[str], expected: str) -> None:
    assert expected not in validations("pod-placement")
    assert expected in validations("pod-placement", **{setting: value})


def test_every_workload_kind_with_a_pod_template_is_checked() -> None:
    specs = tenant_admission.policies("p1.layouts.tfk8s.io", TENANTS, UserNodeSettings(name="n"), PlacementSettings())
    kinds = {
        (group, resource)
        for name in ("pod-placement", "template-placement", "cronjob-placement")
        for rule in specs[name]["matchConstraints"]["resourceRules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    assert kinds == {
        ("", "pods"),
        ("", "replicationcontrollers"),
        ("apps", "deployments"),
        ("apps", "replicasets"),
        ("apps", "statefulsets"),
        ("apps", "daemonsets"),
        ("batch", "jobs"),
        ("batch", "cronjobs"),
    }


# --- a platform that queues: its experiments are JobSets (issue 38) ----------------------------------

CLUSTER_ROLE = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole"
QUEUEING = {"enabled": True, "capacity": {"cpu": "64", "memory": "256Gi", "gpus": 8}}


def kueue_and_jobset_served(path: str) -> Any:
    """`read_whole` of a cluster that serves Kueue's and JobSet's kinds (tfk8s.checks.queueing) and has the User Node."""
    return {
        "/apis/kueue.x-k8s.io/v1beta2": {"resources": [{"name": "clusterqueues"}]},
        "/apis/jobset.x-k8s.io/v1alpha2": {"resources": [{"name": "jobsets"}]},
        "/api/v1/nodes/tfk8s-user-node": {"metadata": {"name": "tfk8s-user-node"}, "spec": {}, "status": {}},
    }.get(path)


@pytest.mark.parametrize("queueing", [False, True], ids=["without-queueing", "queueing"])
def test_only_a_queueing_platform_checks_jobsets_and_lets_its_experimenters_apply_them(
    platform_config: dict[str, Any], queueing: bool
) -> None:
    api_server = {"cidrs": ["10.0.0.1/32"], "ports": [6443]}
    platform_config["platform"]["network"] = {"apiServer": api_server, "podCidrs": ["10.244.0.0/16"]}
    if queueing:
        platform_config["platform"]["queueing"] = QUEUEING

    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        d = run_program(platform_config, read_whole=kueue_and_jobset_served)

        def check() -> None:
            policies, _ = declared(d)
            checked = {
                (group, resource)
                for p in policies
                for rule in p.inputs["spec"]["matchConstraints"]["resourceRules"]
                for group in rule["apiGroups"]
                for resource in rule["resources"]
            }
            assert (("jobset.x-k8s.io", "jobsets") in checked) is queueing
            expected = tenant_admission.policies("g", TENANTS, UserNodeSettings(name="n"), PlacementSettings(), queueing=queueing)
            assert len(policies) == len(expected)
            # The experimenter role every tenant binds: the queued table (tfk8s.specs.experimenter_rights), JobSets in it.
            (role,) = d.mocks.of_type(CLUSTER_ROLE)
            (crd,) = [
                r
                for r in d.mocks.of_type("kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition")
                if r.inputs["metadata"]["name"].startswith("tenants.")
            ]
            layouts = guard.layout_kind(crd.inputs["spec"]["group"])
            assert role.inputs["rules"] == experimenter_rights.rules_for_role(
                experimenter_rights.experimenter_rules(layouts, queueing=queueing)
            )
            applies_jobsets = any(
                r["apiGroups"] == ["jobset.x-k8s.io"] and r["resources"] == ["jobsets"] and "patch" in r["verbs"]
                for r in role.inputs["rules"]
            )
            assert applies_jobsets is queueing

        return after(d, check)

    run()


def specs_for(*, queueing: bool, **settings: Any) -> dict[str, dict[str, Any]]:
    user_node = UserNodeSettings(name="gpu-gateway", taint_key="example.com/users")
    return tenant_admission.policies("p1.layouts.tfk8s.io", TENANTS, user_node, PlacementSettings(**settings), queueing=queueing)


def test_queueing_adds_the_jobset_policies_and_changes_no_other() -> None:
    without, queued = specs_for(queueing=False), specs_for(queueing=True)
    assert set(queued) - set(without) == {"jobset-placement", "jobset-resume"}
    assert {name: spec for name, spec in queued.items() if not name.startswith("jobset-")} == without
    assert queued["jobset-placement"]["matchConstraints"]["resourceRules"] == [
        {"apiGroups": ["jobset.x-k8s.io"], "apiVersions": ["*"], "resources": ["jobsets"], "operations": ["CREATE", "UPDATE"]}
    ]
    # Bound like the other placement policies: everyone but the platform team and Kubernetes' controllers.
    assert queued["jobset-placement"]["matchConditions"] == queued["template-placement"]["matchConditions"]
    # A resume binds Kueue's own account out too, and no one else more.
    resume = queued["jobset-resume"]
    assert resume["matchConstraints"]["resourceRules"][0]["operations"] == ["UPDATE"]
    assert resume["matchConditions"][:-1] == queued["template-placement"]["matchConditions"]
    assert resume["matchConditions"][-1]["expression"] == (
        'request.userInfo.username != "system:serviceaccount:kueue-system:kueue-controller-manager"'
    )


@pytest.mark.parametrize(
    "settings",
    [{}, {"toleration_keys": ["nvidia.com/gpu"], "node_selector_keys": ["example.com/gpu"], "priority_classes": ["batch"]}],
    ids=["defaults", "allow-lists"],
)
def test_every_replicated_jobs_pod_template_gets_each_placement_rule_of_a_pod(settings: dict[str, Any]) -> None:
    """The same rules, with the platform's settings in them, on each replicated Job's pod spec and its
    node terms instead of the pod policies' variables (the JobSet policy has none)."""
    specs = specs_for(queueing=True, **settings)
    pod, js = specs["pod-placement"]["validations"], specs["jobset-placement"]["validations"]
    spec = "rj.template.spec.template.spec"
    (terms,) = [v["expression"] for v in specs["pod-placement"]["variables"] if v["name"] == "nodeTerms"]
    terms = terms.replace("object.spec", spec)
    assert "variables" not in specs["jobset-placement"]
    assert len(js) == len(pod) + 1  # and the queue
    for of_pod, of_jobset in zip(pod, js, strict=False):
        rule = of_pod["expression"].replace("variables.spec", spec).replace("variables.nodeTerms", f"({terms})")
        assert of_jobset["expression"] == (
            f"object.?spec.?replicatedJobs.orValue([]).all(rj, !has(rj.template.spec) || !has({spec}) || ({rule}))"
        )
        assert of_jobset["message"].endswith(of_pod["message"]) and "spec.replicatedJobs[*]" in of_jobset["message"]


def test_a_tenants_jobset_must_wait_in_her_local_queue() -> None:
    queue = specs_for(queueing=True)["jobset-placement"]["validations"][-1]
    assert '[?"kueue.x-k8s.io/queue-name"]' in queue["expression"] and '== "experiments"' in queue["expression"]
    assert "kueue.x-k8s.io/queue-name: experiments" in queue["message"]
