"""Pod security: every pod tfk8s declares passes the `restricted` Pod Security Standard (checked by
the rules of restricted_profile on every pod template of every golden case), tenants' namespaces
enforce it at the platform's Kubernetes version, and only the pods that call the API get a token."""

from __future__ import annotations

import copy
from typing import Any

import pulumi
import pytest
from mocked_program import DEPLOYMENT, JOB, after, facts_for, pod_labels, pod_spec, run_program, stack_config
from restricted_profile import violations
from test_golden_manifests import CASES
from tfk8s.errors import ConfigError
from tfk8s.settings.platform import PodIdentity
from tfk8s.settings.stack_file import validate
from tfk8s.specs import pod_security

NAMESPACE = "kubernetes:core/v1:Namespace"
JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
ROLE = "kubernetes:rbac.authorization.k8s.io/v1:Role"


def pod_templates(d: Any) -> list[tuple[str, dict[str, Any]]]:
    """(resource name, pod template) of every Deployment and Job the run declared, and of each
    replicated Job of every JobSet (a queued training cluster)."""
    found = [(r.name, r.inputs["spec"]["template"]) for r in d.mocks.of_type(DEPLOYMENT) + d.mocks.of_type(JOB)]
    for jobset in d.mocks.of_type(JOBSET):
        for replicated in jobset.inputs["spec"]["replicatedJobs"]:
            found.append((f"{jobset.name}/{replicated['name']}", replicated["template"]["spec"]["template"]))
    return found


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_pod_of_every_stack_passes_the_restricted_profile(case: str) -> None:
    raw, platform, secrets = CASES[case]

    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        d = run_program(raw(), secrets=secrets, platform=platform(), stack=case)

        def check() -> None:
            templates = pod_templates(d)
            # A platform runs no pod of its own: its tenants run Jupyter and TensorBoard.
            assert bool(templates) is (raw()["kind"] != "platform"), f"{case} declares {len(templates)} pods"
            for name, template in templates:
                spec = template["spec"]
                assert violations(spec, template["metadata"].get("annotations")) == [], name
                # Beyond the profile: each container's root filesystem is read-only but Jupyter's,
                # and what a read-only one writes has an emptyDir at /tmp, its HOME.
                for container in [*spec["containers"], *spec.get("initContainers", [])]:
                    read_only = container["securityContext"]["readOnlyRootFilesystem"]
                    assert read_only is (container["name"] != "jupyter"), (name, container["name"])
                    if read_only and container["name"] != "fetch-code":
                        assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
                        assert {"name": "HOME", "value": "/tmp"} in container["env"]
                        assert {"name": "tmp", "emptyDir": {"sizeLimit": "2Gi"}} in spec["volumes"]
                # Every emptyDir bounded (tfk8s.components.tenant_admission refuses one without a sizeLimit).
                for volume in spec["volumes"]:
                    assert "emptyDir" not in volume or volume["emptyDir"].get("sizeLimit"), (name, volume)

        return after(d, check)

    run()


def _good_pod() -> dict[str, Any]:
    return {
        "securityContext": pod_security.pod_security_context(PodIdentity(run_as_user=1000, run_as_group=1000, fs_group=1000)),
        "containers": [{"name": "c", "securityContext": pod_security.container_security_context(read_only_root=True)}],
        "volumes": [{"name": "tmp", "emptyDir": {}}, {"name": "data", "persistentVolumeClaim": {"claimName": "d"}}],
    }


def test_the_pods_of_before_break_the_rules_restricted_adds_and_the_built_contexts_keep_them() -> None:
    """What the API server refused in tfk8s's pods before they had securityContexts."""
    assert violations(_good_pod()) == []
    bare = violations({"containers": [{"name": "tensorflow"}], "initContainers": [{"name": "fetch-code"}]})
    for container in ("containers[0] (tensorflow)", "initContainers[0] (fetch-code)"):
        for rule in ("allowPrivilegeEscalation", "runAsNonRoot", "seccompProfile", "capabilities.drop"):
            assert any(line.startswith(f"{container}.securityContext.{rule}") for line in bare), (container, rule, bare)


def _break(path: str, value: Any) -> dict[str, Any]:
    pod = copy.deepcopy(_good_pod())
    *parents, last = path.split(".")
    target: Any = pod
    for key in parents:
        target = target[int(key)] if isinstance(target, list) else target.setdefault(key, {})
    target[last] = value
    return pod


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("containers.0.securityContext.privileged", True),
        ("containers.0.securityContext.allowPrivilegeEscalation", True),
        ("containers.0.securityContext.runAsNonRoot", False),
        ("containers.0.securityContext.runAsUser", 0),
        ("containers.0.securityContext.capabilities", {"drop": ["NET_RAW"]}),
        ("containers.0.securityContext.capabilities", {"drop": ["ALL"], "add": ["SYS_ADMIN"]}),
        ("containers.0.securityContext.seccompProfile", {"type": "Unconfined"}),
        ("containers.0.securityContext.procMount", "Unmasked"),
        ("containers.0.securityContext.seLinuxOptions", {"type": "spc_t"}),
        ("containers.0.securityContext.appArmorProfile", {"type": "Unconfined"}),
        ("containers.0.securityContext.windowsOptions", {"hostProcess": True}),
        ("containers.0.ports", [{"containerPort": 80, "hostPort": 80}]),
        ("securityContext.runAsNonRoot", False),
        ("securityContext.runAsUser", 0),
        ("securityContext.seccompProfile", None),
        ("securityContext.sysctls", [{"name": "kernel.msgmax", "value": "1"}]),
        ("hostNetwork", True),
        ("hostPID", True),
        ("hostIPC", True),
        ("volumes", [{"name": "h", "hostPath": {"path": "/"}}]),
        ("volumes", [{"name": "n", "nfs": {"server": "s", "path": "/"}}]),
    ],
)
def test_the_checker_refuses_each_rule_it_knows(path: str, value: Any) -> None:
    assert violations(_break(path, value)) != []


def test_the_checker_allows_what_restricted_allows() -> None:
    assert violations(_break("containers.0.securityContext.capabilities", {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]})) == []
    assert violations(_break("securityContext.sysctls", [{"name": "net.ipv4.ip_local_port_range", "value": "1 2"}])) == []
    # runAsNonRoot and seccomp may be the containers' instead of the pod's.
    pod = _good_pod()
    del pod["securityContext"]["runAsNonRoot"], pod["securityContext"]["seccompProfile"]
    assert violations(pod) != []
    pod["containers"][0]["securityContext"]["seccompProfile"] = {"type": "Localhost", "localhostProfile": "p.json"}
    assert violations(pod) == []


@pytest.mark.parametrize("version", ["1.34", "1.25"])
def test_tenants_namespaces_enforce_restricted_at_the_platforms_version(version: str) -> None:
    platform = facts_for(stack_config("platform-dev"))
    platform["kubernetesVersion"] = version

    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        d = run_program(copy.deepcopy(stack_config("tenant-alice")), platform=platform)

        def check() -> None:
            namespaces = d.mocks.of_type(NAMESPACE)
            assert len(namespaces) == 1
            for namespace in namespaces:
                labels = namespace.inputs["metadata"]["labels"]
                for mode in ("enforce", "warn", "audit"):
                    assert labels[f"pod-security.kubernetes.io/{mode}"] == "restricted"
                    assert labels[f"pod-security.kubernetes.io/{mode}-version"] == f"v{version}"

        return after(d, check)

    run()


# What the pods' API calls need: the PS PATCH their Deployment's scale and GET, LIST and WATCH
# their run's Job (tfk8s_train.job_watch); Jupyter LISTs Layouts.
USED_VERBS = {(("deployments/scale",), ("patch",)), (("jobs",), ("get", "list", "watch")), (("layouts",), ("list",))}

IDENTITIES = {
    "tensorflow": {"runAsUser": 2001, "runAsGroup": 2002, "fsGroup": 2003},
    "jupyter": {"runAsUser": 3001, "runAsGroup": 3002, "fsGroup": 3003},
}


def _identity_of(spec: dict[str, Any]) -> dict[str, Any]:
    ctx = spec["securityContext"]
    return {key: ctx[key] for key in ("runAsUser", "runAsGroup", "fsGroup")}


def test_the_defaults_are_the_images_users() -> None:
    """Jupyter as the docker-stacks image's jovyan (1000:100); TensorFlow pods as 1000:1000."""
    facts = facts_for(stack_config("platform-dev"))
    assert facts["podSecurity"] == {
        "tensorflow": {"runAsUser": 1000.0, "runAsGroup": 1000.0, "fsGroup": 1000.0},
        "jupyter": {"runAsUser": 1000.0, "runAsGroup": 100.0, "fsGroup": 100.0},
    }


def test_the_platforms_identities_reach_its_apps_and_through_its_contract_the_training_pods() -> None:
    platform_raw = copy.deepcopy(stack_config("platform-dev"))
    platform_raw["platform"]["podSecurity"] = IDENTITIES

    @pulumi.runtime.test
    def tenant() -> pulumi.Output[Any]:
        d = run_program(copy.deepcopy(stack_config("tenant-alice")), platform=facts_for(platform_raw))

        def check() -> None:
            assert len(d.mocks.of_type(DEPLOYMENT)) == 2
            for r in d.mocks.of_type(DEPLOYMENT):
                app = pod_labels(r)["app.kubernetes.io/name"]
                assert _identity_of(pod_spec(r)) == IDENTITIES["jupyter" if app == "jupyter" else "tensorflow"], app

        return after(d, check)

    tenant()

    @pulumi.runtime.test
    def experiment() -> pulumi.Output[Any]:
        d = run_program(copy.deepcopy(stack_config("dev")), platform=facts_for(platform_raw))

        def check() -> None:
            templates = pod_templates(d)
            assert templates
            for name, template in templates:
                assert _identity_of(template["spec"]) == IDENTITIES["tensorflow"], name

        return after(d, check)

    experiment()


def test_root_is_no_identity() -> None:
    raw = copy.deepcopy(stack_config("platform-dev"))
    raw["platform"]["podSecurity"] = {"tensorflow": {"runAsUser": 0, "runAsGroup": 0, "fsGroup": 0}}
    with pytest.raises(ConfigError, match=r"platform\.podSecurity\.tensorflow\.runAsUser: must be at least 1, got 0"):
        validate(raw)


@pytest.mark.parametrize("case", ["tenant-alice", "dev", "imagenet", "dev-in-graph-chief-scratch"])
def test_only_the_pods_that_call_the_api_get_a_token_and_their_roles_only_the_verbs_they_use(case: str) -> None:
    raw, platform, secrets = CASES[case]

    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        d = run_program(raw(), secrets=secrets, platform=platform(), stack=case)

        def check() -> None:
            assert pod_templates(d)
            for name, template in pod_templates(d):
                labels = template["metadata"]["labels"]
                # The PS follow their Job and retire themselves (tfk8s_train.job_watch, kube_retire);
                # Jupyter reads Layouts (tfk8s_train.layouts).
                calls_the_api = labels.get("tfk8s.io/role") == "ps" or labels["app.kubernetes.io/name"] == "jupyter"
                assert template["spec"]["automountServiceAccountToken"] is calls_the_api, name
            for role in d.mocks.of_type(ROLE):
                if role.name == "jupyter-token-reader":  # bound to the tenant's people, not to a pod
                    continue
                verbs = {(tuple(rule["resources"]), tuple(rule["verbs"])) for rule in role.inputs["rules"]}
                assert verbs <= USED_VERBS, role.name

        return after(d, check)

    run()
