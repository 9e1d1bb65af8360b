"""One client of the linearizable workload: a loop of random operations, each recorded.

The fault suite's ``linearizable`` scenario (tools/faults) runs it on real processes
and time, the simulation (:mod:`tenure.testing.sim`) on simulated ones: the same
steps, recorded by the same rules, checked by the same models.

A client (its own connection through its door, its own session, process label
``w<index>c<n>``) draws its next step at random among (:data:`STEPS`, weighted):

* a **register** (a semaphore's data, created by the harness with data ``0``):
  ``describe()`` (``read``), ``update(v)`` (``write``: ``v`` unique to this client
  and step) or ``compare_and_set(last read, v)`` (``cas``: ``ok`` if it swapped,
  ``fail`` if not; a swap is read back at once: a swap answered but lost shows then,
  not only when the register's next operation happens to be a read, not a write);
* a **counter** (``session.counter(name)``): ``add(d)`` (``add``: ``ok`` with the new
  total) or ``get()`` (``read``);
* a **mutex** with expiry (the session's recovery window is short): ``lock()``
  (``acquire``: ``ok`` with the token; ``fail`` when not granted within the wait),
  a hold, then ``release()`` (``release``: ``ok``; ``fail`` when the lock had been
  lost first). A loss (the lock's ``lost`` signal) is a ``lost`` invoked at the grant
  seen (completed as below). A worker configured to pause blocks its whole event
  loop (:class:`Pauses`), now and then, while one of its clients holds, past the window: the lease
  expires, another client gets the lock, and the paused one must hear of its loss
  when it runs again;
* **membership** (``session.group(name)``): a ``join`` of an id drawn from a small
  pool (``ok``: it joined; ``fail``: the id was taken, or the group full), or a
  ``leave`` of the member it has there; ``members()`` (``members``: ``ok`` with the
  ids). A member that ends with its session is a ``leave`` invoked at the join seen,
  as a lock's loss.

A ``release()`` or ``leave()`` returns once the service applied it, or once the
session ended (given up on the client's clock): the latter is recorded ``info``, as a
loss the client declared itself (below), not ``ok`` when the call returned.

A loss the service told (``LeaseLostError``: the hold is gone there) is completed
``ok`` when the client heard it (the model's loss: the hold ended in between). One
the client declared itself is never completed (``info``): a session given up on the
client's own clock (``SessionExpiredError``, promise 6a) is still kept by the
service for a while (it counts the window from later, 2% long), and a closed
session's holds end when the close is served; either ends the hold some time after
the telling, which nobody observes (a ``members()`` read may still show the member
after its client was told).

A request whose answer was lost (no answer within :attr:`LinConfig.op_timeout`, or
``UnavailableError`` and other connection errors) is recorded ``info`` and sent
again, the same request, as a new operation of a new process
(:class:`~tenure.testing.workload._books.ProcessIds`), :data:`RETRIES` times at most. A lost
session (``LostError``) ends the step ``info`` and the client opens a new session.
Every wait is bounded; the loop stops with the worker, or after
:attr:`LinConfig.max_ops` operations.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import traceback
from collections.abc import Awaitable, Callable
from typing import Any, Final, Protocol, TypeVar

import tenure
from tenure.errors import (
    AlreadyExistsError,
    LeaseLostError,
    LimitExceededError,
    LostError,
    NotFoundError,
    TenureError,
    UnavailableError,
)
from tenure.testing.lincheck import HistoryWriter
from tenure.testing.workload._books import Books, ProcessIds
from tenure.testing.workload._config import LinConfig

T = TypeVar("T")

#: How many times a request whose answer was lost is sent again.
RETRIES: Final = 2
#: The errors of a request whose answer was lost (its outcome unknown).
ANSWER_LOST: Final = (UnavailableError, TimeoutError, OSError)
#: Members a group may have (more than the clients that join it).
MAX_MEMBERS: Final = 64


class SessionGoneError(Exception):
    """The client's session ended: open a new one."""


class Notes(Protocol):
    """Where a client writes what is not an operation (a client error, a lost session)."""

    def note(self, process: str, kind: str, **fields: Any) -> None:
        """Record a note of ``kind`` by ``process``."""


class Pauses(Protocol):
    """A worker's pauses: its whole process standing still past the window while one
    of its clients holds (the fault suite blocks the worker's loop; the simulation
    pauses the simulated process)."""

    async def maybe(self, rng: random.Random, holder: str) -> None:
        """Stand still now if a pause is due (``holder``: the client that holds): the
        client goes on after the pause, whatever else ran meanwhile."""


class LinClient:
    """One client's loop (see the module docstring)."""

    def __init__(
        self,
        config: LinConfig,
        number: int,
        books: Books,
        pauses: Pauses,
        recorder: Notes,
        steps: dict[str, tuple[Step, int]] | None = None,
    ) -> None:
        self.config = config
        self.number = number
        self.label = f"w{config.index}c{number}"
        #: The steps it draws from, with their weights (:data:`STEPS` by default).
        self.steps = STEPS if steps is None else steps
        self.url = config.door_of(number)
        self.books = books
        self.pauses = pauses
        self.rec = recorder
        self.rng = random.Random(f"{config.seed}-{self.label}")
        self.procs = ProcessIds(self.label)
        self.ops = 0
        self._values = 0
        self.last_read: dict[str, int] = {}
        self.members: dict[str, tenure.GroupMember] = {}

    async def run(self, stop: asyncio.Event) -> None:
        """Connect (again while the service is down), then loop on sessions until ``stop``."""
        client: tenure.Client | None = None
        try:
            while client is None and not stop.is_set():
                try:
                    client = await tenure.connect(self.url, connect_timeout=2.0)
                except (TenureError, OSError) as error:
                    self.rec.note(self.label, "connect-failed", error=repr(error))
                    await _sleep_unless(stop, self.rng.uniform(0.2, 0.5))
            while client is not None and not stop.is_set() and self.ops < self.config.max_ops:
                await self._one_session(client, stop)
        except Exception as error:
            # (where it was raised: the note is all that is left of it)
            where = traceback.format_exc(limit=-12)
            self.rec.note(self.label, "client-error", error=repr(error), where=where)
            raise
        finally:
            if client is not None:
                with contextlib.suppress(TenureError, OSError, TimeoutError):
                    async with asyncio.timeout(10.0):
                        await client.aclose()

    async def _one_session(self, client: tenure.Client, stop: asyncio.Event) -> None:
        try:
            async with asyncio.timeout(self.config.op_timeout):
                session = await client.session(self.config.node, recovery_window=self.config.window)
        except (TenureError, OSError, TimeoutError) as error:
            self.rec.note(self.label, "session-failed", error=repr(error))
            await _sleep_unless(stop, self.rng.uniform(0.1, 0.3))
            return
        steps = list(self.steps)
        weights = [self.steps[name][1] for name in steps]
        try:
            while not stop.is_set() and not session.closed and self.ops < self.config.max_ops:
                step = self.steps[self.rng.choices(steps, weights)[0]][0]
                await step(self, session)
                self.ops += 1
        except SessionGoneError:
            pass
        finally:
            self.members.clear()  # they end with the session (their losses are told)
            if session.lost_reason is not None:
                self.rec.note(self.label, "session-lost", error=repr(session.lost_reason))
            with contextlib.suppress(TenureError, OSError, TimeoutError):
                async with asyncio.timeout(10.0):
                    await session.close()

    # -- recording ------------------------------------------------------------------------

    async def _call(
        self,
        model: str,
        f: str,
        key: str,
        value: Any,
        action: Callable[[], Awaitable[T]],
        judge: Callable[[T], tuple[bool, Any]],
    ) -> T | None:
        """Invoke ``f``, run ``action`` (bounded), record its ``ok``/``fail`` by ``judge``
        (whether it succeeded, the value to record); a lost answer is ``info`` and the
        same request again as a new process (module docstring); None if none answered."""
        writer = self.books.writer(model)
        for _ in range(RETRIES + 1):
            process = self.procs.current
            writer.invoke(process, f, value, key)
            try:
                async with asyncio.timeout(self.config.op_timeout):
                    result = await action()
            except asyncio.CancelledError:
                writer.info(process, f, value, key)
                self.procs.unknown()
                raise
            except LostError as error:
                writer.info(process, f, value, key)
                self.procs.unknown()
                raise SessionGoneError from error
            except ANSWER_LOST:
                writer.info(process, f, value, key)
                self.procs.unknown()
                continue
            succeeded, recorded = judge(result)
            (writer.ok if succeeded else writer.fail)(process, f, recorded, key)
            return result
        return None

    def _value(self) -> int:
        """A value no other write of the run carries."""
        self._values += 1
        return (self.config.index * 1000 + self.number) * 1_000_000 + self._values

    # -- registers --------------------------------------------------------------------

    async def read_register(self, session: tenure.Session, key: str | None = None) -> None:
        """``describe()``: a ``read`` of the data (of ``key``; else one at random)."""
        key = self.rng.choice(self.config.registers) if key is None else key

        async def describe() -> int | None:
            try:
                found = await session.semaphore(key).describe()
            except NotFoundError:
                return None
            return int(found.data.decode())

        value = await self._call("register", "read", key, None, describe, lambda v: (True, v))
        if value is not None:
            self.last_read[key] = value

    async def write_register(self, session: tenure.Session) -> None:
        """``update(v)``: a ``write`` of ``v``."""
        key, value = self.rng.choice(self.config.registers), self._value()

        async def update() -> None:
            await session.semaphore(key).update(str(value).encode())

        await self._call("register", "write", key, value, update, lambda _: (True, value))

    async def swap_register(self, session: tenure.Session) -> None:
        """``compare_and_set(last read, v)``: a ``cas``, ``ok`` if it swapped."""
        key, new = self.rng.choice(self.config.registers), self._value()
        expected = self.last_read.get(key, 0)

        async def swap() -> bool:
            return await session.semaphore(key).compare_and_set(
                str(expected).encode(), str(new).encode()
            )

        pair = [expected, new]
        if await self._call("register", "cas", key, pair, swap, lambda done: (done, pair)):
            await self.read_register(session, key)  # (module docstring: read back)

    # -- counters ---------------------------------------------------------------------

    async def add_counter(self, session: tenure.Session) -> None:
        """``add(d)``: an ``add``, ``ok`` with the new total."""
        key, delta = self.rng.choice(self.config.counters), self.rng.choice((1, 2, 5, -1))

        async def add() -> int:
            return await session.counter(key).add(delta)

        await self._call("counter", "add", key, delta, add, lambda total: (True, total))

    async def read_counter(self, session: tenure.Session) -> None:
        """``get()``: a ``read`` of the total."""
        key = self.rng.choice(self.config.counters)

        async def get() -> int:
            return await session.counter(key).get()

        await self._call("counter", "read", key, None, get, lambda total: (True, total))

    # -- mutexes ----------------------------------------------------------------------

    async def hold_mutex(self, session: tenure.Session) -> None:
        """``lock()``, a hold (perhaps a pause of the whole worker), ``release()``."""
        key = self.rng.choice(self.config.mutexes)
        writer = self.books.writer("mutex")
        process = self.procs.current
        writer.invoke(process, "acquire", None, key)
        try:
            async with asyncio.timeout(self.config.op_timeout + self.config.acquire_wait) as bound:
                lock = await session.mutex(key).lock(timeout=self.config.acquire_wait)
        except asyncio.CancelledError:
            writer.info(process, "acquire", None, key)
            self.procs.unknown()
            raise
        except LostError as error:
            writer.info(process, "acquire", None, key)
            self.procs.unknown()
            raise SessionGoneError from error
        except ANSWER_LOST:
            if isinstance(bound, asyncio.Timeout) and not bound.expired():
                writer.fail(process, "acquire", None, key)  # the wait ran out: not granted
                return
            writer.info(process, "acquire", None, key)
            self.procs.unknown()
            return
        seen = self.books.now_ns()
        self.books.record_at(seen, "mutex", "ok", process, "acquire", lock.token, key)
        self._on_loss(lock, "mutex", "lost", key, lock.token, lock.token, seen)
        await asyncio.sleep(self.rng.uniform(*self.config.hold))
        await self.pauses.maybe(self.rng, self.label)
        process = self.procs.current
        writer.invoke(process, "release", lock.token, key)
        try:
            async with asyncio.timeout(self.config.op_timeout):
                await lock.release()
        except ANSWER_LOST:
            writer.info(process, "release", lock.token, key)
            self.procs.unknown()
            return
        self._record_end(session, lock, writer, process, "release", lock.token, key)

    def _record_end(
        self,
        session: tenure.Session,
        held: tenure.Lock | tenure.GroupMember,
        writer: HistoryWriter,
        process: str,
        f: str,
        value: Any,
        key: str,
    ) -> None:
        """Record how a ``release()`` or ``leave()`` that returned ended: ``fail`` if the
        hold was lost first (it held nothing by then); ``info`` if the session ended
        meanwhile (the call returns then too, but the service may keep the hold until it
        expires the session, later: module docstring); ``ok`` if the service applied it."""
        if held.lost_reason is not None:
            writer.fail(process, f, value, key)
        elif session.lost_reason is not None:
            writer.info(process, f, value, key)
            self.procs.unknown()
        else:
            writer.ok(process, f, value, key)

    def _on_loss(
        self,
        held: tenure.Lock | tenure.GroupMember,
        model: str,
        f: str,
        key: str,
        value: Any,
        token: int,
        seen: int,
    ) -> None:
        """Record ``held``'s loss when the client is told of it: ``f`` invoked at ``seen``
        (the grant seen), on a process of its own, ``ok`` then if the service said the
        hold ended, never completed if the client gave it up itself (module docstring)."""
        process = self.procs.loss(key, token)

        def told(reason: LostError | None) -> None:
            if reason is None:
                return  # released or left by the client: recorded as such
            self.books.record_at(seen, model, "invoke", process, f, value, key)
            if isinstance(reason, LeaseLostError):
                told_at = max(self.books.now_ns(), seen)
                self.books.record_at(told_at, model, "ok", process, f, value, key)

        held.lost.add_callback(told)

    # -- membership -------------------------------------------------------------------

    async def join_or_leave(self, session: tenure.Session) -> None:
        """A ``join`` of an id of the pool, or a ``leave`` of the member it has there."""
        group = self.rng.choice(self.config.groups)
        writer = self.books.writer("membership")
        member = self.members.pop(group, None)
        if member is not None:
            process = self.procs.current
            writer.invoke(process, "leave", member.id, group)
            try:
                async with asyncio.timeout(self.config.op_timeout):
                    await member.leave()
            except ANSWER_LOST:
                writer.info(process, "leave", member.id, group)
                self.procs.unknown()
                return
            self._record_end(session, member, writer, process, "leave", member.id, group)
            return
        ident = self.rng.choice(self.config.member_ids)

        async def join() -> tenure.GroupMember | None:
            try:
                return await session.group(group, max_members=MAX_MEMBERS).join(ident)
            except (AlreadyExistsError, LimitExceededError):
                return None

        joined = await self._call(
            "membership", "join", group, ident, join, lambda m: (m is not None, ident)
        )
        if joined is not None:
            self.members[group] = joined
            self._on_loss(
                joined, "membership", "leave", group, ident, joined.token, self.books.now_ns()
            )

    async def read_members(self, session: tenure.Session) -> None:
        """``members()``: the ids, in a ``members`` ``ok`` (none for a group not made yet)."""
        group = self.rng.choice(self.config.groups)

        async def members() -> list[str]:
            try:
                return sorted(await session.group(group, max_members=MAX_MEMBERS).members())
            except NotFoundError:
                return []

        await self._call("membership", "members", group, None, members, lambda m: (True, m))


async def _sleep_unless(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await stop.wait()


Step = Callable[[LinClient, tenure.Session], Awaitable[None]]

#: Each step with its weight (module docstring).
STEPS: Final[dict[str, tuple[Step, int]]] = {
    "read-register": (LinClient.read_register, 3),
    "write-register": (LinClient.write_register, 2),
    "swap-register": (LinClient.swap_register, 2),
    "add-counter": (LinClient.add_counter, 2),
    "read-counter": (LinClient.read_counter, 2),
    "hold-mutex": (LinClient.hold_mutex, 2),
    "join-or-leave": (LinClient.join_or_leave, 2),
    "read-members": (LinClient.read_members, 1),
}
