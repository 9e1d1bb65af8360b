"""``tenure serve --cluster etcd://...``: several servers, one replicated service.

The servers started with the same cluster URL share one log in etcd and elect one
leader through it; the others are standbys that follow the log with a warm engine
and take over when the leader goes (docs/cluster.md). Etcd's Raft is the consensus:
tenure adds the fence on every append and the lease discipline of a leader.

* :mod:`.keys`: the key layout and values; :mod:`.store`: the etcd calls (the fence);
* :mod:`.lease`: a member's lease and its deadline; :mod:`.role`: what a member
  knows of the cluster (a :class:`~tenure.server._role.Role`);
* :mod:`.follower`: the warm engine; :mod:`.appender` and :mod:`.journal`: the
  leader's group commit and snapshots; :mod:`.hosts`: the leader's and standby's
  hosts;
* :mod:`.member`: one server's life from standby to leader and back;
  :func:`run`: ``tenure serve``'s entry point.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
from typing import TYPE_CHECKING

from tenure.server import _faces
from tenure.server._cluster.keys import Member
from tenure.server._cluster.member import ClusterMember
from tenure.server._config.cluster_url import parse_cluster_url
from tenure.server._config.serve_config import ServeConfig
from tenure.server._serve import Sockets

if TYPE_CHECKING:
    from tenure.server._http.endpoint import Endpoint

__all__ = ["ClusterMember", "advertised", "run"]

log = logging.getLogger("tenure.cluster")


def advertised(config: ServeConfig, port: int) -> Member:
    """This server's record as its clients reach it (``port``: the main port bound):
    its faces' addresses as each face's registry entry says."""
    address = config.advertise or f"{_bracketed(config.host)}:{port}"
    host = address.rpartition(":")[0]
    http = ""
    if config.http_port:
        http_host = config.http_host if config.http_host not in ("", "0.0.0.0", "::") else ""
        http = f"{_bracketed(http_host) if http_host else host}:{config.http_port}"
    faces = _faces.advertised(config, host, address)
    return Member(config.member_name or address, address, http=http, faces=faces)


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


async def run(config: ServeConfig, endpoint: Endpoint | None) -> int:
    """Serve as a member of ``config.cluster`` until stopped; the exit code.

    Raises:
        OSError: a port cannot be bound.
    """
    url = parse_cluster_url(config.cluster)
    sockets = listening_sockets(config)
    port = int(sockets.native.getsockname()[1])
    member = ClusterMember(config, url, endpoint)
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, member.stop)
    try:
        return await member.run(sockets, advertised(config, port))
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
        sockets.native.close()
        if sockets.accepted is not None:
            sockets.accepted.close()


def listening_sockets(config: ServeConfig) -> Sockets:
    """Bind the main port (and the accepted face's own) once, for every term.

    Raises:
        OSError: a port cannot be bound.
    """
    native = _bind(config.host, config.port)
    accepted = None
    port = _faces.accepted_port(config)
    if port:
        try:
            accepted = _bind(config.host, port)
        except OSError:
            native.close()
            raise
    return Sockets(native, accepted)


def _bind(host: str, port: int) -> socket.socket:
    family, kind, proto, _, address = socket.getaddrinfo(
        host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(1024)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock
