"""The differential test's operations of the abilities: bounded holds, hand-offs, claims.

What :mod:`test_differential` draws beyond the core where the backend declares it
(:class:`~tenure.testing.conformance.differential_ops.Draws`), each applied to the
backend through the public client (a claim through the backend session's
``Claiming``, so that the test chooses its id) and to the engine, the oracle, as the
command it stands for:

* **a bounded hold** (MAX_HOLD): an acquire with ``max_hold``. Where the kit fakes
  time, the bound ends as the clock is advanced, on both sides. Where the store keeps
  its own time, a short bound is waited out by the step that granted it
  (:meth:`AbilitySteps.outlast`): the oracle's clock moves to the bound's end at
  once, the backend's end is awaited (the holder's loss, the waiters served), and
  only then is the state compared; a long one never ends in a test;
* **a hand-off** (HANDOFF): a hold offered and adopted by a session (its own or
  another), whose holder then loses it; with ``again``, the string adopted a second
  time, which must fail as the oracle's AdoptHold does;
* **a claim** (CLAIMS): one of two claim ids on a semaphore the other operations use
  too (a retry of a live claim, another's refused, a held semaphore refused), and a
  release by id alone; a claim's end deletes its semaphore on both sides.

Every claim's and adopted hold's fencing token joins the grants whose order is checked.
"""

from __future__ import annotations

import abc
from typing import Any

import pytest
from hypothesis import event

import tenure
from tenure import lowlevel
from tenure._core import AdoptHold, ClaimName, Engine, OfferHold, ReleaseClaim
from tenure._core.claims import ClaimRecord
from tenure._core.handlers.handoffs import digest_of
from tenure.backends import Capability
from tenure.backends._base import claims
from tenure.errors import TenureError
from tenure.testing._clock import FakeClock

from .differential_ops import (
    CLAIM_IDS,
    CLAIM_NAMES,
    FAKE_BOUNDS,
    FAKE_CLAIM_TIMES,
    HOLDS_PER_SESSION,
    REAL_BOUNDS,
    REAL_CLAIM_TIMES,
    SEMAPHORES,
    ClaimOp,
    HandoffOp,
    ReleaseClaimOp,
)
from .differential_sides import HeldLease, Track, outcome, same
from .support import spawn

pytestmark = pytest.mark.requires(Capability.FIFO)

#: The secret of the oracle's offers (the client makes its own: only its digest
#: travels, and each side checks its own).
ORACLE_SECRET = b"differential-offer-secret"
#: The most rounds of short bounds one step may wait out: each round ends the bounds
#: granted by the one before (a chain of waiters, each bounded), at most one per hold.
MAX_ROUNDS = 24


class AbilitySteps(abc.ABC):
    """The operations of the module docstring: a base of
    :class:`test_differential.Differential`, which has the state declared here and
    the steps every operation shares (:meth:`take_effects`, :meth:`check`)."""

    engine: Engine
    clock: FakeClock | None
    node: str
    step: int
    tracks: list[Track]
    ids: dict[int, int]
    grants: list[tuple[int, int, int, str]]
    clients: list[tenure.Client]
    #: Where the store keeps its own time: the oracle's clock (moved by :meth:`outlast`).
    virtual: float
    #: Where the store keeps its own time: the short bounds granted and not yet waited
    #: out, by the oracle's token, with their ends on the oracle's clock.
    short_ends: dict[int, float]
    #: The id of the claim made last on each name (a release names it).
    claim_ids: dict[str, str]

    @property
    def now(self) -> float:
        return self.virtual if self.clock is None else self.clock.now()

    def pick(self, who: int, fits: Any = None) -> Track | None:
        """The ``who``-th session alive, attached and ``fits``, cyclically (None: none is)."""
        live = [
            t for t in self.tracks if t.ended is None and t.attached and (fits is None or fits(t))
        ]
        return live[who % len(live)] if live else None

    @abc.abstractmethod
    def take_effects(self) -> None:
        """Fold the oracle's effects into what each acquire and lease must end with."""

    @abc.abstractmethod
    async def check(self, where: str) -> None:
        """Compare the backend with the oracle (and wait for what the oracle did)."""

    def bound(self, name: str) -> float | None:
        """The seconds of the bound ``name`` (a key of the bounds) on this backend's time."""
        return (FAKE_BOUNDS if self.clock is not None else REAL_BOUNDS)[name]

    def granted_bounded(self, token: int, bound: float | None) -> None:
        """The oracle granted ``token`` bounded by ``bound``: where the store keeps its own
        time, a short bound is to be waited out before the state is compared."""
        if self.clock is None and bound is not None and bound == REAL_BOUNDS["short"]:
            self.short_ends[token] = self.now + bound

    async def outlast(self, where: str) -> None:
        """Wait out the short bounds granted (module docstring): move the oracle's clock
        to each round's end, then compare, once the backend has done the same."""
        for _ in range(MAX_ROUNDS):
            due = {token: end for token, end in self.short_ends.items() if end > self.virtual}
            self.short_ends = due
            if not due:
                await self.check(where)
                return
            self.virtual = min(due.values())
            event("short bounds waited out")
            self.engine.tick(self.virtual)
            self.take_effects()
        raise AssertionError(f"{where}: bounded grants still due after {MAX_ROUNDS} rounds")

    # -- hand-offs ----------------------------------------------------------------------

    async def handoff(self, op: HandoffOp) -> None:
        name = SEMAPHORES[op.sem]

        def offerable(track: Track) -> list[tuple[str, int]]:
            return [
                place
                for place, held in sorted(track.held.items())
                if place[0] == name and held.lost is None and not held.members
            ]

        holder = self.pick(op.who, lambda t: bool(offerable(t)))
        if holder is None:
            return
        places = offerable(holder)
        place = places[op.who % len(places)]
        held = holder.held[place]
        adopter = self.pick(op.to, lambda t: self.room(t, name))
        if adopter is None:
            return
        offer = OfferHold(holder.oid, name, digest_of(ORACLE_SECRET), place[1])
        assert self.engine.apply(offer, self.now).token == held.token
        text = await held.lease.handoff()
        await self.adopt(adopter, text, holder, place, held.token)
        self.take_effects()  # (the holder's LeaseLost)
        if op.again:
            other = self.pick(op.to + 1, lambda t: self.room(t, name))
            if other is not None:
                await self.adopt(other, text, holder, place, held.token)
                self.take_effects()

    def room(self, track: Track, name: str) -> bool:
        """Whether ``track`` may take one more hold of ``name`` in a sequence."""
        return len(track.places(name, track.waiting) + track.places(name, track.held)) < (
            HOLDS_PER_SESSION
        )

    async def adopt(
        self, adopter: Track, text: str, holder: Track, place: tuple[str, int], token: int
    ) -> None:
        """``adopter`` adopts the hand-off ``text`` of ``holder``'s hold at ``place``
        (its oracle token ``token``), on both sides; the same outcome."""
        name, hold = place[0], adopter.free_hold(place[0])
        command = AdoptHold(adopter.oid, name, holder.oid, place[1], token, ORACLE_SECRET, hold)
        expected: BaseException | int
        try:
            expected = self.engine.apply(command, self.now).token or 0
        except TenureError as error:
            expected = error
        # (A task of its own: the adopted hold is its caller's, as an acquire's is.)
        got = await outcome(spawn(adopter.session.adopt(text)))
        event(f"adopt: {type(expected).__name__}")  # (int: adopted)
        if isinstance(expected, BaseException):
            assert same(got, expected), f"adopt {name!r}: backend {got!r}, oracle {expected!r}"
            return
        assert isinstance(got, tenure.Lease), f"adopt {name!r}: backend {got!r}, oracle granted"
        adopter.held[name, hold] = HeldLease(got, expected)
        self.grants.append((expected, got.token, self.step, name))
        if token in self.short_ends:  # (the adopted grant keeps the end of the one it took)
            self.short_ends[expected] = self.short_ends[token]

    # -- claims -------------------------------------------------------------------------

    def claim_times(self, name: str) -> float:
        return (FAKE_CLAIM_TIMES if self.clock is not None else REAL_CLAIM_TIMES)[name]

    async def claim(self, op: ClaimOp) -> None:
        track = self.pick(op.who)
        if track is None:
            return
        name, claim_id = CLAIM_NAMES[op.sem], CLAIM_IDS[op.claim]
        least, most = self.claim_times(op.least), self.claim_times(op.most)
        expected: BaseException | ClaimRecord
        try:
            expected = self.engine.apply(
                ClaimName(track.oid, name, claim_id, least, most), self.now
            )
        except TenureError as error:
            expected = error
        got = await outcome(
            claims(lowlevel.backend_session(track.session)).claim(name, claim_id, least, most, b"")
        )
        event(f"claim: {type(expected).__name__}")
        where = f"claim {name!r} by session {track.session.id}"
        if isinstance(expected, BaseException):
            assert same(got, expected), f"{where}: backend {got!r}, oracle {expected!r}"
        else:
            assert isinstance(got, ClaimRecord), f"{where}: backend {got!r}, oracle {expected!r}"
            mine = (got.id, got.at_least, got.at_most, got.released_at is None, got.data)
            theirs = (
                expected.id,
                expected.at_least,
                expected.at_most,
                expected.released_at is None,
                expected.data,
            )
            assert mine == theirs, f"{where}: backend {got!r}, oracle {expected!r}"
            assert self.ids.get(got.session_id) == expected.session_id, (
                f"{where}: claimed by backend session {got.session_id}, oracle's "
                f"{expected.session_id}"
            )
            self.claim_ids[name] = expected.id
            if all(grant[0] != expected.token for grant in self.grants):  # (a retry: seen)
                self.grants.append((expected.token, got.token, self.step, name))
        self.take_effects()

    async def release_claim(self, op: ReleaseClaimOp) -> None:
        name = CLAIM_NAMES[op.sem]
        claim_id = CLAIM_IDS[op.claim]
        if op.claim == 0:
            claim_id = self.claim_ids.get(name, claim_id)
        expected: BaseException | bool
        try:
            expected = self.engine.apply(ReleaseClaim(self.node, name, claim_id), self.now)
        except TenureError as error:
            expected = error
        got = await outcome(self.clients[0].release_claim(self.node, name, claim_id))
        event(f"release_claim: {expected!r}")
        if isinstance(expected, BaseException):
            assert same(got, expected), f"release_claim {name!r}: {got!r}, oracle {expected!r}"
        else:
            assert got is expected, f"release_claim {name!r}: backend {got!r}, oracle {expected}"
        self.take_effects()
