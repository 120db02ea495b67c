"""Fixtures for the mock layer: the repository's stack files as raw config, and an echoing API server."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from api_echo import Server, serving
from mocked_program import stack_config


@pytest.fixture
def server() -> Iterator[Server]:
    """An HTTP server echoing what tfk8s's API client sent (api_echo)."""
    with serving() as running:
        yield running


@pytest.fixture
def dev_config() -> dict[str, Any]:
    """The `dev` experiment (alice's mnist)."""
    return copy.deepcopy(stack_config("dev"))


@pytest.fixture
def platform_config() -> dict[str, Any]:
    return copy.deepcopy(stack_config("platform-dev"))


@pytest.fixture
def tenant_config() -> dict[str, Any]:
    """Alice's tenant on platform-dev (the `dev` experiment's)."""
    return copy.deepcopy(stack_config("tenant-alice"))


@pytest.fixture
def imagenet_config() -> dict[str, Any]:
    return copy.deepcopy(stack_config("imagenet"))


@pytest.fixture
def imagenet_platform_config() -> dict[str, Any]:
    return copy.deepcopy(stack_config("imagenet-platform"))
