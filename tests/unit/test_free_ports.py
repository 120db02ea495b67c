"""The local runner's ports (tfk8s_train.cluster.free_ports): each task binds its port seconds after
it was chosen, so it comes from below the kernel's ephemeral range, where no outgoing connection
on the machine can take it meanwhile (a worker's 'Could not start gRPC server' on a busy CI)."""

from __future__ import annotations

import socket

import pytest
from tfk8s_train import cluster


def first_ephemeral() -> int:
    first = cluster._first_ephemeral()
    assert first is not None, "this test reads Linux's ephemeral range"
    return first


def test_the_ports_are_distinct_free_and_below_the_ephemeral_range() -> None:
    ports = cluster.free_ports(8)
    assert len(set(ports)) == 8
    assert all(cluster.LOWEST_PORT <= port < first_ephemeral() for port in ports), ports
    for port in ports:  # each free for the task to bind
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_a_port_in_use_is_passed_over(monkeypatch: pytest.MonkeyPatch) -> None:
    (taken,) = cluster.free_ports(1)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", taken))
        busy.listen()
        draws = iter([taken, taken + 1 if taken + 1 < first_ephemeral() else taken - 1, taken, cluster.LOWEST_PORT])
        monkeypatch.setattr(cluster.random, "randrange", lambda low, high: next(draws))
        ports = cluster.free_ports(2)
    assert taken not in ports and len(set(ports)) == 2


def test_without_a_known_range_the_kernel_chooses(monkeypatch: pytest.MonkeyPatch) -> None:
    """Off Linux, or where the range starts too low to leave room beneath it: binding to 0, as before."""
    monkeypatch.setattr(cluster, "_first_ephemeral", lambda: None)
    assert len(set(cluster.free_ports(3))) == 3
    monkeypatch.setattr(cluster, "_first_ephemeral", lambda: 1024)
    assert len(set(cluster.free_ports(3))) == 3
    assert cluster.free_ports(0) == []
