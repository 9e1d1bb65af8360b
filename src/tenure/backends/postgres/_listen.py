"""The one LISTEN connection of a client, and who hears what on it.

Every change commits a ``pg_notify`` on its node's channel (``channel(node)``:
``tn_`` and a hash of the schema and node) with a small payload naming what
changed: ``s<name>`` a semaphore changed (for watchers), ``g<sid>`` a request of
that session was granted or timed out (for its waiters), ``d<name>`` it was deleted by force,
``x<sid>`` a session ended, ``r<sid>`` one was taken over, ``n`` the node was
altered or dropped. Listeners then *read the state back*: a payload never
carries it.

The connection is not pooled (LISTEN belongs to a session of the server). It is
read by an asyncio reader callback on its socket, so a notification is handled as
soon as it arrives, without a polling loop. When it breaks, it is made again
(backoff 50 ms to 2 s, while the client is open), every channel is listened to
again, and **every** subscriber is woken: notifications sent meanwhile are lost,
so each re-reads what it waits on.

The connection asks the server to reclaim it when it goes silent (:mod:`._reclaim`)
and, so that the server never reclaims it while it is fine, runs a heartbeat
(``SELECT 1``) every third of ``idle_session_timeout``; a heartbeat unanswered
within ``connect_timeout`` means the link is cut (a partition): the connection is
dropped and made again, as when it breaks.

Behind a transaction-pooling pgbouncer, LISTEN does not work; :meth:`probe`
finds out (LISTEN a random channel, NOTIFY it from a pooled connection, wait for
it) so that the backend can refuse watches instead of hanging.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import secrets
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import sql

from tenure.backends.postgres._calls import Caller
from tenure.backends.postgres._reclaim import configure_reclaim
from tenure.backends.postgres._url import PgOptions

__all__ = ["PgListener", "channel"]

log = logging.getLogger("tenure.postgres")

Callback = Callable[[], None]
#: Called with the rest of a payload that starts with a prefix (None after a reconnect).
PrefixCallback = Callable[[str | None], None]

#: Seconds between heartbeats when the server never reclaims idle connections.
HEARTBEAT_WITHOUT_IDLE_TIMEOUT = 20.0


def heartbeat_interval(options: PgOptions) -> float:
    """Seconds between two heartbeats of the LISTEN connection: a third of
    ``idle_session_timeout`` (two may be late before the server reclaims it)."""
    if options.idle_session_timeout:
        return options.idle_session_timeout / 3
    return HEARTBEAT_WITHOUT_IDLE_TIMEOUT


def channel(schema: str, node: str) -> str:
    """The notification channel of ``node`` (the database's ``channel()`` agrees)."""
    digest = hashlib.md5(f"{schema}/{node}".encode(), usedforsecurity=False).hexdigest()
    return "tn_" + digest[:24]


class PgListener:
    """The client's LISTEN connection and its subscribers (see the module docstring)."""

    def __init__(self, options: PgOptions) -> None:
        self.options = options
        self.conninfo = options.conninfo
        self.schema = options.schema
        self.connect_timeout = options.connect_timeout
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._users: dict[str, int] = {}  # channel -> nodes' users (sessions)
        self._subs: dict[tuple[str, str], set[Callback]] = {}
        self._prefixed: dict[tuple[str, str], set[PrefixCallback]] = {}
        self._lock = asyncio.Lock()
        self._fd: int | None = None
        self._reconnecting: asyncio.Task[None] | None = None
        self._closing: asyncio.Future[None] | None = None  # a broken connection's close
        self._heartbeat: asyncio.Task[None] | None = None
        self._closed = False

    async def start(self) -> None:
        """Connect (the client's open fails if this does) and start the heartbeat."""
        await self._connect()
        self._heartbeat = asyncio.ensure_future(self._beat())

    async def _beat(self) -> None:
        interval = heartbeat_interval(self.options)
        while not self._closed:  # bounded by the client's life: close() cancels it
            await asyncio.sleep(interval)
            try:
                await self._run(sql.SQL("SELECT 1").format(), within=self.connect_timeout)
            except psycopg.Error as error:  # not a lost link, yet the connection is unwell
                log.info("LISTEN connection heartbeat failed: %s", error)
                self._broken()

    async def _connect(self) -> None:
        conn = await psycopg.AsyncConnection.connect(
            self.conninfo, autocommit=True, connect_timeout=max(2, round(self.connect_timeout))
        )
        try:
            await configure_reclaim(conn, self.options)
        except BaseException:
            await _close_quietly(conn)
            raise
        conn.add_notify_handler(self._on_notify)
        self._conn = conn
        for name in list(self._users):
            await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(name)))
        self._watch_socket()

    def _watch_socket(self) -> None:
        assert self._conn is not None
        self._fd = self._conn.pgconn.socket
        asyncio.get_running_loop().add_reader(self._fd, self._readable)

    def _unwatch_socket(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_reader(self._fd)
            self._fd = None

    def _readable(self) -> None:
        conn = self._conn
        if conn is None:
            return
        try:
            conn.pgconn.consume_input()
            encoding = conn.info.encoding  # the payload is in the connection's encoding
            while (notice := conn.pgconn.notifies()) is not None:
                self._dispatch(
                    notice.relname.decode(encoding, "replace"),
                    notice.extra.decode(encoding, "replace"),
                )
        except psycopg.OperationalError as error:
            log.info("LISTEN connection lost: %s", error)
            self._broken()

    def _on_notify(self, notice: psycopg.Notify) -> None:
        self._dispatch(notice.channel, notice.payload)

    def _dispatch(self, name: str, payload: str) -> None:
        for callback in list(self._subs.get((name, payload), ())):
            try:
                callback()
            except Exception:  # one subscriber's bug must not cost the others their news
                log.exception("a notification's subscriber failed")
        if payload:
            for hears in list(self._prefixed.get((name, payload[0]), ())):
                try:
                    hears(payload[1:])
                except Exception:
                    log.exception("a notification's subscriber failed")

    def _broken(self) -> None:
        self._unwatch_socket()
        conn, self._conn = self._conn, None
        if conn is not None:
            self._closing = asyncio.ensure_future(_close_quietly(conn))
        if not self._closed and (self._reconnecting is None or self._reconnecting.done()):
            self._reconnecting = asyncio.ensure_future(self._reconnect())

    async def _reconnect(self) -> None:
        delay = 0.05
        while not self._closed:
            try:
                async with self._lock:
                    await self._connect()
            except psycopg.Error as error:
                log.info("LISTEN connection: cannot reconnect yet: %s", error)
                self._unwatch_socket()
                await asyncio.sleep(delay)
                delay = min(2.0, delay * 2)
                continue
            # Notifications sent while we were away are lost: everyone reads again.
            for callbacks in list(self._subs.values()):
                for callback in list(callbacks):
                    callback()
            for prefixed in list(self._prefixed.values()):
                for hears in list(prefixed):
                    hears(None)
            return

    async def _run(self, statement: sql.Composed, within: float | None = None) -> None:
        """Run LISTEN/UNLISTEN/NOTIFY or a heartbeat (our reader stands aside
        meanwhile); not answered ``within`` seconds: the connection is cut."""
        async with self._lock:
            conn = self._conn
            if conn is None or self._closed:
                return  # the reconnect listens to every channel again (or we are done)
            self._unwatch_socket()
            try:
                async with asyncio.timeout(within):
                    await conn.execute(statement)
            except (psycopg.OperationalError, TimeoutError) as error:
                log.info("LISTEN connection cut: %s", error or "no answer in time")
                self._broken()
                return
            finally:
                # Even when the caller was cancelled meanwhile: without our reader
                # nothing would hear this client's notifications any more.
                if self._conn is conn and not conn.closed and self._fd is None:
                    self._watch_socket()
                    self._readable()  # what arrived while psycopg read the socket

    async def listen(self, node: str) -> str:
        """Listen to ``node``'s channel (counted: :meth:`unlisten` as often); its name.

        Returns once the LISTEN is in force, also for a user who came while another's
        LISTEN of the channel was in flight (it runs behind it on the same lock).
        """
        name = channel(self.schema, node)
        self._users[name] = self._users.get(name, 0) + 1
        if self._users[name] == 1:
            await self._run(sql.SQL("LISTEN {}").format(sql.Identifier(name)))
        else:
            async with self._lock:  # the first user's LISTEN has run when we get it
                pass
        return name

    async def unlisten(self, node: str) -> None:
        """One user of ``node``'s channel is done with it."""
        name = channel(self.schema, node)
        users = self._users.get(name, 0) - 1
        if users > 0:
            self._users[name] = users
            return
        self._users.pop(name, None)
        if not self._closed:
            await self._run(sql.SQL("UNLISTEN {}").format(sql.Identifier(name)))

    def subscribe(self, name: str, payload: str, callback: Callback) -> Callable[[], None]:
        """Call ``callback`` on each ``payload`` on channel ``name`` (and after a
        reconnect); returns the function that stops it."""
        key = (name, payload)
        self._subs.setdefault(key, set()).add(callback)

        def stop() -> None:
            callbacks = self._subs.get(key)
            if callbacks is not None:
                callbacks.discard(callback)
                if not callbacks:
                    del self._subs[key]

        return stop

    def subscribe_prefix(
        self, name: str, prefix: str, callback: PrefixCallback
    ) -> Callable[[], None]:
        """Call ``callback`` with the rest of each payload on channel ``name`` that starts
        with the one character ``prefix`` (with None after a reconnect: any may have been
        missed); returns the function that stops it."""
        assert len(prefix) == 1
        key = (name, prefix)
        self._prefixed.setdefault(key, set()).add(callback)

        def stop() -> None:
            callbacks = self._prefixed.get(key)
            if callbacks is not None:
                callbacks.discard(callback)
                if not callbacks:
                    del self._prefixed[key]

        return stop

    async def probe(self, caller: Caller, wait: float) -> bool:
        """Whether a NOTIFY sent on a pooled connection reaches this one (not behind a
        transaction-pooling pgbouncer), within ``wait`` seconds."""
        name = "tn_probe_" + secrets.token_hex(8)
        heard = asyncio.Event()
        stop = self.subscribe(name, "probe", heard.set)
        try:
            await self._run(sql.SQL("LISTEN {}").format(sql.Identifier(name)))
            async with caller.pool.connection(timeout=wait) as conn:
                await conn.execute("SELECT pg_notify(%s, 'probe')", [name])
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(heard.wait(), wait)
            await self._run(sql.SQL("UNLISTEN {}").format(sql.Identifier(name)))
        finally:
            stop()
        return heard.is_set()

    async def close(self) -> None:
        """Stop listening and close the connection."""
        self._closed = True
        if self._reconnecting is not None:
            self._reconnecting.cancel()
        if self._heartbeat is not None:
            self._heartbeat.cancel()
        async with self._lock:  # a LISTEN in flight ends first (then the socket is ours)
            self._unwatch_socket()
            conn, self._conn = self._conn, None
        if conn is not None:
            await _close_quietly(conn)


async def _close_quietly(conn: psycopg.AsyncConnection[Any]) -> None:
    with contextlib.suppress(Exception):
        await conn.close()
