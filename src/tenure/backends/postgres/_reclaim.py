"""How the server reclaims a connection of ours that a partition cut off.

A partition (a stalled link, a half-open NAT entry, a proxy that keeps its
upstream side open) leaves the server holding connections this client has given
up on: the client opens new ones, the old ones keep their slots, and after enough
partitions ``max_connections`` runs out and *no* client can connect. Nothing on
the client side can close them (its packets do not arrive), so every connection
asks the server itself to let go:

* ``idle_session_timeout`` (PostgreSQL 14+, user-settable): a connection idle
  outside a transaction for that long is closed by the server. Pool connections
  are checked before use, so one reclaimed while idle is replaced, not failed;
  the LISTEN connection heartbeats well within it (:mod:`._listen`).
* ``tcp_keepalives_idle``/``_interval``/``_count`` (user-settable): the server
  probes a silent peer and closes the connection when a dead one does not answer.

``statement_timeout`` (``request_timeout``) already ends a call stuck mid-way,
after which the connection is idle and reclaimed as above.
"""

from __future__ import annotations

import select
from typing import Any, Final

import psycopg
from psycopg_pool import AsyncConnectionPool

from tenure.backends.postgres._url import PgOptions

__all__ = [
    "IDLE_SESSION_TIMEOUT_SINCE",
    "KEEPALIVE_COUNT",
    "check_pooled",
    "configure_reclaim",
    "reclaim_settings",
    "refused_for_slots",
]

#: The first server version (``server_version_num``) with ``idle_session_timeout``.
IDLE_SESSION_TIMEOUT_SINCE: Final = 140000

#: SQLSTATE too_many_connections (max_connections, or a role's or database's limit).
TOO_MANY_CONNECTIONS: Final = "53300"

#: Unanswered server keepalive probes before the server closes a connection.
KEEPALIVE_COUNT: Final = 3


def reclaim_settings(options: PgOptions, server_version: int) -> dict[str, str]:
    """The session settings a connection to a server of ``server_version`` gets."""
    idle = options.server_keepalives_idle
    found = {
        "tcp_keepalives_idle": str(round(idle)),
        "tcp_keepalives_interval": str(max(1, round(idle / KEEPALIVE_COUNT))),
        "tcp_keepalives_count": str(KEEPALIVE_COUNT),
    }
    # Older servers do not know the setting (SET would fail): they keep only the
    # keepalives, and their operator must size max_connections with more slack.
    if options.idle_session_timeout and server_version >= IDLE_SESSION_TIMEOUT_SINCE:
        found["idle_session_timeout"] = str(round(options.idle_session_timeout * 1000))
    return found


async def configure_reclaim(conn: psycopg.AsyncConnection[Any], options: PgOptions) -> None:
    """Ask the server to reclaim ``conn`` when it goes silent (module docstring).

    One round trip: ``set_config`` for each setting in a single SELECT (SET takes no
    parameters). A server that cannot read the socket options (a Unix socket)
    ignores the keepalive settings.
    """
    settings = reclaim_settings(options, conn.info.server_version)
    calls = ", ".join("set_config(%s, %s, false)" for _ in settings)
    args = [item for pair in settings.items() for item in pair]
    await conn.execute(f"SELECT {calls}", args)


def refused_for_slots(error: BaseException) -> bool:
    """Whether ``error`` is the server refusing a connection for lack of slots."""
    if isinstance(error, psycopg.Error) and error.sqlstate == TOO_MANY_CONNECTIONS:
        return True
    # At connect, libpq reports the FATAL as text only (no SQLSTATE on the error).
    text = str(error)
    return "remaining connection slots are reserved" in text or "too many clients" in text


async def check_pooled(conn: psycopg.AsyncConnection[Any]) -> None:
    """The pool's check before handing ``conn`` out: raises if the server closed it.

    An idle pooled connection has nothing to read (no LISTEN on it), so a readable
    socket means the server spoke: most likely it closed the connection
    (idle_session_timeout, a shutdown). Only then is it tested with a round trip
    (psycopg_pool's own check); a quiet one is handed out without one, so calls do
    not pay a round trip each for the check.
    """
    if conn.closed or conn.broken:
        raise psycopg.OperationalError("the connection is closed")
    readable, _, _ = select.select([conn.pgconn.socket], [], [], 0)
    if readable:
        await AsyncConnectionPool.check_connection(conn)
