"""master_client.ipynb, executed by nbclient as the client of a real in-graph cluster."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

pytestmark = pytest.mark.training
TRAINING_DIR = Path(__file__).resolve().parents[2] / "training"


def test_notebook_trains_against_servers_started_by_the_runner(
    tmp_path: Path, digits_tfrecords: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log_dir = tmp_path / "log"
    log_dir.mkdir()
    runner_log = (tmp_path / "runner.log").open("w")
    runner = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tfk8s_train.runner",
            "--mode",
            "in-graph",
            "--ps",
            "1",
            "--workers",
            "2",
            "--no-client",
            "--data-dir",
            str(digits_tfrecords),
            "--log-dir",
            str(log_dir),
            "--timeout",
            "150",
        ],
        stdout=runner_log,
        stderr=subprocess.STDOUT,
        cwd=TRAINING_DIR,
    )
    try:
        deadline = time.monotonic() + 60
        while not (log_dir / "cluster.json").is_file():
            assert runner.poll() is None and time.monotonic() < deadline, (tmp_path / "runner.log").read_text()
            time.sleep(0.2)
        client_env = json.loads((log_dir / "cluster.json").read_text())["client_env"]
        for key, value in client_env.items():
            monkeypatch.setenv(key, value)
        monkeypatch.setenv("TFK8S_STEPS", "300")
        monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")

        notebook = nbformat.read(TRAINING_DIR / "master_client.ipynb", as_version=4)
        NotebookClient(
            notebook, timeout=150, kernel_name="python3", resources={"metadata": {"path": str(TRAINING_DIR)}}
        ).execute()

        text = "".join(out.get("text", "") for cell in notebook.cells for out in cell.get("outputs", []))
        assert "tfk8s-progress task=chief-0 step=300" in text
        run_dir = Path(client_env["TFK8S_LOG_DIR"])  # the run's own directory under the log dir
        assert run_dir.parent == log_dir and run_dir.name == f"run-{client_env['TFK8S_RUN_UID']}"
        result = json.loads((run_dir / "results" / "chief-0.json").read_text())
        assert result["mode"] == "in-graph" and result["test_accuracy"] >= 0.90
        # The notebook's done marker retires every server: the runner exits 0 on its own.
        assert runner.wait(60) == 0, (tmp_path / "runner.log").read_text()[-3000:]
        assert (tmp_path / "runner.log").read_text().count("are done; retiring") == 3
    finally:
        if runner.poll() is None:
            runner.terminate()  # the runner stops every process group it started
            runner.wait(30)
        runner_log.close()
