"""free_port (devstack/servers.py) never hands one process the same port twice: the kernel may offer
a closed probe's port again at once, and two servers of one stack on one port fail to start."""

from __future__ import annotations

import socket

from devstack import servers


def test_a_port_offered_again_by_the_kernel_is_not_handed_out_twice(monkeypatch):
    offered = iter([40001, 40001, 40001, 40002])

    class Probe(socket.socket):
        def getsockname(self):
            return ("127.0.0.1", next(offered))

    monkeypatch.setattr(servers.socket, "socket", Probe)
    monkeypatch.setattr(servers, "_GIVEN", set())
    assert [servers.free_port(), servers.free_port()] == [40001, 40002]
