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
  not only when the register's next operation happens to be a read, not a write); a
  client of several doors given :attr:`~LinConfig.max_staleness` also reads it stale
  (``read`` with lincheck's ``max_staleness``: a cluster's standby answers,
  :meth:`LinClient.stale_read_register`), its register operations naming its session;
* a **counter** (``session.counter(name)``): ``add(d)`` (``add``: ``ok`` with the new
  total) or ``get()`` (``read``);
* a **mutex** with expiry (the session's recovery window is short): ``lock()``
  (``acquire``: ``ok`` with the token; ``fail`` when not granted within the wait),
  a hold, then ``release()`` (``release``: ``ok``; ``fail`` when the lock had been
  lost first). A loss (the lock's ``lost`` signal) is a ``lost`` invoked at the grant
  seen (completed as below). A worker configured to pause blocks its whole event
  loop (:class:`Pauses`), now and then, while one of its clients holds, past the window: the lease
  expires, another client gets the lock, and the paused one must hear of its loss
  when it runs again. A hold may also be **handed off** (``lease.handoff()``, the
  string offered to the worker's other clients) and **adopted** by another client's
  session (``session.adopt(text)``: an ``acquire``, ``ok`` with its new token, ``fail``
  if the hold had ended first); and a lock may be taken with a **max_hold** (the
  server ends it that long after its grant, often before its release, a loss told by
  its push or as the release returns): :mod:`tenure.testing.workload._hold_steps`;
* **membership** (``session.group(name)``): a ``join`` of an id drawn from a small
  pool (``ok``: it joined; ``fail``: the id was taken, or the group full), or a
  ``leave`` of the member it has there; ``members()`` (``members``: ``ok`` with the
  ids). A member that ends with its session is a ``leave`` invoked at the join seen,
  as a lock's loss;
* where the config lists some, a **semaphore** of
  :data:`~tenure.testing.workload.SEMAPHORES`'s limit:
  ``session.acquire(name, count)`` of 1 to :data:`MAX_COUNT` tokens, held and
  released as a lock (the ``semaphore`` model, the ``acquire``'s value its count),
  or ``describe(owners=True)`` (``holders``: ``ok`` with the owners' tokens);
* an **election**: ``campaign()``, leading a while, ``resign()``, recorded as a
  lock of the ``mutex`` model (the election's name its key), or ``leader()``
  (``holders``: ``ok`` with the leader's token, none if nobody leads);
* and, where the config lists some, a **claim** of a name for a slot, ended by a
  release, a release by its id, or its ``at_most``: recorded in the ``claim`` file,
  held to the store's promises with time in them
  (:mod:`tenure.testing.workload._claim_steps`).

A loss the service told (``LeaseLostError``: the hold is gone there) is completed
``ok`` when the client heard it (the model's loss: the hold ended in between). One
the client declared itself is never completed (``info``): a session given up on the
client's own clock (``SessionExpiredError``, promise 6a) is still kept by the
service for a while (it counts the window from later, 2% long), and a closed
session's holds end when the close is served; either ends the hold some time after
the telling, which nobody observes (a ``members()`` read may still show the member
after its client was told).

A lost answer, a lost session and a ``release()`` or ``leave()`` that returned are
recorded by :class:`~tenure.testing.workload._recording.LinRecorder`'s rules. A client started again
after its process was killed (the simulation's ``crash-client``) may be given its
predecessor's session ticket (``resume``): it takes that session back, and releases
the holds it finds there (each a ``release`` of the token its predecessor was
granted), then goes on as any client. Every wait is bounded; the loop stops with the
worker, or after :attr:`LinConfig.max_ops` operations.
"""

from __future__ import annotations

import asyncio
import contextlib
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

import tenure
from tenure.backends.remote import TenureBackend
from tenure.errors import AlreadyExistsError, LimitExceededError, NotFoundError, TenureError
from tenure.testing.workload._books import Books
from tenure.testing.workload._claim_steps import ClaimSteps
from tenure.testing.workload._config import LinConfig
from tenure.testing.workload._hold_steps import HoldSteps
from tenure.testing.workload._recording import Notes, Pauses, SessionGoneError

#: Members a group may have (more than the clients that join it).
MAX_MEMBERS: Final = 64
#: The step of a stale read, drawn only by a client that reads from standbys
#: (:meth:`LinConfig.reads_standbys`): few clients do (a fault run's clients of every
#: door), so its weight is high enough that they make a run's evidence of them soon.
STALE_READ: Final = "stale-read-register"


@dataclass(frozen=True)
class Resume:
    """A killed client's session, for the client started in its place: its ticket,
    when it opened (ns, the books' clock) and the grants its client recorded ``ok``."""

    ticket: str
    opened: int
    granted: frozenset[tuple[str, int]]


class LinClient(HoldSteps, ClaimSteps):
    """One client's loop (see the module docstring)."""

    def __init__(
        self,
        config: LinConfig,
        number: int,
        books: Books,
        pauses: Pauses,
        recorder: Notes,
        steps: dict[str, tuple[Step, int]] | None = None,
        resume: Resume | None = None,
    ) -> None:
        super().__init__(config, number, books, pauses, recorder)
        #: A session to take back first (a restarted client's: its predecessor's,
        #: module docstring), and when this client's session opened (ns).
        self.resume = resume
        self.ticket: str | None = None
        self.opened = 0
        #: The steps it draws from, with their weights (:data:`STEPS` by default), less
        #: those whose keys the config has none of.
        self.steps = {
            name: step
            for name, step in (STEPS if steps is None else steps).items()
            if (KEYS_OF.get(name) is None or getattr(config, KEYS_OF[name]))
            and (name != STALE_READ or self.reads_stale)
        }

    async def run(self, stop: asyncio.Event) -> None:
        """Connect (again while the service is down), then loop on sessions until ``stop``."""
        client: tenure.Client | None = None
        try:
            while client is None and not stop.is_set():
                try:
                    client = self.client = await tenure.connect(self.url, connect_timeout=2.0)
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
        resume, self.resume = self.resume, None  # (tried once)
        try:
            async with asyncio.timeout(self.config.op_timeout):
                if resume is None:
                    opening = client.session(self.config.node, recovery_window=self.config.window)
                else:
                    opening = client.session(self.config.node, resume=resume.ticket)
                session = await opening
        except (TenureError, OSError, TimeoutError) as error:
            self.rec.note(self.label, "session-failed", error=repr(error), resume=bool(resume))
            await _sleep_unless(stop, self.rng.uniform(0.1, 0.3))
            return
        self.ticket, self.opened = None, self.books.now_ns()
        with contextlib.suppress(TenureError):  # (a backend that cannot resume sessions)
            self.ticket = session.ticket().to_str()
        if resume is not None:
            self.opened = resume.opened  # (the same session)
            await self._release_resumed(session, resume)
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

    def resumable(self) -> Resume | None:
        """What a client started in this one's place needs to take its session back
        (None: it has none, or the backend cannot resume sessions)."""
        if self.ticket is None:
            return None
        return Resume(self.ticket, self.opened, frozenset(self.granted))

    async def _release_resumed(self, session: tenure.Session, resume: Resume) -> None:
        """Release the holds a session taken back kept (its predecessor's grants, tokens
        unchanged): each a ``release`` of its model by this client. A grant its
        predecessor never heard of (its acquire unanswered when it was killed) is first
        an ``acquire`` of this client, invoked when the session opened and answered
        now: it was granted in between. What the session holds otherwise (a group's
        member) ends with it."""
        models = {
            **dict.fromkeys(self.config.mutexes + self.config.elections, "mutex"),
            **dict.fromkeys(self.config.semaphores, "semaphore"),
        }
        leases = [lease for lease in session.leases() if lease.name in models]
        self.rec.note(self.label, "session-resumed", holds=[lease.token for lease in leases])
        for lease in leases:
            model = models[lease.name]
            writer, process = self.books.writer(model), self.procs.resumed(lease.name, lease.token)
            if (lease.name, lease.token) not in resume.granted:
                value = None if model == "mutex" else lease.count
                self.books.record_at(
                    resume.opened, model, "invoke", process, "acquire", value, lease.name
                )
                self.books.record_at(
                    self.books.now_ns(), model, "ok", process, "acquire", lease.token, lease.name
                )
            await self._end(session, lease, writer, process, "release", lease.token, lease.name)

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

        value = await self._call(
            "register", "read", key, None, describe, lambda v: (True, v),
            fields=self.register_fields,
        )  # fmt: skip
        if value is not None:
            self.last_read[key] = value

    async def write_register(self, session: tenure.Session) -> None:
        """``update(v)``: a ``write`` of ``v``."""
        key, value = self.rng.choice(self.config.registers), self._value()

        async def update() -> None:
            await session.semaphore(key).update(str(value).encode())

        await self._call(
            "register", "write", key, value, update, lambda _: (True, value),
            fields=self.register_fields,
        )  # fmt: skip

    async def swap_register(self, session: tenure.Session) -> None:
        """``compare_and_set(last read, v)``: a ``cas``, ``ok`` if it swapped."""
        key, new = self.rng.choice(self.config.registers), self._value()
        expected = self.last_read.get(key, 0)

        async def swap() -> bool:
            return await session.semaphore(key).compare_and_set(
                str(expected).encode(), str(new).encode()
            )

        pair = [expected, new]
        swapped = await self._call(
            "register", "cas", key, pair, swap, lambda done: (done, pair),
            fields=self.register_fields,
        )  # fmt: skip
        if swapped:
            await self.read_register(session, key)  # (module docstring: read back)

    async def stale_read_register(self, session: tenure.Session) -> None:
        """A ``read`` of a register that allows :attr:`LinConfig.max_staleness` seconds
        of staleness, which a standby answers (``session.semaphore(key).describe(
        max_staleness=S)``: the client's reads from standbys, each standby in turn, the
        leader if none can), recorded with lincheck's ``max_staleness`` and ``session``
        and, on its answer, ``answered_by``: the door that answered, or ``leader``.

        Which door answered is no public fact: it is read from the client's reads from
        standbys (``TenureBackend.standby_reads.answered``, a count per door that an
        internal of the remote backend keeps), the door whose count this read raised."""
        key, staleness = self.rng.choice(self.config.registers), self.config.max_staleness
        backend = None if self.client is None else self.client.backend
        assert staleness is not None
        assert isinstance(backend, TenureBackend)
        reads = backend.standby_reads
        assert reads is not None  # (a client of one service: LinConfig.reads_standbys)
        answered: dict[str, int] = {}

        async def describe() -> int | None:
            answered.clear()
            answered.update(reads.answered)
            try:
                found = await session.semaphore(key).describe(max_staleness=staleness)
            except NotFoundError:
                return None
            return int(found.data.decode())

        def who() -> dict[str, str]:
            doors = [door for door, n in reads.answered.items() if n > answered.get(door, 0)]
            if not doors:
                return {"answered_by": "unknown"}
            return {"answered_by": doors[0] or "leader"}  # ("": the leader's count)

        fields = {"max_staleness": staleness, **(self.register_fields or {})}
        value = await self._call(
            "register", "read", key, None, describe, lambda v: (True, v),
            fields=fields, answered=who,
        )  # fmt: skip
        if value is not None:
            self.last_read[key] = value

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

    # -- membership -------------------------------------------------------------------

    async def join_or_leave(self, session: tenure.Session) -> None:
        """A ``join`` of an id of the pool, or a ``leave`` of the member it has there."""
        group = self.rng.choice(self.config.groups)
        writer = self.books.writer("membership")
        member = self.members.pop(group, None)
        if member is not None:
            await self._end(session, member, writer, self.procs.current, "leave", member.id, group)
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
    STALE_READ: (LinClient.stale_read_register, 12),
    "add-counter": (LinClient.add_counter, 2),
    "read-counter": (LinClient.read_counter, 2),
    "hold-mutex": (LinClient.hold_mutex, 2),
    "hold-bounded-mutex": (LinClient.hold_bounded_mutex, 1),
    "hand-off-mutex": (LinClient.hand_off_mutex, 1),
    "adopt-mutex": (LinClient.adopt_mutex, 1),
    "join-or-leave": (LinClient.join_or_leave, 2),
    "read-members": (LinClient.read_members, 1),
    "hold-semaphore": (LinClient.hold_semaphore, 2),
    "read-holders": (LinClient.read_holders, 1),
    "lead-election": (LinClient.lead_election, 2),
    "read-leader": (LinClient.read_leader, 1),
    "claim-slot": (LinClient.claim_slot, 2),
}
#: The field of :class:`~tenure.testing.workload.LinConfig` that lists each step's keys:
#: a step is drawn only where the config has some.
KEYS_OF: Final[dict[str, str]] = {
    "read-register": "registers",
    "write-register": "registers",
    "swap-register": "registers",
    STALE_READ: "registers",
    "add-counter": "counters",
    "read-counter": "counters",
    "hold-mutex": "mutexes",
    "hold-bounded-mutex": "mutexes",
    "hand-off-mutex": "mutexes",
    "adopt-mutex": "mutexes",
    "join-or-leave": "groups",
    "read-members": "groups",
    "hold-semaphore": "semaphores",
    "read-holders": "semaphores",
    "lead-election": "elections",
    "read-leader": "elections",
    "claim-slot": "claims",
}
