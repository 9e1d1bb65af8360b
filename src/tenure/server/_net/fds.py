"""The process's file descriptors, shared by its listeners (issue 28).

Each listener caps its own connections (``--max-connections`` on the main port and
the accepted face's own together, one count, of which ``--max-handshaking`` bounds those not
yet past their handshake; ``--http-max-connections`` on the HTTP port). Those
caps only keep one listener from starving another if their sum fits in the
descriptors the process may open: otherwise 1,010 half-sent HTTP requests use up
a 1,024-descriptor process and native clients fail to connect, whatever their own
cap says. So at start:

* the soft ``RLIMIT_NOFILE`` is raised toward what the caps need plus
  :data:`HEADROOM` (never above the hard limit: raising it is what any server
  does, and costs nothing until descriptors are used);
* if the hard limit is lower, the main port's ``--max-connections`` is lowered
  to what is left (logged once, naming the numbers): the native listener gives
  way, since the other caps are smaller and each is a listener's whole share.

:data:`HEADROOM` covers what the server opens besides connections: the journal's
segments (the open one and one being preallocated), a snapshot being written and
the one read at start, the data directory and its lock, the listening sockets,
the event loop's own (epoll, its self-pipe), a cluster's peer links, the logs,
and a margin for the libraries (DNS, gRPC's threads' pipes).
"""

from __future__ import annotations

import logging
import resource
from typing import Final

log = logging.getLogger("tenure.server")

#: Descriptors kept for what is not a client connection (module docstring).
HEADROOM: Final = 64


def raise_nofile(wanted: int) -> int:
    """Raise the soft RLIMIT_NOFILE toward ``wanted`` (never above the hard limit,
    never lowered); the soft limit after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and target > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass  # (kept as it was: the caps below adapt)
    return soft if soft != resource.RLIM_INFINITY else max(wanted, 1 << 20)


def native_share(max_connections: int, others: int) -> int:
    """The main port's connection cap once the process's descriptors are shared.

    ``others``: what the other caps add up to (handshaking connections, HTTP's).
    Returns ``max_connections``, or less (at least 1) if the descriptors the
    process may open cannot hold them all.
    """
    limit = raise_nofile(max_connections + others + HEADROOM)
    share = limit - HEADROOM - others
    if share >= max_connections:
        return max_connections
    share = max(1, share)
    fields = {
        "max_connections": max_connections,
        "lowered_to": share,
        "rlimit_nofile": limit,
        "other_listeners": others,
        "headroom": HEADROOM,
    }
    log.warning(
        "file descriptors too few for the connection limits; --max-connections lowered",
        extra={"event": "fd_budget", "fields": fields},
    )
    return share
