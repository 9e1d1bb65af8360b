"""The ``linearizable`` scenario through YDB's face: YDB's Python SDK, its coordination client.

On a target that serves YDB's face (``tenure serve --ydb-port``), each client now and
then makes a *visit* (:data:`WEIGHT`): a session of the SDK's asyncio coordination
client (``ydb.aio``; a driver of the client's own) on the run's node, 1 to
:data:`MAX_OPS` operations in it, then the session closed. Each operation is recorded
as the native ones are (:mod:`tenure.testing.workload`), on process ids of its own
(``w0c1.y``: :func:`~tenure.testing.workload.through_ydb`):

* a **hold** of one of :data:`~tenure.testing.workload.SEMAPHORES` (a YDB mutex of
  limit 1, a semaphore of limit 3), lincheck's ``semaphore`` model: ``acquire(count)``
  then ``describe()``. The SDK's acquire returns also when not granted (its wait ran
  out), and tells no fencing token; the face lists each owner with its ``order_id``,
  which is tenure's fencing token. So the acquire is ``ok`` with that token when the
  describe lists the session among the owners (completed when the describe answered);
  ``fail`` when the acquire was answered and the session is neither owner nor waiter;
  ``info`` otherwise. Then a hold (perhaps the worker's pause past the window), and
  ``release()``, ``ok`` when a describe after it no longer lists the session (the SDK
  swallows a release's every error);
* a **read** (``describe()``'s data) or **write** (``update(v)``, ``v`` negative:
  unique, and told from the native clients' at a glance) of a register: the same
  semaphores the native clients read, write and swap, so each register's history
  holds both faces.

A request of a session is answered on its stream in order, and the SDK sends its
unanswered requests again, first, on each stream it re-attaches: a describe answered
after a request says how that request ended. A request left unanswered within
:data:`CALL_BOUND` (the SDK's own wait for an answer is the session's timeout) ends
the visit: its session is closed, since the SDK would send that request again at its
next re-attach, whenever that is. A read or write is then ``info`` and sent again in a
new session as a new process, :data:`~tenure.testing.workload.RETRIES` times at most.

A **loss**: a session that expired (its stream silent past :data:`SESSION_TIMEOUT_MS`,
a worker's pause, a cut) is never told by the SDK, which tries to re-attach it for
ever, as fast as the face refuses. A release not confirmed is ``info``, and the hold's
``lost`` is invoked at its last confirmation (the call of the last describe that listed
it) and completed when the client heard: a describe in a new session no longer lists
the old one's hold (asked at once, and again once the old session must have expired);
never completed if neither did.

What this cannot see: the acquire's own answer (the SDK drops its ``acquired``), so a
face that answered "acquired" without a grant would be recorded ``fail``, not caught;
the describe is trusted to list the owners and their tokens as the engine has them
(the native clients' mutexes, on the same engine, hold the engine to its grants). The
calls go through :class:`~tools.faults.lin_ydb_sdk.YdbSession` (tests give it a face
in memory: tests/faults/test_lin_ydb.py).

The SDK finds the face by discovery, and its driver reconnects only through it (with
``disable_discovery`` the asyncio driver of ``ydb`` 3.33 never reconnects after its
connection is lost), so the face advertises one fault proxy in front of it, which
every worker's driver reaches and which the nemesis faults with each worker's link
to the server (:class:`~tools.faults.proxies.TiedProxy`): a fault of any worker's link
is also every YDB client's.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar

from ydb.aio.driver import Driver

import tenure
from tenure.testing.workload import (
    RETRIES,
    SEMAPHORES,
    YDB_MARK,
    LinClient,
    LinConfig,
    ProcessIds,
    Step,
)
from tools.faults.history import now_ns
from tools.faults.lin_ydb_sdk import (
    DATABASE,
    SESSION_TIMEOUT_MS,
    Described,
    SdkSession,
    YdbSession,
    stop_driver,
)

T = TypeVar("T")

#: Seconds a call may take before it counts as unanswered (module docstring).
CALL_BOUND: Final = SESSION_TIMEOUT_MS / 1000 + 1.0
#: Seconds a session given up may take to stop its wait (:meth:`Visit.abandon`).
GIVE_UP_BOUND: Final = 1.0
#: Seconds after a session was closed by which the face must have expired it.
EXPIRED_AFTER: Final = SESSION_TIMEOUT_MS / 1000 + 1.5
#: A visit's weight among a client's steps, and the operations of one visit at most.
WEIGHT: Final = 2
MAX_OPS: Final = 3
#: The counts an acquire of a semaphore of limit 3 asks for (a mutex's: 1).
COUNTS: Final = (1, 1, 2, 3)


class UnansweredError(Exception):
    """A call of a YDB session had no answer to go by (module docstring)."""


#: Opens a session for a client (None: its driver could not reach the face now).
Connect = Callable[[LinClient], Awaitable[YdbSession | None]]


class YdbVisits:
    """A worker's visits to YDB's face: its clients' drivers, and the step (module
    docstring). ``connect`` opens a client's sessions (default: the SDK's)."""

    def __init__(self, config: LinConfig, connect: Connect | None = None) -> None:
        self.config = config
        self.path = f"{DATABASE}/{config.node}"
        self._connect = connect or self._sdk_session
        self._drivers: dict[str, Any] = {}
        self._procs: dict[str, ProcessIds] = {}
        self._values = 0

    def steps(self) -> dict[str, tuple[Step, int]]:
        """The steps it adds to a client's (:data:`tenure.testing.workload.STEPS`)."""
        return {"ydb-visit": (self.visit, WEIGHT)}

    async def visit(self, client: LinClient, native: tenure.Session) -> None:
        """One visit (module docstring); the client's native session is not used."""
        procs = self._procs.setdefault(client.label, ProcessIds(client.label + YDB_MARK))
        visit = Visit(self, client, procs)
        try:
            if not await visit.renew():
                await asyncio.sleep(client.rng.uniform(0.1, 0.3))
                return
            names = list(OPS)
            weights = [OPS[name][1] for name in names]
            for _ in range(client.rng.randint(1, MAX_OPS)):
                if not await OPS[client.rng.choices(names, weights)[0]][0](visit):
                    return
        finally:
            await visit.abandon()

    def value(self, client: LinClient) -> int:
        """A value no other write of the run carries (negative: a YDB client's)."""
        self._values += 1
        return -((self.config.index * 1000 + client.number) * 1_000_000 + self._values)

    async def open(self, client: LinClient) -> YdbSession | None:
        """A new session for ``client`` (None, noted, if the face cannot be reached)."""
        try:
            return await self._connect(client)
        except Exception as error:  # the driver's: unreachable now, tried next visit
            client.rec.note(client.label, "ydb-connect-failed", error=repr(error))
            return None

    async def _sdk_session(self, client: LinClient) -> YdbSession | None:
        driver = self._drivers.get(client.label)
        if driver is None:
            driver = Driver(endpoint=self.config.ydb, database=DATABASE)
            try:
                async with asyncio.timeout(CALL_BOUND):
                    await driver.wait(timeout=CALL_BOUND, fail_fast=True)
            except BaseException:
                await stop_driver(driver, CALL_BOUND)
                raise
            self._drivers[client.label] = driver
        return SdkSession(driver, self.path)

    async def aclose(self) -> None:
        """Stop every client's driver (bounded, all at once)."""
        drivers, self._drivers = self._drivers, {}
        await asyncio.gather(*(stop_driver(driver, CALL_BOUND) for driver in drivers.values()))


class Visit:
    """One visit of a client: its YDB process ids and the session it is in."""

    def __init__(self, visits: YdbVisits, client: LinClient, procs: ProcessIds) -> None:
        self.visits = visits
        self.client = client
        self.config = visits.config
        self.procs = procs
        self.session: YdbSession | None = None

    async def renew(self) -> bool:
        """Close the session (if any) and open a new one; whether one is open."""
        await self.abandon()
        self.session = await self.visits.open(self.client)
        return self.session is not None

    async def abandon(self, waiting: str | None = None) -> None:
        """Close the session, if any (bounded: the face expires it either way); first
        stop its wait for semaphore ``waiting`` (or end what it got), as a client that
        gives up says so: else the face may grant a session nobody listens to, which
        holds the semaphore until it expires."""
        session, self.session = self.session, None
        if session is None:
            return
        if waiting is not None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(GIVE_UP_BOUND):
                    await session.release(waiting)
        with contextlib.suppress(Exception):
            async with asyncio.timeout(CALL_BOUND):
                await session.close()

    async def ask(self, what: str, call: Callable[[YdbSession], Awaitable[T]]) -> T:
        """``call`` on the session, bounded; :class:`UnansweredError` (noted) without an answer."""
        session = self.session
        if session is None:
            raise UnansweredError(what)
        try:
            async with asyncio.timeout(CALL_BOUND):
                return await call(session)
        except Exception as error:  # the SDK's errors, its timeouts and ours alike
            self.client.rec.note(self.client.label, "ydb-unanswered", call=what, error=repr(error))
            raise UnansweredError(what) from error

    # -- registers ------------------------------------------------------------------------

    async def read(self) -> bool:
        """``describe()``: a register's ``read``. Whether the visit goes on."""
        key = self.client.rng.choice(self.config.registers)

        async def read(session: YdbSession) -> tuple[bool, Any]:
            found = await session.describe(key)
            return (True, int(found.data.decode())) if found.found else (False, None)

        return await self._register("read", key, None, read)

    async def write(self) -> bool:
        """``update(v)``: a register's ``write``. Whether the visit goes on."""
        key, value = self.client.rng.choice(self.config.registers), self.visits.value(self.client)

        async def write(session: YdbSession) -> tuple[bool, Any]:
            await session.update(key, str(value).encode())
            return True, value

        return await self._register("write", key, value, write)

    async def _register(
        self,
        f: str,
        key: str,
        value: Any,
        call: Callable[[YdbSession], Awaitable[tuple[bool, Any]]],
    ) -> bool:
        """Invoke ``f``, ``call`` it: ``ok`` or ``fail`` with the value it gives; without
        an answer ``info``, and the same request in a new session (module docstring)."""
        writer = self.client.books.writer("register")
        for _ in range(RETRIES + 1):
            process = self.procs.current
            writer.invoke(process, f, value, key)
            try:
                succeeded, recorded = await self.ask(f, call)
            except asyncio.CancelledError:
                writer.info(process, f, value, key)
                raise
            except UnansweredError:
                writer.info(process, f, value, key)
                self.procs.unknown()
                if not await self.renew():
                    return False
                continue
            (writer.ok if succeeded else writer.fail)(process, f, recorded, key)
            return True
        return True

    # -- holds ----------------------------------------------------------------------------

    async def hold(self, key: str | None = None) -> bool:
        """Acquire ``key`` (default: a semaphore at random), hold it (perhaps paused),
        release it (module docstring). Whether the visit goes on."""
        rng, writer = self.client.rng, self.client.books.writer("semaphore")
        key = rng.choice(sorted(SEMAPHORES)) if key is None else key
        limit = SEMAPHORES[key]
        count = 1 if limit == 1 else rng.choice(COUNTS)
        process = self.procs.current
        writer.invoke(process, "acquire", count, key)
        answered = True
        try:
            await self.ask("acquire", lambda session: session.acquire(key, limit, count))
        except UnansweredError:
            answered = False  # the describe tells whether it was granted
        except asyncio.CancelledError:
            writer.info(process, "acquire", count, key)
            self.procs.unknown()
            raise
        asked = now_ns()
        try:
            found = await self.ask("describe", lambda session: session.describe(key))
        except (UnansweredError, asyncio.CancelledError):
            writer.info(process, "acquire", count, key)
            self.procs.unknown()
            await self.abandon()
            return False
        session_id = self.session.session_id if self.session is not None else None
        token = found.token_of(session_id)
        if token is None:
            if answered and found.found and session_id not in found.waiters:
                writer.fail(process, "acquire", count, key)  # its wait ran out: not granted
                return True
            writer.info(process, "acquire", count, key)
            self.procs.unknown()
            await self.abandon(waiting=key)
            return False
        writer.ok(process, "acquire", token, key)
        await asyncio.sleep(rng.uniform(*self.config.hold))
        await self.client.pauses.maybe(rng, self.client.label)
        return await self._release(key, token, session_id, asked)

    async def _release(self, key: str, token: int, session_id: int | None, confirmed: int) -> bool:
        """``release()`` of the hold of ``token``, confirmed by a describe; else ``info``,
        and its loss heard in new sessions (module docstring)."""
        writer = self.client.books.writer("semaphore")
        process = self.procs.current
        writer.invoke(process, "release", token, key)
        try:
            await self.ask("release", lambda session: session.release(key))
            asked = now_ns()
            found = await self.ask("describe", lambda session: session.describe(key))
        except asyncio.CancelledError:
            writer.info(process, "release", token, key)
            raise
        except UnansweredError:
            found = Described(False)
        if found.found:
            if found.token_of(session_id) is None:
                writer.ok(process, "release", token, key)
                return True
            confirmed = asked  # still held then: the release was never sent
        writer.info(process, "release", token, key)
        self.procs.unknown()
        loss = self.procs.loss(key, token)
        writer.invoke(loss, "lost", token, key, time=confirmed)
        await self.abandon()
        await self._hear_loss(key, token, session_id, loss, now_ns())
        return False

    async def _hear_loss(
        self, key: str, token: int, session_id: int | None, loss: str, closed: int
    ) -> None:
        """Complete ``loss`` when a describe in a new session no longer lists the hold:
        asked at once, then once more when the old session must have expired."""
        for attempt in range(2):
            if attempt:
                await asyncio.sleep(max(0.0, closed / 1e9 + EXPIRED_AFTER - now_ns() / 1e9))
            if not await self.renew():
                return
            try:
                found = await self.ask("describe", lambda session: session.describe(key))
            except UnansweredError:
                continue
            finally:
                await self.abandon()
            if found.found and found.token_of(session_id) != token:
                self.client.books.writer("semaphore").ok(loss, "lost", token, key)
                return


#: A visit's operations, with their weights.
OPS: Final[dict[str, tuple[Callable[[Visit], Awaitable[bool]], int]]] = {
    "hold": (Visit.hold, 3),
    "read": (Visit.read, 2),
    "write": (Visit.write, 2),
}
