"""The notebook picks the cluster an experiment published (tfk8s_train.layouts), pure parts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tfk8s_train.layouts import BadLayout, NoLayout, choose, notebook_env, validate

GOLDEN = Path(__file__).resolve().parents[1] / "unit" / "golden"


def layout(experiment: str, cluster: str, client: str | None = "notebook") -> dict[str, object]:
    return {
        "experiment": experiment,
        "cluster": cluster,
        "spec": {"ps": [f"{experiment}-{cluster}-ps-0:2222"], "worker": [], "chief": ["jupyter-tf:2222"]},
        "runId": f"run-{experiment}",
        "runUid": f"uid-{experiment}",
        "replication": "in-graph",
        "training": "sync",
        "inGraphClient": client,
        "dataSubPath": "",
        "logSubPath": f"{experiment}/{cluster}",
    }


def test_the_one_notebook_driven_cluster_is_chosen_and_becomes_the_notebooks_env() -> None:
    chosen = choose([layout("exp1", "mnist"), layout("exp2", "cifar", client="chief")])
    env = notebook_env(chosen, {"TFK8S_LOG_ROOT": "/logs", "TFK8S_DATA_ROOT": "/data"})
    assert json.loads(env["TFK8S_CLUSTER_SPEC"])["chief"] == ["jupyter-tf:2222"]
    assert (env["TFK8S_RUN_UID"], env["TFK8S_TRAINING"]) == ("uid-exp1", "sync")
    # The current run's own directory: where the servers look for the notebook's done marker.
    assert (env["TFK8S_DATA_DIR"], env["TFK8S_LOG_DIR"]) == ("/data/", "/logs/exp1/mnist/run-uid-exp1")


def test_a_layout_without_a_run_asks_for_a_new_up() -> None:
    old = {k: v for k, v in layout("exp1", "mnist").items() if k != "runUid"}
    with pytest.raises(NoLayout, match=r"exp1/mnist names no run \(runUid\).*`pulumi up` that experiment again"):
        notebook_env(old, {})


def test_several_clusters_need_a_choice_and_the_message_lists_them() -> None:
    both = [layout("exp1", "mnist"), layout("exp2", "mnist")]
    with pytest.raises(NoLayout, match=r"exp1/mnist, exp2/mnist; several match\. Set TFK8S_EXPERIMENT"):
        choose(both)
    assert choose(both, experiment="exp2")["runId"] == "run-exp2"
    with pytest.raises(NoLayout, match=r"none matches"):
        choose(both, cluster="svhn")


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"logSubPath": "../bob/exp1"}, r"logSubPath '\.\./bob/exp1' leaves the volume"),
        ({"logSubPath": "/etc"}, r"logSubPath '/etc' leaves the volume"),
        ({"dataSubPath": "a/../../b"}, r"dataSubPath 'a/\.\./\.\./b' leaves the volume"),
        ({"spec": {"ps": ["exp1-mnist-ps-0.tfk8s-bob:2222"]}}, r"spec\.ps .* names a host outside this namespace"),
        ({"spec": {"ps": ["evil.example.com:2222"]}}, r"spec\.ps .* outside this namespace"),
        ({"spec": {"ps": ["10.0.0.7:2222"]}}, r"spec\.ps .* outside this namespace"),
        ({"spec": {"ps": ["exp1-mnist-ps-0"]}}, r"spec\.ps .* not host:port"),
        ({"spec": {"worker": ["w-0.other:2222"]}}, r"spec\.worker .* outside this namespace"),
        ({"command": ["sh", "-c", "id"]}, r"unknown key 'command'"),
        ({"training": 3}, r"training is missing or not str"),
        # The run's directory is run-<runUid>: a uid that is a path would put the notebook's
        # results and done markers anywhere on the log volume (another experiment's run).
        ({"runUid": "x/../../../other-exp"}, r"runUid 'x/\.\./\.\./\.\./other-exp' is not a Kubernetes uid"),
        ({"runUid": ".."}, r"runUid '\.\.' is not a Kubernetes uid"),
        ({"runUid": 7}, r"runUid 7 is not a Kubernetes uid"),
    ],
)
def test_a_layout_tfk8s_did_not_write_is_refused(change: dict[str, object], problem: str) -> None:
    """Whoever may write Layouts in the namespace must not steer the notebook's graph to servers
    elsewhere, or its files out of the user's volumes."""
    bad = {**layout("exp1", "mnist"), **change}
    with pytest.raises(BadLayout, match=r"the layout of exp1/mnist is not one tfk8s wrote; not using it: .*" + problem):
        choose([bad])


def test_the_layouts_tfk8s_writes_pass() -> None:
    """Every Layout of the golden manifests (what the infrastructure code writes) is accepted."""
    written = []
    for path in sorted(GOLDEN.glob("*.jsonl")):
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        written += [row["inputs"]["spec"] for row in rows if row["type"].endswith(":Layout")]
    assert len(written) >= 5
    for spec in written:
        assert validate(spec) == spec
