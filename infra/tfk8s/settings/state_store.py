"""Which Pulumi state a stack lives in, as the owner annotation of its objects names it
(tfk8s.specs.ownership): a short hash of its backend's URL. Pure, Pulumi-free.

A program run against a copy of that state (a pull request's preview of its experiments,
tfk8s_gitops.recorded_state, in a scratch backend) is told the original's id (`STATE_ID_ENV`), so
that its ownership check knows its own objects; without it, the copy's backend would make them
another state's, and the check would refuse to adopt them.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path

from tfk8s.errors import ConfigError

STATE_ID_ENV = "TFK8S_STATE_ID"
STATE_ID = re.compile(r"[0-9a-f]{8}")


def state_id(environ: Mapping[str, str]) -> str | None:
    """The id of the state this stack's program runs under: `STATE_ID_ENV` when set, else a hash of
    its backend (PULUMI_BACKEND_URL, or the CLI's current login); None if neither can be known."""
    told = environ.get(STATE_ID_ENV)
    if told is not None:
        if not STATE_ID.fullmatch(told):
            raise ConfigError(
                [f"{STATE_ID_ENV}: {told!r} is no state id (8 hex digits): unset it, or give the id of the state copied"]
            )
        return told
    url = environ.get("PULUMI_BACKEND_URL")
    if not url:
        home = Path(environ.get("PULUMI_HOME") or Path(environ.get("HOME", str(Path.home()))) / ".pulumi")
        try:
            url = json.loads((home / "credentials.json").read_text()).get("current")
        except (OSError, ValueError):
            url = None
    if not url:
        return None
    if url.startswith("file://"):
        url = "file://" + os.path.abspath(os.path.expanduser(url[len("file://") :]))
    return hashlib.sha256(url.rstrip("/").encode()).hexdigest()[:8]
