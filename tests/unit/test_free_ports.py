"""The local runner's ports (tfk8s_train.cluster.free_ports): each task binds its port seconds after
it was chosen, so it comes from below the kernel's ephemeral range, where no outgoing connection
on the machine can take it meanwhile (a worker's 'Could not start gRPC server' on a busy CI)."""

from __future__ import annotations

import socket

import pytest
from tfk8s_train import cluster


def first_ephemeral() -> int:
    return int(cluster.EPHEMERAL_PORTS.read_text().split()[0])


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
        others = [port for port in range(cluster.LOWEST_PORT, first_ephemeral()) if port != taken]
        monkeypatch.setattr(cluster.random, "sample", lambda population, k: [taken, *others])
        ports = cluster.free_ports(2)
    assert taken not in ports and len(ports) == 2
