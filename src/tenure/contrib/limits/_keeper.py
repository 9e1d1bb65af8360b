"""The storage's work, once, in asyncio: both storages run a :class:`LimitsKeeper`.

Each key's record (:mod:`._records`) is the data of an *ephemeral* semaphore of the
storage's node, changed by compare-and-set (``semaphore.compare_and_set``: one
atomic step in the store, retried when another process changed it between the read
and the write), so hits from any number of processes count each once.

Why ephemeral: limits' keys are made per client address, per user, per route; a
storage whose records stayed forever would fill the node. An ephemeral semaphore
lives while someone holds it and is deleted, with its data, by the store when the
last hold goes. So every process that writes a key holds one token of its
semaphore (a hold of its session, taken before its first write) until the record it
knows of is over (the end of the fixed window, of the log's newest hit plus the
expiry, of the current bucket's second period), then lets it go. The writer of the
newest record always holds it, so a record is never deleted while it counts, and no
record outlives its end by more than the last holder's clock says (or, if that
process dies, its session's recovery window). Readers hold nothing.

Whose clock: this process's wall clock (``clock``, ``time.time`` by default) times the
windows, as limits' own in-memory and MongoDB storages and its Redis moving window
are timed by the clock of the process that calls them.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Concatenate, ParamSpec, TypeVar

import tenure
from tenure.contrib.limits import _records as rec
from tenure.contrib.limits._names import (
    DEFAULT_NODE,
    check_call,
    check_node,
    check_prefix,
    check_seconds,
    name_of,
    tenure_url,
)
from tenure.errors import (
    InvalidArgumentError,
    LimitExceededError,
    NotFoundError,
    PreconditionFailedError,
    TenureError,
    UnavailableError,
)

T = TypeVar("T")
P = ParamSpec("P")

#: A change of one record: from the record and ``now``, what to write and answer.
Change = Callable[[rec.Record, float], rec.Step[T]]


def _bounded(
    op: Callable[Concatenate[LimitsKeeper, P], Awaitable[T]],
) -> Callable[Concatenate[LimitsKeeper, P], Coroutine[Any, Any, T]]:
    """A call that waits for the server at most the keeper's ``timeout``.

    The tenure client waits for a server that went away to come back (a restart, a
    cluster's next leader) for as long as the session's recovery window; a web
    request should not. Past the timeout the call raises UnavailableError: a hit
    sent by then may or may not have counted.
    """

    @functools.wraps(op)
    async def bounded(keeper: LimitsKeeper, /, *args: P.args, **kwargs: P.kwargs) -> T:
        guard = asyncio.timeout(keeper.timeout)
        try:
            async with guard:
                return await op(keeper, *args, **kwargs)
        except TimeoutError:
            if not guard.expired():
                raise
            raise UnavailableError(
                f"the tenure server of the limits storage (node {keeper.node!r}) did not "
                f"answer within {keeper.timeout:g} s (the storage's timeout)"
            ) from None

    return bounded


@dataclass(eq=False)
class _Hold:
    """This process's hold of one key's semaphore, and until when it keeps it."""

    session: tenure.Session
    lease: tenure.Lease
    until: float = 0.0
    #: The data this process last wrote or read there: the next write's guess.
    seen: bytes | None = None
    timer: asyncio.TimerHandle | None = None


class LimitsKeeper:
    """Keeps a session on the node, and does limits' operations.

    Over ``client`` when given (borrowed: the blocking storage's, the process's shared
    client, which it never closes), else over a client of its own, connected lazily.
    """

    def __init__(
        self,
        uri: str,
        *,
        client: tenure.Client | None = None,
        node: str | None,
        key_prefix: str,
        recovery_window: float | None,
        timeout: float,
        clock: Callable[[], float],
    ) -> None:
        self.url, named = tenure_url(uri)
        if node is None:
            node = named if named is not None else DEFAULT_NODE
        self.node = check_node(node)
        self.key_prefix = check_prefix(key_prefix)
        self.recovery_window = check_seconds("recovery_window", recovery_window, optional=True)
        #: The longest a call waits for the server, in seconds.
        self.timeout = check_seconds("timeout", timeout)
        if not callable(clock):
            raise InvalidArgumentError(f"clock must be a function of no argument, got {clock!r}")
        self.clock = clock
        #: The client given, used and never closed (None: the keeper's own).
        self.client = client
        self._client: tenure.Client | None = client
        self._session: tenure.Session | None = None
        self._opening: asyncio.Lock | None = None
        self._max_data_size = 0
        self._node_known = False
        self._holds: dict[str, _Hold] = {}
        self._acquiring: dict[str, asyncio.Task[_Hold]] = {}
        self._releasing: set[asyncio.Task[None]] = set()

    # -- limits' operations ------------------------------------------------------------

    @_bounded
    async def incr(self, key: str, expiry: float, amount: int) -> int:
        """Fixed window: add ``amount`` hits; the window's count."""
        check_call(key, expiry=expiry, amount=amount)
        return await self._change(key, lambda r, now: rec.fixed_hit(r, now, expiry, amount))

    @_bounded
    async def get(self, key: str) -> int:
        """Fixed window: its count now (0: none runs; any other record: 0)."""
        check_call(key)
        return rec.fixed_count(await self._record(key), self.clock())

    @_bounded
    async def get_expiry(self, key: str) -> float:
        """Fixed window: when it ends (now: none runs)."""
        check_call(key)
        return rec.fixed_end(await self._record(key), self.clock())

    @_bounded
    async def acquire_entry(self, key: str, limit: int, expiry: float, amount: int) -> bool:
        """Moving window: log ``amount`` hits if there is room."""
        check_call(key, expiry=expiry, limit=limit, amount=amount)
        if amount > limit:
            return False  # (it never fits: nothing to hold or write)
        return await self._change(key, lambda r, now: rec.moving_hit(r, now, limit, expiry, amount))

    @_bounded
    async def get_moving_window(self, key: str, limit: int, expiry: float) -> tuple[float, int]:
        """Moving window: its oldest hit's time and its hits."""
        check_call(key, expiry=expiry, limit=limit)
        return rec.moving_window(await self._record(key), self.clock(), limit, expiry)

    @_bounded
    async def acquire_sliding_window_entry(
        self, key: str, limit: int, expiry: float, amount: int
    ) -> bool:
        """Sliding window counter: count ``amount`` hits if the weighted count has room."""
        check_call(key, expiry=expiry, limit=limit, amount=amount)
        if amount > limit:
            return False
        return await self._change(
            key, lambda r, now: rec.sliding_hit(r, now, limit, expiry, amount)
        )

    @_bounded
    async def get_sliding_window(self, key: str, expiry: float) -> tuple[int, float, int, float]:
        """Sliding window counter: both buckets' hits and times left."""
        check_call(key, expiry=expiry)
        return rec.sliding_window(await self._record(key), self.clock(), expiry)

    @_bounded
    async def clear(self, key: str) -> None:
        """Forget the key's record, whatever its strategy."""
        check_call(key)
        session = await self._live()
        await self._clear(session, name_of(self.key_prefix, key))

    @_bounded
    async def reset(self) -> int:
        """Forget every record of the storage (its key prefix in its node); how many."""
        session = await self._live()
        assert self._client is not None
        listed = await self._client.list_semaphores(self.node, prefix=self.key_prefix)
        cleared = 0
        for summary in listed:
            cleared += await self._clear(session, summary.name)
        return cleared

    async def check(self) -> bool:
        """Whether the storage reaches its node (within its timeout)."""
        try:
            await self._reach()
        except (TenureError, OSError):
            return False
        return True

    @_bounded
    async def _reach(self) -> None:
        await self._live()
        assert self._client is not None
        await self._client.describe_node(self.node)

    async def close(self) -> None:
        """Close the session (its holds go: records nobody else holds are deleted) and
        the keeper's own client (not one given). It opens them again if used after."""
        session, self._session = self._session, None
        for hold in self._holds.values():
            if hold.timer is not None:
                hold.timer.cancel()
        self._holds.clear()
        if self.client is not None:  # borrowed: only the session is the keeper's
            if session is not None:
                await session.close()
            return
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    # -- records ----------------------------------------------------------------------

    async def _record(self, key: str) -> rec.Record:
        session = await self._live()
        name = name_of(self.key_prefix, key)
        return rec.parse(name, await _read(session, name))

    async def _change(self, key: str, change: Change[T]) -> T:
        """Apply ``change`` to the key's record by compare-and-set, holding its semaphore."""
        name = name_of(self.key_prefix, key)
        while True:
            hold = await self._hold(name)
            semaphore = hold.session.semaphore(name)
            data, fresh = hold.seen, False
            try:
                while True:
                    if data is None:
                        data, fresh = await _read(hold.session, name), True
                    record = rec.parse(name, data)
                    step = change(record, self.clock())
                    if step.record == record:
                        if not fresh:  # decided on a guess: decide again on what is there
                            data = None
                            continue
                        self._keep(name, hold, step.until)
                        hold.seen = data
                        return step.answer
                    new = rec.encode(step.record)
                    self._check_size(name, new)
                    if await semaphore.compare_and_set(data, new):
                        hold.seen = new
                        self._keep(name, hold, step.until)
                        return step.answer
                    data = None  # changed by another process meanwhile: read it again
            except NotFoundError:
                # Deleted under the hold (an operator's forced delete): hold it anew.
                self._drop(name, hold)

    def _check_size(self, name: str, data: bytes) -> None:
        if len(data) > self._max_data_size:
            raise LimitExceededError(
                f"the record of {name!r} would take {len(data)} bytes, past the node "
                f"{self.node!r}'s max_data_size ({self._max_data_size}): a moving window "
                "keeps each hit's time; raise max_data_size (tenure node alter) or use "
                "the fixed window or the sliding window counter"
            )

    async def _clear(self, session: tenure.Session, name: str) -> int:
        """Empty the record of ``name`` if it holds one; 1 if it did, else 0."""
        data = await _read(session, name)
        if not data.startswith(rec.MAGIC):
            return 0  # no record, or not ours: left alone
        try:
            await session.semaphore(name).update(b"")
        except NotFoundError:
            return 0
        hold = self._holds.get(name)
        if hold is not None:
            hold.seen = b""
        return 1

    # -- the session and the holds -----------------------------------------------------

    async def _live(self) -> tenure.Session:
        """The session, opened (with the client) on first use and after a loss."""
        session = self._session
        if session is not None and not session.closed:
            return session
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if self._client is None:
                client = await tenure.connect(self.url, client_name="limits storage")
                try:
                    await self._know_node(client)
                except BaseException:
                    await client.aclose()
                    raise
                self._client = client
            elif not self._node_known:  # a client given: the node, made once
                await self._know_node(self._client)
            if self._session is None or self._session.closed:
                for hold in self._holds.values():  # (they went with the lost session)
                    if hold.timer is not None:
                        hold.timer.cancel()
                self._holds.clear()
                self._session = await self._client.session(
                    self.node, recovery_window=self.recovery_window, description="limits storage"
                )
            return self._session

    async def _know_node(self, client: tenure.Client) -> None:
        """Make the node if missing, and learn its largest record."""
        await client.create_node(self.node, exist_ok=True)
        described = await client.describe_node(self.node)
        self._max_data_size = described.config.max_data_size
        self._node_known = True

    async def _hold(self, name: str) -> _Hold:
        """This process's hold of ``name``'s semaphore (made, ephemeral, if missing)."""
        while True:
            session = await self._live()
            hold = self._holds.get(name)
            if hold is not None and hold.session is session and hold.lease.held:
                return hold
            if hold is not None:
                self._drop(name, hold)
            acquiring = self._acquiring.get(name)
            if acquiring is None:
                acquiring = asyncio.create_task(self._acquire(session, name))
                self._acquiring[name] = acquiring
                acquiring.add_done_callback(lambda done: self._acquired(name, done))
            # Waited on, not awaited: a caller cancelled here leaves the acquire running
            # for the others (it keeps the hold it gets).
            await asyncio.wait([acquiring])
            failure = acquiring.exception()
            if failure is not None:
                raise failure

    async def _acquire(self, session: tenure.Session, name: str) -> _Hold:
        # Looked at first: a semaphore of someone else's under the prefix (persistent,
        # or holding other data) is refused, not held (nor waited for, if it is full).
        try:
            found: tenure.SemaphoreDescription | None = await session.semaphore(name).describe()
        except NotFoundError:
            found = None
        if found is not None:
            rec.parse(name, found.data)
            if not found.ephemeral:
                raise PreconditionFailedError(
                    f"semaphore {name!r} is a persistent one, not a record of the limits storage"
                )
        lease = await session.acquire(name, 1, ephemeral=True)
        # What it held when looked at is the first write's guess (checked by the write).
        hold = _Hold(session, lease, seen=found.data if found is not None else b"")
        self._holds[name] = hold
        return hold

    def _acquired(self, name: str, done: asyncio.Task[_Hold]) -> None:
        if self._acquiring.get(name) is done:
            del self._acquiring[name]
        if not done.cancelled():
            done.exception()  # (retrieved: a failure is raised by the callers that waited)

    def _keep(self, name: str, hold: _Hold, until: float) -> None:
        """Keep holding ``name`` until ``until`` (this clock) at least."""
        hold.until = max(hold.until, until)
        if hold.timer is None and self._holds.get(name) is hold:
            delay = max(0.0, hold.until - self.clock())
            hold.timer = asyncio.get_running_loop().call_later(delay, self._expire, name, hold)

    def _expire(self, name: str, hold: _Hold) -> None:
        """The hold's time is up, unless it was kept longer meanwhile."""
        hold.timer = None
        if self._holds.get(name) is not hold:
            return
        left = hold.until - self.clock()
        if left > 0:
            hold.timer = asyncio.get_running_loop().call_later(left, self._expire, name, hold)
            return
        self._drop(name, hold)

    def _drop(self, name: str, hold: _Hold) -> None:
        """Let ``name`` go: the store deletes the semaphore if nobody else holds it."""
        if self._holds.get(name) is hold:
            del self._holds[name]
        if hold.timer is not None:
            hold.timer.cancel()
            hold.timer = None
        releasing = asyncio.get_running_loop().create_task(_release(hold.lease))
        self._releasing.add(releasing)
        releasing.add_done_callback(self._releasing.discard)


async def _read(session: tenure.Session, name: str) -> bytes:
    """The data of ``name``'s semaphore (empty: it does not exist)."""
    try:
        return (await session.semaphore(name).describe()).data
    except NotFoundError:
        return b""


async def _release(lease: tenure.Lease) -> None:
    # A release that fails (the session lost meanwhile) has nothing left to let go.
    with contextlib.suppress(TenureError, OSError):
        await lease.release()
