"""A TensorBoard gate's answers without a gate: what `tfk8s status` (test_status_cli.py) and an
experiment's readiness (test_readiness_progress.py) read from it. Against a real gate:
tests/training/test_gate_routes.py."""

from __future__ import annotations

import io
import json
import urllib.error
import urllib.request
from email.message import Message
from typing import Any


def cluster(**fields: Any) -> dict[str, Any]:
    base = {
        "run": "6f1c2d",
        "runs": ["6f1c2d"],
        "state": "running",
        "finished": False,
        "stale": False,
        "step": 120,
        "target_steps": 300,
        "fraction": 0.4,
        "steps_per_second": 4.2,
        "examples_per_second": 512.0,
        "loss": 0.31,
        "eta_seconds": 42.86,
        "first_step_seconds": 12.0,
        "last_checkpoint": {"step": 100, "at": 970.0},
        "restarts": 0,
        "updated_at": 998.0,
        "tasks": [
            {"task": "worker-0", "state": "running", "step": 120, "starts": 1, "exit_code": None, "age_seconds": 2.0},
            {"task": "ps-0", "state": "running", "step": None, "starts": 2, "exit_code": None, "age_seconds": 3.0},
        ],
    }
    return {**base, **fields}


def status_json(experiment: str = "mnist-exp", **clusters: dict[str, Any]) -> dict[str, Any]:
    return {"schema": 1, "now": 1000.0, "experiments": {experiment: {"clusters": clusters}}, "notes": []}


class Response(io.BytesIO):
    def __init__(self, body: bytes, headers: dict[str, str] | None = None) -> None:
        super().__init__(body)
        self.status, self.headers = 200, headers or {}


class FakeGate:
    """Answers requests in turn from `answers` (the last one again when they run out), each a JSON
    object, bytes, (status, body) for an error, an OSError for no answer, or another exception to
    raise; records what was asked, and how long the asker would wait."""

    def __init__(self, *answers: Any, headers: dict[str, str] | None = None) -> None:
        self.answers, self.headers = list(answers), headers or {}
        self.asked: list[urllib.request.Request] = []
        self.timeouts: list[float] = []

    def __call__(self, request: urllib.request.Request, timeout: float) -> Response:
        self.asked.append(request)
        self.timeouts.append(timeout)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, tuple):
            status, body = answer
            raise urllib.error.HTTPError(request.full_url, status, "refused", Message(), io.BytesIO(body))
        if isinstance(answer, OSError):
            raise urllib.error.URLError(answer)
        if isinstance(answer, Exception):
            raise answer
        return Response(answer if isinstance(answer, bytes) else json.dumps(answer).encode(), self.headers)
