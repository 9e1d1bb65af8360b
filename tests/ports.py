"""Free loopback ports for the servers the tests start, apart between xdist workers.

A port is chosen at random from :func:`chosen_ports`, a range *below* the one the OS
hands out on its own (``ip_local_port_range``: ``bind(port 0)`` and every outgoing
connection's local port), and kept when ``bind(("127.0.0.1", port))`` succeeds; the
socket is closed at once and the server binds the port a moment later. In that gap
nothing the OS picks by itself can take it: not a fault proxy listening on port 0,
not a client's connection to etcd. (A CI run once failed when a proxy started
between choosing a cluster member's port and starting the member was handed that
very port by ``bind(0)``.)

Two workers of one run (``pytest -n 2``) choosing at the same moment must not take
the same port in that gap either, so each worker takes only ports of its own share:
worker ``i`` of ``n`` keeps a port ``p`` only when ``(p // 2) % n == i``. The share is
read from pytest-xdist's environment (``PYTEST_XDIST_WORKER``,
``PYTEST_XDIST_WORKER_COUNT``), which the processes a test starts inherit, so they
keep to their worker's share too. Outside xdist every port is the process's.

A process never takes a port it was handed before (the last ``REMEMBERED`` of them):
a server given ``--port P --http-port P`` would refuse to start.
"""

from __future__ import annotations

import collections
import os
import random
import socket
from typing import Final

__all__ = [
    "LOWEST",
    "MAX_ASKS",
    "REMEMBERED",
    "chosen_ports",
    "free_port",
    "free_ports",
    "worker_share",
]

#: How many ports one call may try before it gives up (each is in this worker's
#: share with probability 1/n, and free unless something listens there).
MAX_ASKS: Final = 200

#: How many of the ports this process was handed it keeps apart from later asks.
REMEMBERED: Final = 4096

#: The lowest port chosen: above the well-known ports and the usual services'
#: defaults (PostgreSQL 5432, Redis 6379, tenure 6388), which a test may start later.
LOWEST: Final = 10000

#: The fewest ports a range must have to be chosen from; below this, ports come from
#: ``bind(0)`` as before (a host whose own range leaves no room).
FEWEST: Final = 2000

_PORT_RANGE_FILE: Final = "/proc/sys/net/ipv4/ip_local_port_range"

_handed: collections.deque[int] = collections.deque(maxlen=REMEMBERED)
_handed_set: set[int] = set()
_random = random.SystemRandom()  # the same in no two processes, forked or not


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


def chosen_ports(path: str = _PORT_RANGE_FILE) -> range | None:
    """The ports chosen from: from :data:`LOWEST` up to the OS's own range, else above
    it; None when neither has :data:`FEWEST` ports (or the range cannot be read)."""
    try:
        with open(path, encoding="ascii") as file:
            low, high = (int(word) for word in file.read().split())
    except (OSError, ValueError):
        return None
    if low - LOWEST >= FEWEST:
        return range(LOWEST, low)
    if 65535 - high >= FEWEST:
        return range(max(high + 1, LOWEST), 65536)
    return None


def _candidate(ports: range | None) -> int | None:
    """A port to try: a random one of ``ports``, or what ``bind(0)`` hands out; None if
    a chosen one is taken."""
    with socket.socket() as sock:
        port = 0 if ports is None else _random.choice(ports)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return None
        return int(sock.getsockname()[1])


def free_port() -> int:
    """A TCP port on 127.0.0.1 free right now, of this worker's share, outside the
    range the OS picks from by itself, and not one this process was handed before."""
    index, total = worker_share()
    ports = chosen_ports()
    for _ in range(MAX_ASKS):
        port = _candidate(ports)
        if port is None or (port // 2) % total != index or port in _handed_set:
            continue
        if len(_handed) == _handed.maxlen:
            _handed_set.discard(_handed[0])
        _handed.append(port)
        _handed_set.add(port)
        return port
    raise RuntimeError(f"no free port of worker {index}'s share in {MAX_ASKS} asks")


def _keep(port: int) -> None:
    if len(_handed) == _handed.maxlen:
        _handed_set.discard(_handed[0])
    _handed.append(port)
    _handed_set.add(port)


def free_ports(count: int) -> int:
    """The first of ``count`` ports in a row free right now (``tenure serve --shards N
    --port P`` listens on P to P+N-1): the first as :func:`free_port` hands one out,
    the others free too and kept from this process's later asks (they may be of
    another worker's share: two workers may still race for them)."""
    for _ in range(MAX_ASKS):
        first = free_port()
        rest = range(first + 1, first + count)
        if all(port not in _handed_set and _candidate(range(port, port + 1)) for port in rest):
            for port in rest:
                _keep(port)
            return first
    raise RuntimeError(f"no {count} free ports in a row in {MAX_ASKS} asks")
