"""The SDKs of tfk8s's component package as a program in another language gets them: hack/gensdk
(built, or found current, by hack/tools.sh) writes them from package/schema.json into a temporary
directory, never the checkout. The generated SDKs are not committed (Makefile, `make sdk`): these
tests are what keeps them honest."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from toolenv import BIN, ROOT


@pytest.fixture(scope="session")
def sdks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with `python/` and `nodejs/`, the SDKs of package/schema.json as it is now."""
    # Seconds when the binary is current (it only hashes the sources); a build when they changed.
    subprocess.run([str(ROOT / "hack" / "tools.sh"), "gensdk"], check=True)
    out = tmp_path_factory.mktemp("sdk")
    schema = ROOT / "package" / "schema.json"
    generate = [str(BIN / "gensdk"), "--schema", str(schema), "--out", str(out), "--language", "python,nodejs"]
    subprocess.run(generate, check=True)
    return out
