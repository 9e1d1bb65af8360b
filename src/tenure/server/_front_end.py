"""The hook through which the server runs a front end for another lock service.

A front end (:mod:`tenure.compat`) answers the clients of another lock service
from the server's journaled engine. The server does for its connections what it
does for every connection: accepts them (on the main port, where a first byte
that cannot start a native frame hands the connection over, and on the front
end's own :attr:`FrontEnd.port` if it has one), counts them against
``max_connections``, writes their outboxes after each commit and closes them at
shutdown; and it routes to :meth:`FrontEnd.deliver` the effects of the engine
sessions the front end attached. What a request means, and the sessions and
housekeeping behind it, are the front end's.

A server runs one front end, made by a :data:`FrontEndFactory` from the
:class:`Plug` it lends: dflockd's (:func:`dflockd`) unless told otherwise. With
``--ydb-port`` it also runs the YDB face (:class:`YdbFace`, made by
:func:`ydb_face`): not a front end on the server's sockets but a gRPC server of its
own, whose streams are written by the same outboxes and whose sessions' effects are
routed to it by the same session table (both are a :class:`Face`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from tenure._core import Effect
from tenure.server._config.serve_config import ServeConfig
from tenure.server._driver import JournaledEngine
from tenure.server._net.auth import Tokens
from tenure.server._net.outbox import Connection
from tenure.server._observe import Observer

ConnT = TypeVar("ConnT", bound=Connection)


@dataclass(frozen=True, slots=True)
class Plug:
    """What the server lends a front end.

    ``send(conn, data)`` queues bytes for ``conn``, written once the next commit is
    on disk, ``finish(conn)`` closes it once they are; ``attach(session_id)`` routes
    the effects of an engine session to the front end's :meth:`FrontEnd.deliver`,
    ``forget(session_id)`` drops that route;
    ``connections()`` is how many client connections the server has open;
    ``observer`` is told of each request the front end answers (None: not measured).
    """

    config: ServeConfig
    host: JournaledEngine
    tokens: Tokens | None  # the auth file's (None: no auth file)
    send: Callable[[Connection, bytes], None]
    finish: Callable[[Connection], None]
    attach: Callable[[int], None]
    forget: Callable[[int], None]
    connections: Callable[[], int]
    observer: Observer | None = None


class Face(Hashable, Protocol):
    """What the session table routes engine effects to, besides native connections:
    a front end, or the YDB face."""

    @property
    def protocol(self) -> str:
        """The protocol's name, in the server's logs and metrics (``dflockd``, ``ydb``)."""
        ...

    def deliver(self, effect: Effect) -> None:
        """An engine effect for one of the sessions it attached."""
        ...


class FrontEnd(Face, Protocol[ConnT]):
    """A front end as the server sees it (module docstring); hashable, as the session
    table routes effects to it."""

    @property
    def port(self) -> int:
        """A port to listen on for this front end's clients only (0: none)."""
        ...

    def start(self) -> None:
        """The server listens: start any background work."""
        ...

    def stop(self) -> None:
        """The server is stopping: refuse new work from now on, stop background work."""
        ...

    def connect(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: str
    ) -> ConnT:
        """A connection that speaks this front end's protocol, before its first read."""
        ...

    async def serve(self, conn: ConnT) -> None:
        """Serve ``conn`` until it ends (the server then writes what it is owed, and closes it).

        Raises:
            OSError: the connection broke.
        """
        ...


class YdbFace(Face, Protocol):
    """The YDB face (``--ydb-port``, :mod:`tenure.compat.ydb`): a listener of its own
    (gRPC), whose streams the server's outboxes write like its connections."""

    @property
    def port(self) -> int:
        """The port it listens on (0 until started)."""
        ...

    async def start(self) -> int:
        """Listen; returns the port bound (``--ydb-port``).

        Raises:
            OSError: the port cannot be bound.
        """
        ...

    def stop(self) -> None:
        """The server is stopping: refuse new calls, end every stream (sessions kept)."""
        ...

    async def close(self, grace: float) -> None:
        """Wait up to ``grace`` seconds for the streams to end, then stop listening."""
        ...

    def abort(self) -> None:
        """The journal failed: drop every stream unanswered."""
        ...

    def connections(self) -> int:
        """The streams open now."""
        ...


#: Makes a server's front end from what the server lends it.
FrontEndFactory = Callable[[Plug], FrontEnd[Any]]


def dflockd() -> FrontEndFactory:
    """The dflockd front end (docs/dflockd.md), the one every server runs by default.

    Imported when a server is made rather than with this module: :mod:`tenure.compat`
    builds on the server's modules, so the server package must not import it first.
    """
    from tenure.compat.dflockd.service import DflockdService

    return DflockdService.plugged


def ydb_face() -> Callable[[Plug], YdbFace]:
    """The YDB face's maker (docs/ydb.md), for a server with ``--ydb-port``.

    Imported only then: it needs the ``ydb`` extra (grpcio, YDB's messages).
    """
    from tenure.compat.ydb.service import YdbService

    return YdbService.plugged
