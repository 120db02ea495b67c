"""The notebook picks the cluster an experiment published (tfk8s_train.layouts), pure parts."""

from __future__ import annotations

import json

import pytest
from tfk8s_train.layouts import NoLayout, choose, notebook_env


def layout(experiment: str, cluster: str, client: str | None = "notebook") -> dict[str, object]:
    return {
        "experiment": experiment,
        "cluster": cluster,
        "spec": {"ps": [f"{experiment}-{cluster}-ps-0:2222"], "worker": [], "chief": ["jupyter-tf:2222"]},
        "runId": f"run-{experiment}",
        "runUid": f"uid-{experiment}",
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
