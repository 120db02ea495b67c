"""Learn that the run's Job ended from a watch of that one Job (standard library, Python >= 3.6).

A PS launcher with TFK8S_WATCH_JOB retires when its run's Job is Failed or Complete, deleted, or
replaced by a Job of another uid (``kube_retire.state_of``). It used to GET the Job every
TFK8S_POLL_SECONDS (1 s), so a PS outlived its failed run by up to that second. Here a thread
lists that Job and watches it, and wakes the launcher on the event that ends the run:

    GET /apis/batch/v1/namespaces/<ns>/jobs?fieldSelector=metadata.name%3D<job>
    GET ...&watch=1&resourceVersion=<the list's>&allowWatchBookmarks=true&timeoutSeconds=60

RBAC: ``list`` and ``watch`` on that one Job. A Role's ``resourceNames`` allow a list or a watch
that selects exactly ``metadata.name=<name>``: the API server takes that name as the request's
(k8s.io/apiserver pkg/endpoints/request/requestinfo.go, in 1.25 as in 1.34).

Why a list first, not the GET: a GET answers the Job's own resourceVersion, the revision it was
last written at. A Job left untouched longer than the API server keeps events makes a watch
from there fail with 410 Gone at every try; a list answers the collection's, which is current.

The watch ends (its timeoutSeconds, a closed connection): it goes on from the last
resourceVersion it saw (events, bookmarks). 410 Gone (that resourceVersion is too old): list
again. Any other error: list again after a pause. 403 on the list or the watch (a Role from
before this launcher, with ``get`` alone): poll with ``kube_retire.job_state`` as before.
"""

import json
import sys
import threading
import time
import urllib.error
import urllib.parse
from typing import Mapping, Optional, Tuple

try:  # a module of the package (pods), or the sibling file of a plain script: as launch.py
    from tfk8s_train.kube_retire import GONE, RUNNING, Api, api_of, job_state, jobs_path, open_get, state_of
except ImportError:
    from kube_retire import GONE, RUNNING, Api, api_of, job_state, jobs_path, open_get, state_of  # type: ignore[no-redef]

# How long the API server keeps one watch open; the client waits that long and a bit more for a line.
WATCH_SECONDS = 60
READ_GRACE_SECONDS = 30


def _log(message: str) -> None:
    print(f"tfk8s-launch: {message}", file=sys.stderr, flush=True)


class _Relist(Exception):
    """The watch cannot go on from its resourceVersion (410 Gone): list again."""


def _selecting(api: Api, job: str, **query: str) -> str:
    return jobs_path(api) + "?" + urllib.parse.urlencode({"fieldSelector": "metadata.name=" + job, **query})


def list_job(api: Api, job: str, uid: str) -> Tuple[str, str]:
    """(the run's state, the list's resourceVersion): no item is a Job that is gone."""
    with open_get(api, _selecting(api, job), timeout=10.0) as response:
        body = json.loads(response.read().decode())
    items = body.get("items") or []
    return (state_of(items[0], uid) if items else GONE), str((body.get("metadata") or {}).get("resourceVersion") or "")


def watch_job(api: Api, job: str, uid: str, version: str, seconds: int = WATCH_SECONDS) -> Tuple[Optional[str], str]:
    """Follow the watch from ``version`` until the run ends or the watch does: (the run's end, or
    None if it is still running, and the last resourceVersion seen). Raises _Relist on 410 Gone."""
    query = {"watch": "1", "resourceVersion": version, "allowWatchBookmarks": "true", "timeoutSeconds": str(seconds)}
    with open_get(api, _selecting(api, job, **query), timeout=seconds + READ_GRACE_SECONDS) as response:
        for line in response:  # one JSON event a line
            if not line.strip():
                continue
            event = json.loads(line.decode())
            kind, obj = event.get("type"), event.get("object") or {}
            if kind == "ERROR":  # a Status: 410 when the version is older than the server keeps
                if obj.get("code") == 410:
                    raise _Relist()
                raise OSError(f"watch error: {obj.get('message') or obj}")
            version = (obj.get("metadata") or {}).get("resourceVersion") or version
            if kind == "DELETED":
                return GONE, version
            if kind in ("ADDED", "MODIFIED"):
                state = state_of(obj, uid)
                if state != RUNNING:
                    return state, version
    return None, version


def poll_job(job: str, uid: str, namespace: Optional[str], environ: Mapping[str, str], pause: float) -> str:
    """Today's poll: GET the Job every ``pause`` seconds until the run is over; its end."""
    while True:
        state = job_state(job, namespace, environ, uid=uid)
        if state in ("Failed", "Complete", GONE):
            return str(state)
        time.sleep(pause)


def follow_job(job: str, uid: str, namespace: Optional[str], environ: Mapping[str, str], pause: float) -> Optional[str]:
    """Block until the run of Job ``job`` (uid ``uid``) is over: "Failed", "Complete" or "Gone".
    None at once outside a pod (no API: nothing to follow)."""
    api = api_of(namespace, environ)
    if api is None:
        return None
    version = None  # type: Optional[str]
    while True:
        started = time.monotonic()
        try:
            if version is None:
                state, version = list_job(api, job, uid)
                if state != RUNNING:
                    return state
            end, version = watch_job(api, job, uid, version)
            if end:
                return end
            time.sleep(max(0.0, started + 1.0 - time.monotonic()))  # at most a watch a second: no busy loop
        except _Relist:
            version = None
        except urllib.error.HTTPError as err:
            if err.code == 403:
                _log(f"may not list and watch job {api.namespace}/{job} (HTTP 403): polling it every {pause:g}s")
                return poll_job(job, uid, namespace, environ, pause)
            if err.code != 410:
                _log(f"could not watch job {api.namespace}/{job}: HTTP {err.code}; listing it again in {pause:g}s")
                time.sleep(pause)
            version = None
        except Exception as err:  # connection refused or reset, a socket timeout, a broken line
            _log(f"could not watch job {api.namespace}/{job}: {err}; listing it again in {pause:g}s")
            version = None
            time.sleep(pause)


class RunEnd:
    """A daemon thread following the run's Job (``follow_job``): once the run is over, ``reason``
    says why and ``wake`` is set, so a launcher waiting on ``wake`` retires at once."""

    def __init__(
        self, job: str, uid: str, namespace: Optional[str], environ: Mapping[str, str], pause: float, wake: threading.Event
    ) -> None:
        self.job, self.uid, self.wake = job, uid, wake
        self.reason = None  # type: Optional[str]
        self._follow = lambda: follow_job(job, uid, namespace, environ, pause)

    def start(self) -> "RunEnd":
        threading.Thread(target=self._run, name="tfk8s-job-watch", daemon=True).start()
        return self

    def _run(self) -> None:
        state = self._follow()
        if state in ("Failed", "Complete"):
            self.reason = f"job {self.job} is {state}"
        elif state == GONE:
            self.reason = f"job {self.job} of run {self.uid} is gone"
        else:
            return
        self.wake.set()
