"""``postgres://``: the state lives in PostgreSQL tables, the logic in PL/pgSQL.

``postgres://user:password@host:5432/dbname?schema=tenure`` (``postgresql://``
too). Tables are created on first use (or by ``tenure migrate URL``) in the
schema named by ``?schema=`` (default ``tenure``); layout in
:mod:`tenure.backends.postgres._ddl`. Each operation is one ``SELECT
schema.op(...)``: one round trip, one transaction under READ COMMITTED, rows
locked (never advisory locks: they die with the connection and break behind
poolers). Options: :mod:`tenure.backends.postgres._url`.

* **Fencing tokens** come from the schema's ``tokens`` sequence, taken under the
  semaphore's row lock: each semaphore's tokens increase in grant order, across
  restarts (docs/guarantees.md, promise 2); no row is written by every grant, so
  grants of different semaphores share their commits' WAL flushes.
* **Time** is the database's ``clock_timestamp()``: session expiry and acquire
  timeouts are judged there; clients only trigger the checks by timers at the
  deadlines the database names (:mod:`._reaper`).
* **Wake-ups** are LISTEN/NOTIFY on one connection per client (:mod:`._listen`);
  a notification names what changed and the listener reads the state back. A
  change notifies watchers only of a semaphore a watch registered
  (:mod:`._sql_watches`): a NOTIFY serializes commits database-wide.
  Behind a transaction-pooling pgbouncer, LISTEN does not work: the client finds
  out at connect (a probe) and then does not declare WATCH (``watch_semaphore``
  raises UnsupportedError) and its waiters re-check every ``recheck_interval``.
* **DURABLE** is declared when the server runs with ``fsync`` and
  ``synchronous_commit`` on; **REPLICATED** only when it also waits for a
  synchronous standby (``synchronous_standby_names`` set, ``synchronous_commit``
  at least ``remote_write``).
* **LOCK_DELAY**: a holder whose session *expired* holds its semaphore back for
  the node's ``lock_delay`` (``semaphores.blocked_until``, database time); the
  reap timer at its end serves the queue.
* **LEASE_TTL**: a node's ``default_lease`` gives each grant a deadline (database
  time) that ``renew`` moves; the reap timer at it ends a grant nobody renewed, and
  its holder's client hears ``lease_lost``.
* **ALL_OR_NONE**: ``acquire_all`` waits in every queue with one arrival and is
  granted all at once, in one transaction, by whichever transaction makes it fit
  (:mod:`._sql_sets`, :mod:`._sql_queues`: the order of row locks that keeps
  overlapping requests from deadlocking in PostgreSQL too).
* **No long_hold** (Capability.LONG_HOLDS): only a tenure server has a log and an
  audit log to tell of long holds in; a node with ``long_hold`` set is refused with
  UnsupportedError.

Layer (CONTRIBUTING.md): its modules may import each other, tenure.backends,
tenure._core, tenure._url_options and tenure.errors.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
from collections.abc import Mapping
from typing import Any, ClassVar, Final

import psycopg
from psycopg_pool import AsyncConnectionPool

from tenure._core.claims import check_claim_id
from tenure._core.stored_config import config_to_stored, current_names
from tenure._core.values import (
    NodeConfig,
    NodeDescription,
    check_description,
    check_identity,
    check_name,
)
from tenure.backends._base import Capability, SessionListener, SessionTicket
from tenure.backends._capability import refuse_long_hold
from tenure.backends._opener import NewSession, SessionFactory
from tenure.backends._session import StoreSession
from tenure.backends._session_class import session_class
from tenure.backends._store_listing import ListingModule, StoreListings
from tenure.backends._turns import Turns
from tenure.backends.postgres import _listing
from tenure.backends.postgres._calls import Caller
from tenure.backends.postgres._listen import PgListener
from tenure.backends.postgres._migrate import migrate
from tenure.backends.postgres._reaper import Reaper
from tenure.backends.postgres._reclaim import check_pooled, configure_reclaim, refused_for_slots
from tenure.backends.postgres._store import PgStore
from tenure.backends.postgres._url import PgOptions, parse_url
from tenure.errors import (
    InvalidArgumentError,
    SessionExpiredError,
    TenureError,
    UnavailableError,
)

__all__ = ["PgBackend", "open_backend"]

#: What every postgres:// client keeps, whatever the server's settings.
ALWAYS: Final = frozenset(
    {
        Capability.FENCING_TOKENS,
        Capability.FIFO,
        Capability.RATE_RESERVATION,
        Capability.SESSION_RECOVERY,
        Capability.LOCK_DELAY,
        Capability.LEASE_TTL,
        Capability.ALL_OR_NONE,
        Capability.CLAIMS,
        Capability.HANDOFF,
        Capability.MAX_HOLD,
    }
)

#: The scheme tickets of this backend carry (``postgresql://`` URLs too).
SCHEME: Final = "postgres"

#: Tries of a node settings' compare-and-set before giving up (others keep changing them).
ALTER_TRIES: Final = 100


def _config_json(config: NodeConfig) -> str:
    # The jsonb keeps the names it always had (session_timeout, which the PL/pgSQL
    # reads too): see _core.stored_config.
    return json.dumps(config_to_stored(config))


def config_of(value: Mapping[str, Any]) -> NodeConfig:
    """The NodeConfig a node row's jsonb holds (stored names: see _core.stored_config)."""
    fields: dict[str, Any] = current_names(value)
    for name in ("recovery_window", "lock_delay"):
        fields[name] = float(fields[name])
    for name in ("default_lease", "max_hold", "long_hold"):
        if fields.get(name) is not None:
            fields[name] = float(fields[name])
    return NodeConfig(**fields)


class PgBackend(StoreListings, SessionFactory):
    """A backend whose state lives in PostgreSQL (module docstring)."""

    scheme: ClassVar[str] = SCHEME

    listing: ClassVar[ListingModule] = _listing  # its listings (StoreListings)

    def __init__(
        self,
        options: PgOptions,
        pool: AsyncConnectionPool[Any],
        listener: PgListener,
        capabilities: frozenset[Capability],
    ) -> None:
        self.options = options
        self.pool = pool
        self.caller = Caller(pool, options.schema, options.connect_timeout)
        self.listener = listener
        self.reaper = Reaper(self.caller)
        self._capabilities = capabilities
        #: Whether notifications reach this client (else: no WATCH, waiters re-check).
        self.notifications = Capability.WATCH in capabilities
        #: The stores of this client's live sessions, by session id.
        self.sessions: dict[int, PgStore] = {}
        self._joins: Turns[tuple[str, str]] = Turns()
        self._closed = False

    def joining(self, node: str, name: str) -> contextlib.AbstractAsyncContextManager[None]:
        """Held while an acquire of this client joins ``name``'s queue.

        Acquires of one client (all its sessions) reach a semaphore's queue one at a
        time, in the order they were made (turns are handed over first come, first
        served): concurrent calls on separate pooled connections could commit in
        either order, so FIFO holds down to this client's calls only this way.
        """
        return self._joins.held((node, name))

    @property
    def capabilities(self) -> frozenset[Capability]:
        """What this database, as configured, lets tenure promise (module docstring)."""
        return self._capabilities

    async def node_config(self, name: str) -> NodeConfig:
        """A node's settings, read now."""
        return (await self.describe_node(name)).config

    async def create_node(self, name: str, config: NodeConfig) -> None:
        """Create a node (its row)."""
        if not isinstance(config, NodeConfig):
            raise InvalidArgumentError(f"config must be a NodeConfig, got {config!r}")
        config = config.validated()
        refuse_long_hold(SCHEME, config.long_hold)
        await self.caller.call("create_node", [name, _config_json(config)], idempotent=False)

    async def describe_node(self, name: str) -> NodeDescription:
        """A node's settings and counts."""
        answer = await self.caller.call("describe_node", [name])
        return NodeDescription(
            name, config_of(answer["config"]), int(answer["sessions"]), int(answer["semaphores"])
        )

    async def alter_node(self, name: str, changes: Mapping[str, object]) -> NodeDescription:
        """Change settings with a compare-and-set of the node's version."""
        bad = [key for key in changes if not isinstance(key, str)]
        if bad:
            raise InvalidArgumentError(f"node setting names must be strings, got {bad!r}")
        for _ in range(ALTER_TRIES):
            answer = await self.caller.call("describe_node", [name])
            new = config_of(answer["config"]).replace(**changes)
            refuse_long_hold(SCHEME, new.long_hold)
            if await self.caller.call("alter_node", [name, _config_json(new), answer["version"]]):
                return await self.describe_node(name)
        raise UnavailableError(f"node {name!r}: its settings kept changing; try again")

    async def release_claim(self, node: str, name: str, claim_id: str) -> bool:
        """One function on PostgreSQL's clock (:mod:`._sql_claims`). Not sent again after
        a lost answer: a first that released it would make the second say False
        (UnavailableError then says the outcome is unknown)."""
        node, name = check_name("node", node), check_name("semaphore", name)
        claim_id = check_claim_id(claim_id)
        released = await self.caller.call("release_claim", [node, name, claim_id], idempotent=False)
        return bool(released)

    async def drop_node(self, name: str, force: bool) -> None:
        """Drop a node; its sessions (live ones only with ``force``) end with it."""
        await self.caller.call("drop_node", [name, force], idempotent=False)
        for store in list(self.sessions.values()):
            if store.node == name:
                store.session.dropped()

    async def create_session(self, asked: NewSession, listener: SessionListener) -> StoreSession:
        """Open a session: its row, its heartbeat, its node's channel."""
        node, timeout = asked.node, asked.timeout
        description, identity = asked.description, asked.identity
        check_description(description)
        check_identity(identity)
        await self.listener.listen(node)
        self.reaper.add(node)
        try:
            secret = secrets.token_bytes(16)
            sent_at = asyncio.get_running_loop().time()
            answer = await self.caller.call(
                "open_session",
                [node, secret, timeout, description, identity.host, identity.pid, identity.name],
                idempotent=False,
            )
        except BaseException:
            self.reaper.remove(node)
            await self.listener.unlisten(node)
            raise
        store = PgStore(
            self, node, int(answer["id"]), secret, 1, float(answer["window"]), confirmed_at=sent_at
        )
        session = self._opened(store, listener)
        self.reaper.due(node, answer.get("next"))
        return session

    def _opened(self, store: PgStore, listener: SessionListener) -> StoreSession:
        session = session_class(self._capabilities)(
            store,
            listener,
            acquiring=store.acquirer,
            admin=store.admin,
            watching=store.admin,
            scheme=SCHEME,
            node=store.node,
            session_id=store.sid,
            window=store.window,
            withdraw_wait=self.options.withdraw_wait,
        )
        self.sessions[store.sid] = store
        return session

    async def resume_session(
        self, node: str, ticket: SessionTicket, listener: SessionListener
    ) -> StoreSession:
        """Take the ticket's live session back (``resume_session``: its fence bumped,
        its waits withdrawn, its holds kept)."""
        await self.listener.listen(node)
        self.reaper.add(node)
        try:
            sent_at = asyncio.get_running_loop().time()
            answer = await self.caller.call(
                "resume_session", [ticket.session_id, ticket.secret, node]
            )
        except BaseException:
            self.reaper.remove(node)
            await self.listener.unlisten(node)
            raise
        old = self.sessions.get(ticket.session_id)
        if old is not None:  # its owner is this very client: fenced off all the same
            old.session.lose(
                SessionExpiredError(
                    f"session {ticket.session_id} was taken over by a resumed client"
                )
            )
        store = PgStore(
            self,
            node,
            ticket.session_id,
            ticket.secret,
            int(answer["seq"]),
            float(answer["window"]),
            confirmed_at=sent_at,
        )
        session = self._opened(store, listener)
        self.reaper.due(node, answer.get("next"))
        session.adopt(await store.acquirer.holds())
        return session

    def session_ended(self, store: PgStore) -> None:
        """A session ended (closed, lost): stop following its node for it."""
        if self.sessions.get(store.sid) is not store:
            return
        del self.sessions[store.sid]
        self.reaper.remove(store.node)
        if not self._closed:
            task = asyncio.ensure_future(self.listener.unlisten(store.node))
            task.add_done_callback(lambda t: t.cancelled() or t.exception())

    async def aclose(self) -> None:
        """Close every session (at once: with the database down each waits up to
        connect_timeout), then the LISTEN connection and the pool."""
        stores = list(self.sessions.values())
        results = await asyncio.gather(
            *(store.session.close() for store in stores), return_exceptions=True
        )
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, TenureError):
                raise result
        self._closed = True
        await self.reaper.close()
        await self.listener.close()
        await self.caller.lender.close()
        await self.pool.close()


async def _capabilities(
    caller: Caller, listener: PgListener, options: PgOptions
) -> frozenset[Capability]:
    async with caller.pool.connection(timeout=options.connect_timeout) as conn:
        cursor = await conn.execute(
            "SELECT current_setting('fsync'), current_setting('synchronous_commit'), "
            "current_setting('synchronous_standby_names')"
        )
        row = await cursor.fetchone()
    assert row is not None
    fsync, commit, standbys = (str(value) for value in row)
    found = set(ALWAYS)
    if fsync == "on" and commit != "off":
        found.add(Capability.DURABLE)
        if standbys.strip() and commit in ("on", "remote_write", "remote_apply"):
            found.add(Capability.REPLICATED)
    if await listener.probe(caller, options.listen_probe_timeout):
        found.add(Capability.WATCH)
        found.add(Capability.PREFIX_WATCH)
    return frozenset(found)


async def open_backend(url: str, options: Mapping[str, object]) -> PgBackend:
    """Open ``postgres://...`` (see the module docstring); creates the schema if new."""
    parsed = parse_url(url, options)
    limit_ms = round(parsed.request_timeout * 1000)

    async def configure(conn: psycopg.AsyncConnection[Any]) -> None:
        # request_timeout: a call the database has not answered by then is cancelled
        # there (rolled back) and raises UnavailableError here.
        await conn.execute(f"SET statement_timeout = {limit_ms}")
        await configure_reclaim(conn, parsed)

    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        parsed.conninfo,
        min_size=1,
        max_size=parsed.pool_size,
        # No server-side prepared statements: behind a transaction-pooling pgbouncer
        # they would meet other server connections (and a one-function SELECT gains
        # little from them: PL/pgSQL caches its own plans).
        kwargs={"autocommit": True, "prepare_threshold": None},
        configure=configure,
        # A connection the server reclaimed while it sat idle in the pool
        # (idle_session_timeout, a partition) is replaced before use, not failed.
        check=check_pooled,
        open=False,
        timeout=parsed.connect_timeout,
    )
    listener = PgListener(parsed)
    try:
        try:
            # The LISTEN connection first: it is not pooled, so a refusal reaches us
            # with the server's own reason (the pool would only time out).
            await listener.start()
            await pool.open(wait=True, timeout=parsed.connect_timeout)
        except Exception as error:
            if refused_for_slots(error):
                raise UnavailableError(
                    "PostgreSQL refused the connection: its max_connections are all in "
                    "use (each client takes up to pool_size + 1; see docs/backends.md, "
                    f"PostgreSQL): {error}"
                ) from error
            raise UnavailableError(f"cannot connect to PostgreSQL: {error}") from error
        async with pool.connection() as conn:
            await migrate(conn, parsed.schema)
        caller = Caller(pool, parsed.schema, parsed.connect_timeout)
        found = await _capabilities(caller, listener, parsed)
    except BaseException:
        await listener.close()
        await pool.close()
        raise
    return PgBackend(parsed, pool, listener, found)
