"""The listening sockets of `--workers N`, made by the supervisor and kept open by it.

Each worker slot has a socket of its own, all bound to the same address with `SO_REUSEPORT`: the
kernel spreads new connections over them evenly (one worker accepting on a shared socket took
whole bursts of connections for itself). The supervisor holds every socket for as long as it
runs, so a slot's socket outlives its worker: while a worker is replaced, the new one accepts on
the same socket before the old one stops, and connections waiting in its queue are accepted by
the new one instead of being reset.
"""

from __future__ import annotations

import socket

BACKLOG = 1024


def listening_sockets(host: str, port: int, count: int) -> list[socket.socket]:
    """`count` sockets listening on `host:port` (`port` 0: the same free port for all)."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            address = sock.getsockname()  # the port chosen for the first, for the others
            sock.listen(BACKLOG)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets
