"""Differential test: random operations on the backend under test and on the engine.

Hypothesis generates short sequences of operations over a few sessions and two
semaphores: open a session, create a semaphore, acquire (a count, a timeout of 0,
a short or a long wait, or none; ephemeral or not), lock both semaphores at once
(``lock_all`` of s1 and s2, in either order, where the backend declares
ALL_OR_NONE), release,
cancel a waiting acquire, close a session, delete a semaphore (forced or not), and, where the kit
drives a FakeClock (``memory://``), drop and restore a session's connection and let
time pass, so that waits time out and sessions expire. Where the backend declares
them, the abilities' operations too (:mod:`differential_abilities`): acquires bounded
by ``max_hold`` (MAX_HOLD), holds handed off and adopted (HANDOFF), claims and their
releases by id (CLAIMS), so that each store's copy of them (the engine's, Redis's Lua,
PostgreSQL's PL/pgSQL, etcd's Txns) is held to the engine's. Each operation goes to the
backend through the public client API and to :class:`tenure._core.Engine`, the
oracle, as the command it stands for, at the same time. After every step they must
agree on:

* each operation's outcome: granted, refused as busy, queued, or the error class;
* the end of each waiting acquire (granted, timed out, deleted, session gone) and of
  each lease (lost, and why) as the client reports it;
* which sessions are alive;
* every semaphore's existence, limit and count, its owners (session, count) in
  grant order and its waiters (session, count) in service order;
* the order of fencing tokens, across every grant made so far (the numbers may
  differ between backends; their order may not). Where the backend's waiters each
  commit their own grant (etcd://, ``Harness.orders_tokens_of_one_step``), the
  grants one step makes on different semaphores may come in either order; each
  semaphore's grants, and the grants of different steps, may not.

The backend's session ids are mapped to the oracle's as sessions are opened. A
session may acquire a semaphore it holds or waits for already (up to
``HOLDS_PER_SESSION`` times): each acquire is a hold of its own, which the oracle
numbers as the client does, the lowest number not in use. Operations that do not
apply to the current state (nothing to release...) are skipped, so every sequence
is valid and shrinks well. Where time cannot be faked, only time-free operations
are generated (timeouts of 0 or none, no disconnects).
"""

from __future__ import annotations

import asyncio
import itertools
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import tenure
from tenure._core import (
    MAX_COUNT,
    Acquire,
    AcquireAll,
    AcquireFailed,
    AcquireStatus,
    AttachSession,
    CancelAcquire,
    CloseSession,
    CreateNode,
    CreateSemaphore,
    CreateSession,
    DeleteSemaphore,
    DetachSession,
    Engine,
    Granted,
    LeaseLost,
    Release,
    SessionEnded,
)
from tenure.backends import Capability
from tenure.errors import SessionClosedError, TenureError, error_from_code
from tenure.testing._clock import FakeClock

from .differential_abilities import AbilitySteps
from .differential_ops import (
    CLAIM_NAMES,
    HOLDS_PER_SESSION,
    LOCKED_TOGETHER,
    SEMAPHORES,
    WAITS,
    AcquireOp,
    Advance,
    Cancel,
    ClaimOp,
    Close,
    Create,
    Delete,
    Disconnect,
    Draws,
    HandoffOp,
    LockAllOp,
    Open,
    Reconnect,
    ReleaseClaimOp,
    ReleaseOp,
    scenarios,
)
from .differential_sides import (
    HeldLease,
    Track,
    Waiting,
    check_semaphore,
    check_tokens,
    check_waiting,
    outcome,
    same,
)
from .harness import Harness, unique
from .support import describe, eventually, spawn

pytestmark = pytest.mark.requires(Capability.FIFO)


KEY = b"differential"
EXAMPLES = int(os.environ.get("TENURE_DIFFERENTIAL_EXAMPLES", "50"))


class Differential(AbilitySteps):
    """Runs one sequence of operations on both sides, checking after each step."""

    def __init__(self, harness: Harness, clock: FakeClock | None) -> None:
        self.harness, self.clock = harness, clock
        self.tokens = Capability.FENCING_TOKENS in harness.capabilities
        self.engine = Engine()
        self.node = unique("diff")
        self.tracks: list[Track] = []
        self.ids: dict[int, int] = {}  # backend session id -> oracle session id
        #: Every grant: (oracle token, backend token, step, semaphore).
        self.grants: list[tuple[int, int, int, str]] = []
        self.step = 0
        self.request_ids = itertools.count(1)
        self.clients: list[tenure.Client] = []
        # Locks a client releases on its own (the rest of a lock_all set whose one lock
        # was lost): checks wait for their releases before they compare the stores.
        self.releasing: list[tenure.Lease] = []
        self.virtual = 0.0
        self.short_ends: dict[int, float] = {}
        self.claim_ids: dict[str, str] = {}

    async def connect(self) -> tenure.Client:
        url = self.harness.url(self.node)
        client = await tenure.connect(url, **self.harness.options(self.clock))
        self.clients.append(client)
        return client

    async def run(self, ops: list[Any]) -> None:
        client = await self.connect()
        await client.create_node(self.node)
        self.engine.apply(CreateNode(self.node), self.now)
        try:
            self.observer = await client.session(self.node)
            self.observer_oid = self.engine.apply(
                CreateSession(self.node, KEY), self.now
            ).session_id
            self.ids[self.observer.id] = self.observer_oid
            for self.step, op in enumerate(ops):
                await self.apply(op)
                if self.short_ends:  # (a short bound granted: waited out, then compared)
                    await self.outlast(f"after step {self.step}: {op}, its bounds ended")
                else:
                    await self.check(f"after step {self.step}: {op}")
        finally:
            for track in self.tracks:
                for waiting in track.waiting.values():
                    waiting.task.cancel()
                await asyncio.gather(
                    *(w.task for w in track.waiting.values()), return_exceptions=True
                )
            for each in reversed(self.clients):
                await each.aclose()
            await self.harness.cleanup(self.node)

    # -- applying one operation to both sides ---------------------------------------

    async def apply(self, op: Any) -> None:
        if isinstance(op, Open):
            if len([t for t in self.tracks if t.ended is None]) >= 3:
                return
            client = await self.connect()  # one client per session, like separate processes
            session = await client.session(self.node, recovery_window=op.window)
            info = self.engine.apply(CreateSession(self.node, KEY, timeout=op.window), self.now)
            self.tracks.append(Track(session, info.session_id, info.seq_no))
            self.ids[session.id] = info.session_id
        elif isinstance(op, Create):
            name = SEMAPHORES[op.sem]
            expected = self.oracle(CreateSemaphore(self.observer_oid, name, op.limit))
            got = await outcome(self.observer.semaphore(name).create(op.limit))
            assert same(got, expected), f"create {name}: backend {got!r}, oracle {expected!r}"
        elif isinstance(op, AcquireOp):
            await self.acquire(op)
        elif isinstance(op, LockAllOp):
            await self.lock_all(op)
        elif isinstance(op, ReleaseOp):
            name = SEMAPHORES[op.sem]
            track = self.pick(op.who, lambda t: bool(t.places(name, t.held)))
            if track is None:
                return
            places = track.places(name, track.held)
            place = places[op.who % len(places)]
            held = track.held.pop(place)
            if held.lost is None:
                assert self.engine.apply(Release(track.oid, *place), self.now)
            await held.lease.release()
        elif isinstance(op, Cancel):
            name = SEMAPHORES[op.sem]
            track = self.pick(op.who, lambda t: bool(t.places(name, t.waiting)))
            if track is None:
                return
            places = track.places(name, track.waiting)
            place = places[op.who % len(places)]
            waiting = track.waiting[place]
            if waiting.outcome is not None:
                return  # ended already (its end is checked like any other)
            del track.waiting[place]
            for member in waiting.members:  # a lock_all's: the set goes as one
                track.waiting.pop(member, None)
            cancel = CancelAcquire(track.oid, name, waiting.request_id, place[1])
            assert self.engine.apply(cancel, self.now)
            waiting.task.cancel()
            got = await outcome(waiting.task)
            assert isinstance(got, asyncio.CancelledError), f"cancelled acquire ended {got!r}"
        elif isinstance(op, Close):
            track = self.pick(op.who)
            if track is None:
                return
            self.engine.apply(CloseSession(track.oid), self.now)
            self.end(track, SessionClosedError("closed"))
            await track.session.close()
        elif isinstance(op, Delete):
            name = SEMAPHORES[op.sem]
            expected = self.oracle(DeleteSemaphore(self.observer_oid, name, op.force))
            got = await outcome(self.observer.semaphore(name).delete(force=op.force))
            assert same(got, expected), f"delete {name}: backend {got!r}, oracle {expected!r}"
        elif isinstance(op, Disconnect):
            track = self.pick(op.who)
            if track is None:
                return
            self.engine.apply(DetachSession(track.oid), self.now)
            track.attached = False
            await self.harness.disconnect(track.session)
        elif isinstance(op, Reconnect):
            detached = [t for t in self.tracks if t.ended is None and not t.attached]
            if not detached:
                return
            track = detached[op.who % len(detached)]
            track.seq_no += 1
            self.engine.apply(AttachSession(track.oid, KEY, track.seq_no), self.now)
            track.attached = True
            await self.harness.reconnect(track.session)
        elif isinstance(op, HandoffOp):
            await self.handoff(op)
        elif isinstance(op, ClaimOp):
            await self.claim(op)
        elif isinstance(op, ReleaseClaimOp):
            await self.release_claim(op)
        elif isinstance(op, Advance):
            assert self.clock is not None
            await self.clock.advance(op.seconds)
            self.engine.tick(self.now)
        self.take_effects()

    async def acquire(self, op: AcquireOp) -> None:
        name = SEMAPHORES[op.sem]
        track = self.pick(
            op.who,
            lambda t: len(t.places(name, t.waiting) + t.places(name, t.held)) < HOLDS_PER_SESSION,
        )
        if track is None:
            return
        timeout, request_id = WAITS[op.wait], next(self.request_ids)
        bound = self.bound(op.bound)
        hold = track.free_hold(name)
        if hold:
            event("a session's second hold on a semaphore")
        command = Acquire(
            track.oid,
            name,
            op.count,
            request_id,
            b"",
            timeout,
            op.ephemeral,
            hold=hold,
            max_hold=bound,
        )
        try:
            result = self.engine.apply(command, self.now)
        except TenureError as error:
            expected: BaseException | int | None = error
        else:
            if result.status is AcquireStatus.GRANTED:
                assert result.token is not None
                expected = result.token
                self.granted_bounded(result.token, bound)
            elif result.status is AcquireStatus.BUSY:
                expected = TimeoutError("busy")
            else:
                expected = None
        asked = track.session.acquire(
            name, op.count, timeout=timeout, ephemeral=op.ephemeral, max_hold=bound
        )
        waiting = Waiting(spawn(asked), request_id, op.count, expected, bound=bound)
        track.waiting[name, hold] = waiting
        if expected is None:  # queued: wait until the backend shows it queued too
            sid = track.session.id
            mine = len([p for p in track.places(name, track.waiting) if p[1] != hold]) + 1

            async def queued() -> bool:
                found = await describe(self.observer, name)
                return waiting.task.done() or (
                    found is not None and [w.session_id for w in found.waiters].count(sid) >= mine
                )

            await eventually(queued, f"session {sid} queued on {name!r}")
            assert not waiting.task.done(), f"{op}: the oracle queued it, the backend ended it"

    async def lock_all(self, op: LockAllOp) -> None:
        names = LOCKED_TOGETHER[::-1] if op.reverse else LOCKED_TOGETHER
        track = self.pick(
            op.who,
            lambda t: all(
                len(t.places(name, t.waiting) + t.places(name, t.held)) < HOLDS_PER_SESSION
                for name in names
            ),
        )
        if track is None:
            return
        timeout = WAITS[op.wait]
        holds = tuple(track.free_hold(name) for name in names)
        ids = tuple(next(self.request_ids) for _ in names)
        command = AcquireAll(track.oid, names, holds, ids, MAX_COUNT, b"", timeout)
        expected: list[BaseException | int | None]
        try:
            result = self.engine.apply(command, self.now)
        except TenureError as error:
            expected = [error] * len(names)
        else:
            if result.status is AcquireStatus.GRANTED:
                expected = list(result.tokens)
            elif result.status is AcquireStatus.BUSY:
                expected = [TimeoutError("busy")] * len(names)
            else:
                expected = [None] * len(names)
        event(f"lock_all: {type(expected[0]).__name__}")  # (int granted, None queued...)
        task = spawn(track.session.lock_all(list(names), timeout=timeout))
        members = tuple(zip(names, holds, strict=True))
        for place, request_id, outcome_ in zip(members, ids, expected, strict=True):
            track.waiting[place] = Waiting(
                task, request_id, MAX_COUNT, outcome_, member=place[0], members=members
            )
        if expected[0] is None:  # queued: wait until the backend shows it in both queues
            sid = track.session.id

            async def queued() -> bool:
                for name in names:
                    found = await describe(self.observer, name)
                    mine = len(track.places(name, track.waiting))
                    if not task.done() and (
                        found is None or [w.session_id for w in found.waiters].count(sid) < mine
                    ):
                        return False
                return True

            await eventually(queued, f"session {sid} queued on {names!r}")
            assert not task.done(), f"{op}: the oracle queued it, the backend ended it"

    def oracle(self, command: Any) -> BaseException | None:
        try:
            self.engine.apply(command, self.now)
        except TenureError as error:
            return error
        return None

    def take_effects(self) -> None:
        """Fold the oracle's effects into what each acquire and lease must end with."""
        by_oid = {t.oid: t for t in self.tracks}
        for effect in self.engine.take_effects():
            track = by_oid.get(effect.session_id)
            if track is None:
                continue  # the observer's
            if isinstance(effect, Granted):
                for waiting in track.waiting.values():
                    if waiting.request_id == effect.request_id:
                        waiting.outcome = effect.token
                        self.granted_bounded(effect.token, waiting.bound)
                        bounded = " (bounded)" if waiting.bound is not None else ""
                        event(f"a queued acquire granted{bounded}")
            elif isinstance(effect, AcquireFailed):
                for waiting in track.waiting.values():
                    if waiting.request_id == effect.request_id:
                        waiting.outcome = error_from_code(effect.code, effect.message)
            elif isinstance(effect, LeaseLost):
                held = track.held.get((effect.name, effect.hold))
                if "max_hold" in effect.message:
                    event("a grant ended at its max_hold")
                if held is not None and held.token == effect.token:
                    held.lost = error_from_code(effect.code, effect.message)
                    if track.ended is None:
                        self.release_the_rest(track, held)
                granted = track.waiting.get((effect.name, effect.hold))
                if granted is not None and granted.outcome == effect.token:
                    granted.lost = error_from_code(effect.code, effect.message)
            elif isinstance(effect, SessionEnded):
                self.end(track, error_from_code(effect.code, effect.message))

    def release_the_rest(self, track: Track, lost: HeldLease) -> None:
        """One lock of a lock_all set was lost: the client releases the others (the
        set has ended), so the oracle does too."""
        for place in lost.members:
            other = track.held.get(place)
            if other is None or other is lost or other.lost is not None:
                continue
            del track.held[place]
            self.releasing.append(other.lease)
            assert self.engine.apply(Release(track.oid, *place), self.now)
        self.take_effects()

    def end(self, track: Track, reason: BaseException) -> None:
        track.ended = reason
        for waiting in track.waiting.values():
            if waiting.outcome is None:
                waiting.outcome = reason
        for held in track.held.values():
            if held.lost is None:
                held.lost = reason

    # -- checking ---------------------------------------------------------------------

    async def check(self, where: str) -> None:
        releasing, self.releasing = self.releasing, []
        for lease in releasing:
            await lease.release()  # (ended already: waits for the client's own release)
        for track in self.tracks:
            for place, waiting in list(track.waiting.items()):
                await check_waiting(track, place, waiting, where, self.grants, self.step)
            for place, held in list(track.held.items()):
                name = place[0]
                if held.lost is not None:
                    lease = held.lease

                    async def lost(lease: tenure.Lease = lease) -> bool:
                        return lease.lost_reason is not None

                    await eventually(lost, f"{where}: the lease of {name!r} lost")
                    assert same(lease.lost_reason, held.lost), (
                        f"{where}: lease of {name!r} lost with {lease.lost_reason!r}, "
                        f"oracle {held.lost!r}"
                    )
                    del track.held[place]
                else:
                    assert held.lease.lost_reason is None, f"{where}: {held.lease!r} lost"
            if track.ended is None:
                assert track.session.lost_reason is None, f"{where}: {track.session!r} lost"
            elif not isinstance(track.ended, SessionClosedError):
                assert same(track.session.lost_reason, track.ended), where
        for name in (*SEMAPHORES, LOCKED_TOGETHER[1], CLAIM_NAMES[1]):
            await check_semaphore(
                self.observer,
                self.observer_oid,
                self.engine,
                self.now,
                self.ids,
                self.tokens,
                name,
                where,
            )
        if self.tokens:
            check_tokens(self.grants, self.harness.orders_tokens_of_one_step, where)


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_the_backend_agrees_with_the_engine(backend: Harness, data: st.DataObject) -> None:
    """Random operation sequences: the backend and the engine (the oracle) agree at each step."""
    fake_time = backend.can_fake_time and backend.can_disconnect
    capabilities = backend.capabilities
    draws = Draws(
        fake_time=fake_time,
        all_or_none=Capability.ALL_OR_NONE in capabilities,
        max_hold=Capability.MAX_HOLD in capabilities,
        handoff=Capability.HANDOFF in capabilities,
        claims=Capability.CLAIMS in capabilities,
    )
    ops = data.draw(scenarios(draws), label="operations")
    clock = backend.new_clock() if fake_time else None
    asyncio.run(Differential(backend, clock).run(ops))
