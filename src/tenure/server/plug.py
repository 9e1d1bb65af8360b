"""The boundary between the server and its faces: all :mod:`tenure.compat` may import of it.

A **face** is one protocol the server speaks to its clients: the native one
(:mod:`tenure.server._net.native`) and those of other lock services, which live in
:mod:`tenure.compat` and meet the server here only: ``tests/server/test_boundary.py``
fails on any other import of :mod:`tenure.server` from :mod:`tenure.compat`, and on
any import of :mod:`tenure.compat` by the server outside its face registry
(:mod:`tenure.server._faces`, one line per face).

Both sides of the boundary are here.

* What a face tells the server: its :class:`FaceEntry`, in its own folder: its
  settings (:class:`FaceSettings`, rows of the server's own :class:`Setting` type:
  flags, environment variables, config-file keys, help, ranges), which of them turn
  it on and which is its own port, its checks, the address a cluster's member
  advertises for it, what it counts its requests in (a :class:`FaceObserver`, whose
  :class:`CounterFamily` series ``/metrics`` shows), and its maker. The server's
  settings, ``/metrics`` and a cluster's member records are built from the entries.
* What the server lends a face: a :class:`Plug`, that is its host as the
  :class:`HostCalls` a face may make, the auth file's :class:`Tokens`, the outboxes'
  ``send`` and ``finish``, the routing of an engine session's effects to the face, the
  settings (the face reads its own typed: ``plug.config.face(its FaceSettings)``) and
  its observer; and the few things a face works with besides: :class:`Token`,
  :class:`Access`, :func:`denial` and :func:`take_back_denial` (the auth file's
  policy, as on the native protocol), :class:`Connection` (what the outboxes write
  to), :func:`reset`.
* What the server asks of a face: a :class:`Face`, of one of two kinds by how its
  clients reach it. An :class:`AcceptedFace` is served on connections the server
  accepts: on the main port, where a first byte that cannot start a native frame
  hands the connection to it, and on the face's own port if it has one. The
  server counts them against ``--max-connections``, writes their outboxes after each
  commit and closes them at shutdown. A :class:`ListeningFace` listens on its own (a
  gRPC server, say), and its streams are written by the same outboxes.

Either way the server routes to :meth:`Face.deliver` the effects of the engine
sessions the face attached (:attr:`Plug.attach`); what a request means, and the
sessions and housekeeping behind it, are the face's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from tenure._core import Command, Effect, Engine
from tenure._runtime.clock import Clock
from tenure.server._config.face_settings import FaceSettings, S
from tenure.server._config.serve_config import ServeConfig
from tenure.server._config.setting import Setting, in_range, one_of
from tenure.server._net.auth import Access, Token, Tokens, denial, take_back_denial
from tenure.server._net.outbox import Connection, reset
from tenure.server._net.throttle import peer_host
from tenure.server._observe import Auditor, CounterFamily, FaceObserver, record_quota_refusal
from tenure.server._role import STANDALONE_ROLE, Places, Role

__all__ = [
    "AcceptedFace",
    "Access",
    "Auditor",
    "Connection",
    "CounterFamily",
    "Face",
    "FaceEntry",
    "FaceFactory",
    "FaceObserver",
    "FaceSettings",
    "Front",
    "HostCalls",
    "ListeningFace",
    "Places",
    "Plug",
    "Reloading",
    "Role",
    "ServeConfig",
    "Setting",
    "Token",
    "Tokens",
    "denial",
    "in_range",
    "one_of",
    "peer_host",
    "record_quota_refusal",
    "reset",
    "take_back_denial",
]

R = TypeVar("R")
ObserverT = TypeVar("ObserverT")
ConnT = TypeVar("ConnT", bound=Connection)


class HostCalls(Protocol):
    """What a face may ask of the server's host (a :class:`~tenure._runtime.host.Host`):
    the engine's state to read, and its commands, journaled and group-committed like
    the native protocol's."""

    @property
    def engine(self) -> Engine:
        """The engine, for reading its state; it changes only through :meth:`execute`."""
        ...

    @property
    def dead(self) -> bool:
        """Whether the journal failed: nothing more is applied or acknowledged."""
        ...

    @property
    def clock(self) -> Clock:
        """The engine's clock: time the server could hear (its own stalls left out,
        docs/guarantees.md 6e). A face times its clients' silence on it, so that a
        stall of the server is not taken for theirs."""
        ...

    def admit_request(self, actor: str) -> None:
        """Count one request of token ``actor`` ("": none, not counted) against its
        ``requests_per_second``: a face calls it once per request its clients send, at
        the request's door, before any of its work (and never for what it does on its
        own: a disconnect's cleanup, its timers).

        Raises:
            LimitExceededError: the token is over its quota (naming it and the token).
        """
        ...

    def execute(self, command: Command[R], actor: str = "") -> R:
        """Apply ``command`` now, journaled; its effects are delivered even if it fails.

        ``actor``: the name of the token that sends it ("" without an auth file): what
        it makes is that token's, and counts against its quotas (not its rate: the
        request was counted at its door, :meth:`admit_request`).

        Raises:
            The command's error; UnavailableError once the server stops or the journal failed.
        """
        ...

    async def committed(self) -> None:
        """Until what was applied so far is durable (or the journal failed: :attr:`dead`)."""
        ...

    async def caught_up(self) -> None:
        """Until no due deadline is left for the host's slices (at once, mostly): a face
        awaits it before a request's commands, which would otherwise do the rest of a
        mass expiry in their own step (``--step-budget``; the native face holds its
        requests back the same way)."""
        ...


class Front(Protocol):
    """The server accepting on a listening face's port for it (``--max-connections-per-address``
    set): it caps the connections per client address, and relays the others' bytes, as
    they are, to the face's own listener on a loopback port."""

    @property
    def port(self) -> int:
        """The port it listens on."""
        ...

    def peer(self, seen: str) -> str:
        """The client behind a relayed connection, from the peer the face's listener saw
        (gRPC's form: ``ipv4:127.0.0.1:PORT``); ``seen`` if it is no relayed one."""
        ...

    def close(self) -> None:
        """Stop accepting."""
        ...


@dataclass(frozen=True, slots=True)
class Plug:
    """What the server lends a face.

    ``send(conn, data)`` queues bytes for ``conn``, written once the next commit is
    on disk, ``finish(conn)`` closes it once they are; ``attach(session_id)`` routes
    the effects of an engine session to the face's :meth:`Face.deliver`,
    ``forget(session_id)`` drops that route; ``connections()`` is how many client
    connections the server has open; ``observer`` is what the face counts its
    requests in, as its entry made it (:attr:`FaceEntry.observer`; None: not measured;
    :meth:`observer_as` gives it typed); ``secret`` is what the face signs what it hands
    out with (tokens, tickets: the data directory's, or, in a cluster, the one every
    member shares), so that they stay valid across restarts and
    failovers; ``role`` says whether the server leads its
    cluster, and where the leader is (a face sends its clients there, as its
    protocol can: YDB's discovery names the leader's endpoint); ``front(port,
    backend)``, given when a per-address cap is set, accepts on ``port`` for a
    listening face whose own listener is on loopback port ``backend`` (raises
    OSError if ``port`` cannot be bound); ``audit`` is where the face records the
    administrative acts and refusals its clients make (``--audit-log``; None: off):
    its failed logins are recorded by the throttle it shares already.
    """

    config: ServeConfig
    host: HostCalls
    tokens: Tokens | None  # the auth file's (None: no auth file)
    send: Callable[[Connection, bytes], None]
    finish: Callable[[Connection], None]
    attach: Callable[[int], None]
    forget: Callable[[int], None]
    connections: Callable[[], int]
    secret: bytes
    observer: FaceObserver | None = None
    role: Role = STANDALONE_ROLE
    front: Callable[[int, int], Front] | None = None
    audit: Auditor | None = None

    def observer_as(self, kind: type[ObserverT]) -> ObserverT | None:
        """:attr:`observer` as the type the face's entry makes (None: not measured).

        Raises:
            TypeError: it is of another type (the entry and the face disagree).
        """
        observer = self.observer
        if observer is None or isinstance(observer, kind):
            return observer
        raise TypeError(
            f"the face's observer is a {type(observer).__name__}, not a {kind.__name__}"
        )


class Face(Hashable, Protocol):
    """A face of another lock service, as the server sees it (see the module
    docstring; the native face is the server's own); hashable, as the session table
    routes effects to it."""

    @property
    def protocol(self) -> str:
        """The protocol's name, in the server's logs and metrics: its entry's name."""
        ...

    def deliver(self, effect: Effect) -> None:
        """An engine effect for one of the sessions it attached."""
        ...


@runtime_checkable  # (the server tells the two kinds apart once, when it makes them)
class AcceptedFace(Face, Protocol[ConnT]):
    """A face served on connections the server accepts (the module docstring)."""

    @property
    def port(self) -> int:
        """A port the server also listens on, for this face's clients only (0: none)."""
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
        """A connection that speaks this face's protocol, before its first read."""
        ...

    async def serve(self, conn: ConnT) -> None:
        """Serve ``conn`` until it ends (the server then writes what it is owed, and closes it).

        Raises:
            OSError: the connection broke.
        """
        ...


class ListeningFace(Face, Protocol):
    """A face with a listener of its own (the module docstring)."""

    @property
    def port(self) -> int:
        """The port it listens on (0 until started)."""
        ...

    async def start(self) -> int:
        """Listen; returns the port bound.

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


@runtime_checkable  # (the server asks each face once per reload)
class Reloading(Protocol):
    """A face a reload (SIGHUP, ``tenure reload``, :mod:`tenure.server._reload`) tells
    of: it may have files of its own to read again (the YDB port's TLS), and it closes
    the connections of tokens removed or rotated, as the native face does."""

    def prepare_reload(self) -> tuple[str, Callable[[], None]] | None:
        """Load and check the files now; their name and the step that takes them (run
        only once every file of the reload has loaded), or None: nothing to read.

        Raises:
            ConfigError: a file does not load (the reload changes nothing).
        """
        ...

    def tokens_gone(self, names: frozenset[str]) -> int:
        """The tokens ``names`` were removed or rotated: close the connections (or
        streams) that authenticated with them, their sessions kept as on a lost
        connection; how many were closed."""
        ...


#: Makes a face from what the server lends it.
FaceFactory = Callable[[Plug], AcceptedFace[Any] | ListeningFace]


def _always(settings: object) -> bool:
    return True


@dataclass(frozen=True, slots=True)
class FaceEntry(Generic[S]):
    """A face's line in the server's face registry (:mod:`tenure.server._faces`).

    The face's folder defines it, in a module that imports nothing the face itself
    needs besides (a face that needs an extra's library loads without it: its settings
    and help are listed without the extra); ``factory`` imports the face.

    ``settings``: its settings, named ``<name>_...``; ``port_setting``: the row of its
    own port (the server checks that no two of its listeners share one; 0: none);
    ``factory()``: its maker, the face imported; ``enabled(settings)``: whether its
    settings turn it on; ``accepted``: it is an :class:`AcceptedFace`, whose own port
    the server binds (a cluster's member once, for all its terms); ``check(settings)``:
    its checks beyond the rows' ranges (raises ConfigError naming the setting, or the
    extra to install); ``advertise(settings, host, address)``: where a cluster's member
    that advertises ``host`` and its main ``address`` (``HOST:PORT``) says the face's
    clients reach it ("" for nowhere); ``observer()``: makes what it counts its
    requests in (None: it counts nothing), once per server process; ``nodes``: the nodes
    the face keeps of its own (cell ``default``'s leader places them on its cell in the
    service's directory, as every node its state holds: docs/cluster.md, "Cells");
    ``relayed``: an accepted face whose state is its ``nodes``, whose connections every
    other member relays to the leader that serves them (:mod:`tenure.server._net.relay`;
    a face that is not runs on the members of cell ``default`` only).

    Raises (at construction):
        KeyError: ``port_setting`` is not one of its rows.
    """

    settings: FaceSettings[S]
    port_setting: str
    factory: Callable[[], FaceFactory]
    enabled: Callable[[S], bool] = _always
    accepted: bool = False
    check: Callable[[S], None] | None = None
    advertise: Callable[[S, str, str], str] | None = None
    observer: Callable[[], FaceObserver] | None = None
    nodes: tuple[str, ...] = ()
    relayed: bool = False

    def __post_init__(self) -> None:
        self.settings.row(self.port_setting)

    @property
    def name(self) -> str:
        """The face's name: its settings' prefix, its protocol in logs and metrics."""
        return self.settings.face

    @property
    def flag(self) -> str:
        """The flag of its own port (``--<name>-port``)."""
        return self.settings.row(self.port_setting).flag

    def typed(self, config: ServeConfig) -> S:
        """Its settings in ``config``."""
        return config.face(self.settings)

    def port(self, config: ServeConfig) -> int:
        """Its own port in ``config`` (0: none)."""
        port = self.settings.values(self.typed(config))[self.port_setting]
        assert isinstance(port, int)
        return port
