"""A request's deadline on a link: an answer that does not come in time replaces the connection.

A link (:mod:`tenure.backends._link`) gives each request ``request_timeout`` seconds
from when it was sent (:class:`~tenure.backends._link_dial.LinkOptions`, the
``tenure://`` URL's option; :data:`REQUEST_TIMEOUT` by default). Its pings
(:mod:`tenure.backends._link_pings`) say whether the server is there; this says
whether it serves: a server that answers every Ping but no request would otherwise
leave ``session()``, ``lock()`` and the end of an ``async with`` block waiting for
ever, its Pongs confirming a connection on which nothing is answered.

**What it bounds.** A server answers every request of the native protocol once it has
applied it, at once: a waiting acquire's answer is QUEUED (its grant or failure
comes later, as a Push, which no deadline bounds: an acquire waits in its queue as
long as its own ``timeout`` says), and a rate limiter's reservation is answered
with how long to wait (the waiting is the client's). So the rule has no exception:
every request's *answer* must come within ``request_timeout``; a wait in a queue is
no request, and is never cut short by it.

**When it passes.** The request fails with :class:`~tenure.errors.RequestTimeoutError`
(an UnavailableError: applied or not, unknown), and the connection is given up as a
lost one is (:meth:`~tenure.backends._link.Link.lost`): the other requests in
flight on it fail as cut off (DisconnectedError, each sent again or not by its own
rule), and the link connects again and re-attaches its sessions, which keep their
recovery windows (:mod:`tenure.backends._remote_session`). The request that timed
out is not sent again: to a server that does not answer it would wait again, so its
caller hears of it after one deadline, never a hang.

One timer per connection watches its oldest request: requests are numbered in the
order they are sent, and ``LinkConnection.pending`` keeps that order, so the oldest
one waiting has the earliest deadline. A request costs no timer of its own.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Final, Protocol

from tenure.backends._link_conn import LinkConnection
from tenure.backends._link_errors import DisconnectedError
from tenure.errors import RequestTimeoutError

__all__ = ["REQUEST_TIMEOUT", "DeadlinesHome", "RequestDeadlines"]

#: The default ``request_timeout``, in seconds: well above any answer a healthy
#: server gives (milliseconds; seconds at worst: a cluster's commit waiting out an
#: etcd leader election, an fsync on a slow disk, a backup's first part from its
#: forked child), six times the default ``connect_timeout`` and the default ping
#: interval, and ``postgres://``'s ``request_timeout`` (its statement timeout).
REQUEST_TIMEOUT: Final = 30.0

log = logging.getLogger("tenure.client")


class DeadlinesHome(Protocol):
    """What :class:`RequestDeadlines` asks of its link (a
    :class:`~tenure.backends._link.Link`, which imports this module)."""

    @property
    def current(self) -> LinkConnection | None:
        """The link's connection now (None while it has none)."""
        ...

    def lost(self, conn: LinkConnection, error: BaseException) -> None:
        """Give ``conn`` up: fail what waits on it, connect again."""
        ...


class RequestDeadlines:
    """The deadlines of a link's requests (module docstring): :meth:`watch` arms a
    connection's timer."""

    __slots__ = ("_link", "_loop", "seconds")

    def __init__(self, link: DeadlinesHome, seconds: float) -> None:
        self._link = link
        self._loop = asyncio.get_running_loop()
        #: How long a request may wait for its answer (``request_timeout``).
        self.seconds = seconds

    def watch(self, conn: LinkConnection) -> None:
        """Arm ``conn``'s timer for the deadline of its oldest request (``conn`` has one
        request waiting at least, and no timer armed)."""
        _future, sent_at, _command = next(iter(conn.pending.values()))
        conn.watchdog = self._loop.call_at(sent_at + self.seconds, self._check, conn)

    def _check(self, conn: LinkConnection) -> None:
        """The timer of ``conn`` is due: its oldest request has timed out, or (answered
        meanwhile) the next one's deadline is watched."""
        conn.watchdog = None
        if self._link.current is not conn or not conn.pending:
            return  # (lost meanwhile; or nothing waits: the next request arms it)
        request_id, (future, sent_at, command) = next(iter(conn.pending.items()))
        if self._loop.time() < sent_at + self.seconds:
            self.watch(conn)
            return
        del conn.pending[request_id]
        name, seconds = type(command).__name__, f"{self.seconds:g} s"
        if not future.done():
            future.set_exception(
                RequestTimeoutError(
                    f"{conn.protocol.endpoint} did not answer {name} within {seconds} "
                    "(request_timeout): it may or may not have been applied; the "
                    "connection was closed and is made again"
                )
            )
            future.exception()  # (retrieved: a release nobody awaits does not warn)
        why = f"no answer to {name} within {seconds} (request_timeout)"
        log.warning("%s: %s; closing the connection", conn.protocol.endpoint, why)
        self._link.lost(conn, DisconnectedError(why))
