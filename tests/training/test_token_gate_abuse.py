"""The real token gate (tfk8s_train.token_gate) against what a hostile page or client does: paths
that would redirect a browser to another host, and requests from another tenant's page."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from gate_processes import TOKEN, RecordingBackend, gate_process, request

C0_AND_SPACE = "".join(map(chr, range(0x21)))


@pytest.fixture(scope="module")
def gate() -> Iterator[tuple[int, RecordingBackend]]:
    with RecordingBackend() as backend, gate_process(backend.port) as port:
        yield port, backend


def browser_stays_on_origin(location: str) -> bool:
    """Whether a browser that follows `location` from an http page stays on that page's origin, as
    the WHATWG URL Standard parses it: leading and trailing C0 controls and spaces are stripped, tabs
    and newlines removed anywhere, `\\` read as `/` (http is a special scheme); a scheme makes the
    URL absolute, and after a leading `//` (any number of slashes) comes a host."""
    url = location.strip(C0_AND_SPACE).translate({9: None, 10: None, 13: None}).replace("\\", "/")
    if re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", url):
        return False
    return not url.startswith("//")


@pytest.mark.parametrize(
    "target, location",
    [
        ("//evil.example/?token=T", "/evil.example/"),
        ("/\\evil.example/?token=T", "/evil.example/"),
        ("/\\\\evil.example?token=T", "/evil.example"),
        ("/%2F%2Fevil.example?token=T", "/%2F%2Fevil.example"),  # escapes stay escaped: a path to a browser
        ("/\\/\\evil.example/runs?run=a&token=T", "/evil.example/runs?run=a"),
        ("http:\\\\evil.example/?token=T", "/http:\\\\evil.example/"),
        ("/data/runs?token=T", "/data/runs"),
    ],
    ids=["slash-slash", "slash-backslash", "slash-two-backslashes", "escaped-slashes", "mixed-run", "scheme", "plain"],
)
def test_the_redirect_after_the_token_never_leaves_the_gates_origin(
    gate: tuple[int, RecordingBackend], target: str, location: str
) -> None:
    """`?token=` is traded for a cookie and a redirect to the same page without it: that page is a
    path on the gate itself, whatever the target looks like (no open redirect to another host)."""
    port, _ = gate
    status, headers, _ = request(port, target.replace("T", TOKEN))
    assert status == 303 and headers["set-cookie"].startswith("tfk8s-tensorboard-alice=")
    assert headers["location"] == location
    assert browser_stays_on_origin(headers["location"])


@pytest.mark.parametrize(
    "location, stays",
    [("/a", True), ("/a//b", True), ("//evil", False), ("/\\evil", False), ("\\/evil", False), (" /\t/evil", False)],
)
def test_the_browser_model_of_these_tests_reads_hosts_where_browsers_do(location: str, stays: bool) -> None:
    assert browser_stays_on_origin(location) == stays
