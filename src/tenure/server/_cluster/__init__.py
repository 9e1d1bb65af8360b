"""``tenure serve --cluster etcd://...``: several servers, one replicated service.

The servers started with the same cluster URL share one log in etcd and elect one
leader through it; the others are standbys that follow the log with a warm engine
and take over when the leader goes (docs/cluster.md). Etcd's Raft is the consensus:
tenure adds the fence on every append and the lease discipline of a leader.

* :mod:`.keys`: the key layout and values; :mod:`.store`: the etcd calls (the fence);
* :mod:`.lease`: a member's lease and its deadline; :mod:`.role`: what a member
  knows of the cluster (a :class:`~tenure.server._role.Role`);
* :mod:`.follower`: the warm engine; :mod:`.freshness`: how fresh a standby's state
  is, confirmed on demand (bounded-staleness reads); :mod:`.appender` and
  :mod:`.journal`: the leader's group commit and snapshots; :mod:`.hosts`: the
  leader's and standby's hosts;
* :mod:`.member`: one server's life from standby to leader and back;
  :func:`run`: ``tenure serve``'s entry point.

Layer (CONTRIBUTING.md): its modules may import each other, tenure._core,
tenure._runtime, tenure._protocol, tenure.server, tenure._etcd and tenure.errors.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from typing import TYPE_CHECKING

from tenure.server import _faces
from tenure.server._audit import AuditLog
from tenure.server._cluster.keys import ServerRecord
from tenure.server._cluster.member import ClusterMember
from tenure.server._config.cluster_url import parse_cluster_url
from tenure.server._config.serve_config import ServeConfig
from tenure.server._reception import listening_sockets
from tenure.server._reload import reload_by_signal

if TYPE_CHECKING:
    from tenure.server._http.endpoint import Endpoint

__all__ = ["ClusterMember", "advertised", "run"]

log = logging.getLogger("tenure.cluster")


def advertised(config: ServeConfig, port: int) -> ServerRecord:
    """This server's record as its clients reach it (``port``: the main port bound):
    its faces' addresses as each face's registry entry says."""
    address = config.advertise or f"{_bracketed(config.host)}:{port}"
    host = address.rpartition(":")[0]
    http = ""
    if config.http_port:
        http_host = config.http_host if config.http_host not in ("", "0.0.0.0", "::") else ""
        http = f"{_bracketed(http_host) if http_host else host}:{config.http_port}"
    faces = _faces.advertised(config, host, address)
    return ServerRecord(config.member_name or address, address, http=http, faces=faces)


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


async def run(
    config: ServeConfig,
    endpoint: Endpoint | None,
    audit: AuditLog | None = None,
    version: str = "",
) -> int:
    """Serve as a member of ``config.cluster`` until stopped; the exit code (``audit``:
    the audit log every term's server records in; None: off; ``version``: the
    server's, stated in its backups).

    Raises:
        ListenError: a port cannot be bound.
    """
    url = parse_cluster_url(config.cluster)
    sockets = listening_sockets(config)  # once, for every term
    try:
        port = int(sockets.native[0].getsockname()[1])
        member = ClusterMember(config, url, endpoint, audit, version)
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, member.stop)
        # SIGHUP: the current term's server reads its files again (the next keeps them);
        # before the first term serves, refused and logged.
        also = (endpoint.prepare_tls,) if endpoint is not None else ()
        loop.add_signal_handler(signal.SIGHUP, lambda: reload_by_signal(member.server, also))
        # (Its handlers are removed by serve(), once everything has stopped.)
        return await member.run(sockets, advertised(config, port))
    finally:
        sockets.close()
