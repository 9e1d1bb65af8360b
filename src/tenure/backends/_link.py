"""One connection to one tenure service at a time, made again whenever it is lost. [compiled]

A :class:`Link` is the I/O shell around :class:`~tenure._protocol.ClientConnection`:
it connects (TCP or TLS), says Hello, pipelines requests on the one connection,
hands pushes to its home, pings within the server's idle timeout, and, when the
connection is lost, reconnects with jittered exponential backoff for as long as it
is open.

A service may have several doors (:mod:`tenure.backends._doors`): the servers of a
cluster, of which one leads. One connection attempt tries the leader last named,
then every door; a standby (its Welcome says so, or it refuses an older client's
Hello with NOT_LEADER) is left at once for the leader it names. The leader that
steps down (GoingAway(NOT_LEADER)), like a lost connection, sends the link through
the doors again. A link of one door is a link to one server, as it always was.
Opening one connection (TCP or TLS, Hello in the newest version both speak, a
standby left for its leader) is :mod:`tenure.backends._link_dial`'s, with the
commands each older protocol version lacks. A stopped leader (SIGSTOP) closes
nothing: once a Ping waits a ping interval (``_link_pings``), the link asks the other
doors who leads every ``FOLLOW_PAUSE`` and leaves for the one named (then skipping the
silent one: ``Doors.went_silent``); attempts are that far apart while only standbys answer.

Each request's answer must come within ``request_timeout``, or the request fails and
the connection is replaced (:mod:`tenure.backends._link_deadline`): a server that
answers Pings but no request leaves no caller waiting for ever.

It also keeps the one number the client's safety rests on: :attr:`confirmed_at`,
the monotonic time at which the client *sent* the latest request or ping that the
server has answered on the current connection. The server received that frame
after that instant, so it cannot have detached (and then expired) a session of
this connection before it. Sessions count their recovery window from there
(docs/guarantees.md, "the client never believes in a lease longer than the server
could").

Nothing a server answers after it said it no longer leads confirms anything: the
link leaves that connection at once (its requests in flight fail as cut off), and
a connection to a standby is never the link's connection (unless the link was made
to ask any member about the cluster, ``LinkOptions.accept_standby``).

Its home (:class:`LinkHome`: a shard of :mod:`tenure.backends.remote`) gets three
calls: ``push(effect)`` for each Push, ``connected(welcome)``, awaited after each
handshake before any waiting request may go out (it re-attaches sessions with
:meth:`Link.call_now`), and ``disconnected()`` when a connection is lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
import ssl
from collections.abc import Awaitable, Coroutine
from typing import Any, Final, TypeVar

from tenure._core import Command
from tenure._protocol import (
    Failure,
    GoingAway,
    LocalProtocolError,
    Pong,
    Push,
    Reply,
    Request,
    ServerMessage,
    Welcome,
)
from tenure._protocol.messages import (
    PROTOCOL_VERSION,
)
from tenure.backends._doors import Door, Doors
from tenure.backends._link_conn import DisconnectedError, LinkConnection, LinkHome
from tenure.backends._link_deadline import RequestDeadlines
from tenure.backends._link_dial import NEWER, LinkOptions, check_version, greet, leader_elsewhere
from tenure.backends._link_pings import FOLLOW_PAUSE, Keepalive
from tenure.backends._link_words import (
    attempt_error,
    describe_error,
    failure_words,
    refused_locally,
    standby_words,
)
from tenure.errors import (
    ClientClosedError,
    ErrorCode,
    NotLeaderError,
    TenureError,
    UnavailableError,
    error_from_code,
    leader_named,
)

R = TypeVar("R")

__all__ = [
    "FOLLOW_PAUSE",
    "DisconnectedError",
    "Doors",
    "Door",
    "Link",
    "LinkOptions",
    "LinkHome",
    "describe_error",
    "refused_locally",
]

#: The reconnect jitter's own generator: the random module's shared one is the
#: application's (a library that draws from it moves a seeded program's sequence).
_JITTER: Final = random.Random()
log = logging.getLogger("tenure.client")


class Link:
    """See the module docstring."""

    def __init__(self, doors: Doors | Door, options: LinkOptions, home: LinkHome) -> None:
        #: The service's doors, the endpoint connected last, the leader named last.
        self.doors = doors if isinstance(doors, Doors) else Doors([doors])
        self.options = options
        self._home = home
        self._loop = asyncio.get_running_loop()
        self._conn: LinkConnection | None = None
        self._ready = asyncio.Event()  # a connection is up and its sessions re-attached
        self._is_ready = False  # _ready.is_set(), read on every request without a call
        self._closing = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._last_id = 0
        #: Which connection this is (1 for the first); grows with each handshake.
        self.epoch = 0
        #: See the module docstring; frozen while disconnected.
        self.confirmed_at = self._loop.time()
        #: When the last answer or push was read (-inf: none): what the client was told
        #: was committed by then (a standby's read: tenure.backends._standby_reads).
        self.heard_at = -math.inf
        #: The Welcome of the current (or last) connection.
        self.welcome: Welcome | None = None
        #: The protocol version spoken to each server that refused the newest (by
        #: address): kept while the link's connection lasts, so what a newer version
        #: added is then UnsupportedError there; forgotten when it is lost (a server
        #: upgraded was restarted: a rolling upgrade's last leader speaks the newest).
        self._versions: dict[str, int] = {}
        self.last_error: BaseException | None = None
        #: Its pings (``_link_pings``): confirming an idle connection, finding it dead.
        self.keepalive = Keepalive(self, options.connect_timeout)
        #: Its requests' deadlines (``_link_deadline``): an answer past it replaces the connection.
        self.deadlines = RequestDeadlines(self, options.request_timeout)
        self._reconnector: asyncio.Task[None] | None = None
        #: The pause before the next connection attempt while reconnecting, in seconds.
        self.pause = 0.0
        self._heard_standby = False  # whether the last attempt heard a standby

    @property
    def endpoint(self) -> Door:
        """The server connected now, or last (before any connection: the first door)."""
        return self.doors.current

    @property
    def closing(self) -> bool:
        """Whether :meth:`aclose` was called."""
        return self._closing

    @property
    def connected(self) -> bool:
        """Whether requests can go out now."""
        return self._ready.is_set()

    @property
    def current(self) -> LinkConnection | None:
        """The connection now, set up or not (None while there is none)."""
        return self._conn

    @property
    def ready(self) -> bool:
        """Whether :meth:`call` sends at once (a connection up and set up), rather
        than waiting for one first."""
        conn = self._conn
        return conn is not None and not conn.going_away and self._is_ready

    # -- life -----------------------------------------------------------------------

    async def open(self) -> None:
        """Connect the first time; raises what stopped it (nothing is retried)."""
        try:
            await self._connect()
        except BaseException as error:
            await self.aclose()
            if isinstance(error, OSError) and not isinstance(error, TenureError):
                why = describe_error(error)
                raise UnavailableError(f"cannot connect to {self.endpoint}: {why}") from error
            raise
        self.spawn(self.keepalive.run())

    def open_in_background(self) -> None:
        """Connect, trying again as after a lost connection until it is up (a call waits
        for it within its bound): a server that may be down, as a service's cell."""
        self.spawn(self.keepalive.run())
        self._reconnector = self.spawn(self._reconnect())

    async def aclose(self) -> None:
        """Stop reconnecting, close the connection, fail what still waits."""
        self._closing = True
        self._ready.clear()
        self._is_ready = False
        for task in list(self._tasks):
            task.cancel()
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.flush()  # (a release written on leaving a block may wait for the turn's end)
            conn.fail_all(ClientClosedError("the client was closed before the answer came"))
            conn.transport.close()
            with contextlib.suppress(OSError, ssl.SSLError):
                await conn.protocol.closed
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def need_pings_every(self, seconds: float) -> None:
        """Confirm the connection at least this often (the shortest wish wins)."""
        self.keepalive.need_every(seconds)

    def drop(self) -> None:
        """Abort the current connection (it is then made again): for tests and errors."""
        if self._conn is not None:
            self.lost(self._conn, DisconnectedError("the connection was dropped"))

    # -- requests -------------------------------------------------------------------

    def call(self, command: Command[R], *, wait_until: float | None = None) -> Awaitable[R]:
        """Send ``command`` once a connection is ready; await its reply, or its error.

        Waits for a connection until ``wait_until`` (loop time; None: forever), then
        raises UnavailableError. Raises :class:`DisconnectedError` if the connection is
        lost before the answer, :class:`~tenure.errors.RequestTimeoutError` if no answer
        came within ``request_timeout`` (the connection is then replaced:
        ``_link_deadline``): either way the command may or may not have been applied.

        With a connection ready (nearly always) the request is written at once and
        the awaitable is its answer's future: a request costs no coroutine here.
        """
        conn = self._conn
        if conn is None or conn.going_away or not self._is_ready:
            return self._call_when_ready(command, wait_until)
        return self._request(conn, command)

    def call_if_ready(self, command: Command[R]) -> asyncio.Future[R] | None:
        """:meth:`call` if a connection is ready (the request sent in this turn of the
        loop, ahead of any later one: its answer's future), else None, having sent
        nothing. For a request nobody waits on: it leaves at the turn's end, with
        what the caller asks next (:meth:`LinkConnection.send`'s ``defer``)."""
        conn = self._conn
        if conn is None or conn.going_away or not self._is_ready:
            return None
        return self._request(conn, command, defer=True)

    async def _call_when_ready(self, command: Command[R], wait_until: float | None) -> R:
        conn = await self._ready_connection(wait_until)
        return await self._request(conn, command)

    async def wait_ready(self, wait_until: float | None = None) -> None:
        """Until a connection is up and set up (its sessions re-attached): see :meth:`call`."""
        await self._ready_connection(wait_until)

    async def _ready_connection(self, wait_until: float | None) -> LinkConnection:
        while not self._ready.is_set() or self._conn is None or self._conn.going_away:
            if self._closing:
                raise ClientClosedError("the client is closed")
            try:
                async with asyncio.timeout_at(wait_until):
                    await self._ready.wait()
            except TimeoutError:
                last = self.last_error
                why = "still connecting" if last is None else f"last error: {describe_error(last)}"
                raise UnavailableError(f"no connection to {self.doors} ({why})") from None
        return self._conn

    async def call_now(self, command: Command[R]) -> R:
        """Send on the connection being set up (for ``LinkHome.connected``)."""
        if self._conn is None:
            raise DisconnectedError("the connection was lost")
        return await self._request(self._conn, command)

    def request_whole(self, command: Command[R], fields: dict[str, Any]) -> asyncio.Future[Reply]:
        """Send ``command`` with the Request's other ``fields`` on the connection that
        :meth:`wait_ready` waited for (now); the future of its whole Reply."""
        conn = self._conn
        if conn is None or conn.going_away or not self._is_ready:
            raise DisconnectedError(f"no connection to {self.endpoint} is ready")
        future = self._request(conn, command, fields=fields)
        conn.whole.add(self._last_id)
        return future  # type: ignore[return-value]

    def _request(
        self, conn: LinkConnection, command: Command[R], *, defer: bool = False, fields: Any = None
    ) -> asyncio.Future[R]:
        """Send ``command`` on ``conn`` now; the future of its answer.

        A plain function: the request is written before the caller awaits anything,
        and awaiting costs one future (no coroutine of its own). If the caller is
        cancelled, the entry stays until the answer comes.
        """
        if type(command) in NEWER:
            check_version(self.endpoint, conn.codec.version or PROTOCOL_VERSION, command)
        self._last_id += 1
        request_id = self._last_id
        try:
            plain = fields is None  # (a standby's read: the Request's other fields too)
            request = (
                Request(request_id, command) if plain else Request(request_id, command, **fields)
            )
            data = conn.codec.send(request)  # raises before anything is sent
        except LocalProtocolError as error:
            raise refused_locally(error) from None
        loop = self._loop
        future: asyncio.Future[R] = loop.create_future()
        conn.pending[request_id] = (future, loop.time(), command)
        if conn.watchdog is None:
            self.deadlines.watch(conn)
        conn.send(data, defer=defer)
        return future

    # -- connecting -----------------------------------------------------------------

    async def _connect(self) -> None:
        """One attempt: the doors in turn (:mod:`tenure.backends._doors`) until a
        connection is up and set up; else what stopped it, naming every door tried."""
        attempt = self.doors.attempt(self._loop.time())
        errors: list[BaseException] = []
        while (endpoint := attempt.next()) is not None:
            try:
                conn, welcome, sent_at = await greet(
                    self, self.options, self._versions, len(self.doors.doors) > 1, endpoint
                )
            except NotLeaderError as error:
                self.doors.heard(error.leader)
                attempt.failed(endpoint, standby_words(error.leader), standby=True)
                errors.append(error)
            except LocalProtocolError as error:
                raise refused_locally(error) from None  # ours: no door would take it
            except ClientClosedError:
                raise
            except (OSError, TenureError) as error:  # TimeoutError included
                attempt.failed(endpoint, failure_words(endpoint, error))
                errors.append(error)
            else:
                await self._set_up(endpoint, conn, welcome, sent_at)
                return
        self._heard_standby = attempt.heard_standby
        raise attempt_error(self.doors, attempt, errors)

    async def _set_up(
        self, endpoint: Door, conn: LinkConnection, welcome: Welcome, sent_at: float
    ) -> None:
        """Make ``conn`` the link's connection; ready once its home has set it up."""
        self._conn = conn
        self.doors.connected(endpoint)
        self.epoch += 1
        self.confirmed_at = sent_at
        self.welcome = welcome
        self.last_error = None
        conn.protocol.start(conn)
        if not self._still(conn):  # lost at once (what followed the Welcome said so)
            raise DisconnectedError(f"lost the connection to {endpoint}: {self._lost_why()}")
        try:
            await self._home.connected(welcome)
        except BaseException as error:
            self.lost(conn, error)
            raise
        if not self._still(conn):
            # Lost while its home set it up (a leader that stepped down meanwhile): this
            # attempt failed, and the reconnection goes on. (Returning would end the
            # reconnection task with no connection, and ``lost`` starts none while it
            # runs: the client never connected again. The simulation's cluster seed
            # 43057, tests/sim/test_found.py.)
            raise DisconnectedError(f"lost the connection to {endpoint}: {self._lost_why()}")
        self._ready.set()
        self._is_ready = True
        self.keepalive.welcomed(welcome.idle_timeout)

    def _lost_why(self) -> str:
        """Why the connection just set up was lost: ``last_error``, read in a call of its
        own (in :meth:`_set_up`, mypy keeps it narrowed to the None assigned there
        across ``protocol.start``, which may set it, and the compiled build checked that
        read against None: TypeError, the reconnection task ended; the simulation's
        cluster seed 43057, tests/sim/test_found.py)."""
        return "closed at once" if self.last_error is None else describe_error(self.last_error)

    def _still(self, conn: LinkConnection) -> bool:
        """Whether ``conn`` is still the link's connection (read in a call of its own:
        after ``self._conn = conn`` mypy keeps ``_conn`` narrowed to it across the calls
        that may lose it, and the compiled build checks each read against that: a read
        of None raised TypeError in _set_up and ended the reconnection task, found by the
        simulation, tests/sim/test_found.py)."""
        return self._conn is conn

    async def _reconnect(self) -> None:
        delay = self.options.backoff_initial
        while not self._closing:
            self._heard_standby = False
            try:
                await self._connect()
                return
            except (OSError, TimeoutError, TenureError) as error:
                self.last_error = error
                log.debug("reconnecting to %s failed: %s", self.doors, error)
            if self._heard_standby:  # a leader is being elected: look again soon
                delay = min(delay, FOLLOW_PAUSE)
            self.pause = _JITTER.uniform(delay / 2, delay)
            await asyncio.sleep(self.pause)
            delay = min(delay * 2, self.options.backoff_max)

    # -- the connection's life ------------------------------------------------------

    def receive(self, conn: LinkConnection, event: ServerMessage) -> bool:
        """Handle one event of ``conn``; whether ``conn`` is still this link's after it."""
        if isinstance(event, Push):
            self.heard_at = self._loop.time()
            self._home.push(event.effect)
        elif type(event) is Reply or type(event) is Failure:
            future, sent_at, _command = conn.pending.pop(event.request_id)
            self.heard_at = self._loop.time()
            if isinstance(event, Reply):
                self.confirmed_at = max(self.confirmed_at, sent_at)
                if conn.whole and event.request_id in conn.whole:
                    conn.whole.discard(event.request_id)
                    if not future.done():
                        future.set_result(event)
                elif not future.done():
                    future.set_result(event.value)
            elif event.code == ErrorCode.NOT_LEADER and not self.options.accept_standby:
                self._deposed(conn, event.message, future)
                return False
            else:
                self.confirmed_at = max(self.confirmed_at, sent_at)
                if not future.done():
                    future.set_exception(error_from_code(event.code, event.message))
            if conn.going_away and not conn.pending:
                self.lost(conn, DisconnectedError(f"{self.endpoint} went away"))
        elif isinstance(event, Pong):
            pinged_at = conn.pings.pop(event.nonce, None)
            if pinged_at is not None:
                self.confirmed_at = max(self.confirmed_at, pinged_at)
        elif isinstance(event, GoingAway):
            if event.code == ErrorCode.NOT_LEADER and not self.options.accept_standby:
                self._deposed(conn, event.reason, None)
                return False
            # No new requests here; those in flight are still answered, then it closes.
            log.info("%s is going away: %s", self.endpoint, event.reason)
            conn.going_away = True
            self._ready.clear()
            self._is_ready = False
            if not conn.pending:  # else once the last answer is in
                self.lost(conn, DisconnectedError(f"{self.endpoint} went away: {event.reason}"))
        return self._conn is conn

    def _deposed(
        self, conn: LinkConnection, message: str, future: asyncio.Future[Any] | None
    ) -> None:
        """The server no longer leads: leave the connection now, for the leader it names.

        Nothing it answers from here on confirms a session (the sessions' state is
        the new leader's), so its answers are not waited for: the requests in flight
        fail as cut off, and are sent again on the leader as after any lost
        connection. ``future``: the request it refused (it was not applied).
        """
        self.doors.heard(leader_named(message))
        why = f"{self.endpoint} no longer leads: {message}"
        if future is not None and not future.done():
            future.set_exception(DisconnectedError(f"{why} (not applied)"))
            future.exception()
        log.info("%s", why)
        self.lost(conn, DisconnectedError(why))

    def lost(self, conn: LinkConnection, error: BaseException) -> None:
        """Give ``conn`` up (``error`` says why): fail what waits on it, reconnect."""
        if self._conn is not conn:
            return
        self._conn = None
        self._ready.clear()
        self._is_ready = False
        self.last_error = error
        conn.transport.abort()
        why = describe_error(error)
        conn.fail_all(DisconnectedError(f"lost the connection to {self.endpoint}: {why}"))
        log.info("lost the connection to %s: %s", self.endpoint, why)
        self._home.disconnected()
        self._versions.clear()  # each door is asked the newest version again
        if not self._closing and (self._reconnector is None or self._reconnector.done()):
            self._reconnector = self.spawn(self._reconnect())

    async def leader_elsewhere(self, silent: Door) -> Door | None:
        """The leader another door names, when it is not ``silent`` (the endpoint that
        stopped answering); None if none does (``_link_dial.leader_elsewhere``)."""
        return await leader_elsewhere(self, self.options, self._versions, self.doors, silent)

    def spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run ``coro`` in a task of the link's, ended when it closes."""
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task
