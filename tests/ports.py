"""Free loopback ports for the servers the tests start, apart between xdist workers.

A port is "free" when the OS hands it to ``bind(("127.0.0.1", 0))``; the socket is
closed at once and the server binds it a moment later. Two workers of one run
(``pytest -n 2``) asking at the same moment could be handed the same port in that
gap, so each worker takes only ports of its own share: worker ``i`` of ``n`` keeps
a port ``p`` only when ``(p // 2) % n == i``, and asks again otherwise. Not
``p % n``: Linux hands ``bind(0)`` odd ports first, so parity alone would starve
worker 0. The share is read from pytest-xdist's environment
(``PYTEST_XDIST_WORKER``, ``PYTEST_XDIST_WORKER_COUNT``), which the processes a
test starts inherit, so they keep to their worker's share too. Outside xdist every
port is the process's.

The OS may also hand one process the same port twice in a row, since the first was
closed before the second ask; a server given ``--port P --http-port P`` then
refuses to start. So a process never takes a port it was handed before (the last
``REMEMBERED`` of them).
"""

from __future__ import annotations

import collections
import os
import socket
from typing import Final

__all__ = ["MAX_ASKS", "REMEMBERED", "free_port", "worker_share"]

#: How many ports one call may be handed before it gives up (each is kept with
#: probability 1/n, so n = 2 workers needs 2 asks on average).
MAX_ASKS: Final = 200

#: How many of the ports this process was handed it keeps apart from later asks.
REMEMBERED: Final = 4096

_handed: collections.deque[int] = collections.deque(maxlen=REMEMBERED)
_handed_set: set[int] = set()


def worker_share() -> tuple[int, int]:
    """``(index, count)`` of this process's xdist worker; ``(0, 1)`` outside xdist."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if not name.startswith("gw") or not name[2:].isdigit() or not count.isdigit():
        return 0, 1
    index, total = int(name[2:]), int(count)
    if not 0 <= index < total:
        raise RuntimeError(f"PYTEST_XDIST_WORKER={name} is outside a run of {total} workers")
    return index, total


def free_port() -> int:
    """A TCP port on 127.0.0.1 the OS says is free right now, of this worker's share,
    and not one this process was handed before."""
    index, total = worker_share()
    for _ in range(MAX_ASKS):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if (port // 2) % total == index and port not in _handed_set:
            if len(_handed) == _handed.maxlen:
                _handed_set.discard(_handed[0])
            _handed.append(port)
            _handed_set.add(port)
            return port
    raise RuntimeError(f"no free port of worker {index}'s share in {MAX_ASKS} asks")
