"""`kubectl get --watch` of one kind, each event timed as it arrives: when objects appear and
change to the millisecond, where the API server's own timestamps have 1 s resolution
(bench/first_step.py)."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from typing import IO, Any

from first_step_phases import PodSeen

import toolenv


class Watch:
    """`kubectl get <kind> --watch` of the objects of one kind in `namespace` that `selector` selects
    (None: all of them): each event with the time it arrived here. `ready` once the watch request is
    answered (kubectl's -v=6 log), so that nothing created later is missed or seen late."""

    def __init__(self, kubeconfig: str, kind: str, namespace: str, selector: str | None = None) -> None:
        self.kind = kind
        self.events: list[tuple[float, str, dict[str, Any]]] = []
        self.ready = threading.Event()
        self.process = subprocess.Popen(
            [toolenv.KUBECTL, "--kubeconfig", kubeconfig, "get", kind, "-n", namespace, *(["-l", selector] if selector else [])]
            + ["--watch", "--output-watch-events", "-o", "json", "-v=6"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None and self.process.stderr is not None
        self.threads = [
            threading.Thread(target=self._events, args=(self.process.stdout,), daemon=True),
            threading.Thread(target=self._log, args=(self.process.stderr,), daemon=True),
        ]
        for thread in self.threads:
            thread.start()

    def _events(self, stream: IO[str]) -> None:
        # One event per line (kubectl's JSON of a watch event is compact); a document spanning
        # lines, should a version print it indented, is read once it is whole.
        pending = ""
        for line in stream:
            pending += line
            try:
                event = json.loads(pending)
            except ValueError:
                continue
            self.events.append((time.time(), event["type"], event["object"]))
            pending = ""

    def _log(self, stream: IO[str]) -> None:
        for line in stream:
            if "watch=true" in line and "200 OK" in line:
                self.ready.set()

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait()
        for thread in self.threads:
            thread.join(timeout=5)

    def first_added(self) -> float | None:
        return min((at for at, kind, _ in self.events if kind == "ADDED"), default=None)

    def pods(self) -> list[PodSeen]:
        """Each pod as last seen, when it was first seen, and first seen bound to a node."""
        added: dict[str, float] = {}
        bound: dict[str, float] = {}
        last: dict[str, dict[str, Any]] = {}
        for at, _, pod in self.events:
            name = pod["metadata"]["name"]
            added.setdefault(name, at)
            if pod.get("spec", {}).get("nodeName"):
                bound.setdefault(name, at)
            last[name] = pod
        return [PodSeen(last[name], added[name], bound.get(name)) for name in last]
