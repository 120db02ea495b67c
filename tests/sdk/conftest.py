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
def gensdk() -> Path:
    """hack/gensdk's binary, current with its sources."""
    # Milliseconds when the binary is current (the script only hashes the sources); a build when not.
    subprocess.run([str(ROOT / "hack" / "tools.sh"), "gensdk"], check=True)
    return BIN / "gensdk"


@pytest.fixture(scope="session")
def sdks(gensdk: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with `python/` and `nodejs/`, the SDKs of package/schema.json as it is now."""
    out = tmp_path_factory.mktemp("sdk")
    schema = ROOT / "package" / "schema.json"
    subprocess.run([str(gensdk), "--schema", str(schema), "--out", str(out), "--language", "python,nodejs"], check=True)
    return out
