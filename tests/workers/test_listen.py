"""The supervisor's listening sockets: one per worker slot, all on one port."""

from __future__ import annotations

import errno
import socket

import pytest

from proxy.workers.listen import listening_sockets


def test_every_slot_listens_on_the_same_free_port() -> None:
    sockets = listening_sockets("127.0.0.1", 0, 3)
    try:
        ports = {sock.getsockname()[1] for sock in sockets}
        assert len(ports) == 1 and ports != {0}
        [port] = ports
        accepted = 0
        for _ in range(30):  # the kernel spreads connections over the sockets
            with socket.create_connection(("127.0.0.1", port), timeout=5):
                pass
        for sock in sockets:
            sock.setblocking(False)
            while True:
                try:
                    conn, _ = sock.accept()
                except BlockingIOError:
                    break
                conn.close()
                accepted += 1
        assert accepted == 30
    finally:
        for sock in sockets:
            sock.close()


def test_a_port_another_process_listens_on_is_refused() -> None:
    with socket.socket() as taken:  # without SO_REUSEPORT: not ours to share
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(OSError) as refused:
            listening_sockets("127.0.0.1", port, 2)
    assert refused.value.errno == errno.EADDRINUSE
