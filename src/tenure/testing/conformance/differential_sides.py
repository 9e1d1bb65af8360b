"""What the differential test tracks of each session on both sides, and their checks.

A session's acquires in flight and leases held, each with what the oracle (the
engine) says of it; and the checks, after each step, that the backend agrees: each
ended acquire, each semaphore, the fencing tokens' order (:mod:`test_differential`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import pytest

import tenure
from tenure._core import (
    DescribeSemaphore,
    Engine,
)
from tenure.backends import Capability
from tenure.errors import NotFoundError

from .support import PATIENCE, describe

pytestmark = pytest.mark.requires(Capability.FIFO)


#: A lease's place: the semaphore, and the session's number for the hold.
Place: TypeAlias = tuple[str, int]


@dataclass
class Waiting:
    """An acquire in flight: the client's task, and what the oracle says of it."""

    task: asyncio.Task[Any]  # a Lease, or HeldLocks of a lock_all
    request_id: int
    count: int
    outcome: BaseException | int | None = None  # None: still queued; int: granted token
    #: Of a lock_all: this member's semaphore, and the places of all its members.
    member: str | None = None
    members: tuple[Place, ...] = ()
    #: Its grant's bound (max_hold, seconds), if any.
    bound: float | None = None
    #: Why the oracle ended its grant, if it did before the client took it: the client
    #: may then hold a lease already lost, or its acquire raise the loss (the grant
    #: doomed before it was taken: ``HoldLedger.lose``).
    lost: BaseException | None = None


@dataclass
class HeldLease:
    """A lease the client holds, and its oracle token; ``lost``: why the oracle ended it."""

    lease: tenure.Lease
    token: int
    lost: BaseException | None = None
    members: tuple[Place, ...] = ()  # of a lock_all: the places of its set


@dataclass
class Track:
    """One session on both sides."""

    session: tenure.Session
    oid: int
    seq_no: int
    attached: bool = True
    ended: BaseException | None = None  # why the oracle ended it
    waiting: dict[Place, Waiting] = field(default_factory=dict)
    held: dict[Place, HeldLease] = field(default_factory=dict)

    def places(self, name: str, table: dict[Place, Any]) -> list[Place]:
        """The places of ``table`` on semaphore ``name``, by hold number."""
        return sorted(place for place in table if place[0] == name)

    def free_hold(self, name: str) -> int:
        """The hold number the client gives its next acquire of ``name``: the lowest free."""
        busy = {hold for n, hold in (*self.waiting, *self.held) if n == name}
        return min(set(range(len(busy) + 1)) - busy)


def check_tokens(
    grants: list[tuple[int, int, int, str]], one_step_any_order: bool, where: str
) -> None:
    """Every grant's token is above those of the grants the oracle made before it
    (module docstring: of another step or the same semaphore, on etcd://)."""
    grants = sorted(grants)
    if one_step_any_order:
        in_grant_order = [mine for _, mine, _, _ in grants]
        assert in_grant_order == sorted(set(in_grant_order)), (
            f"{where}: fencing tokens out of the oracle's order: {grants}"
        )
        return
    for i, (_, earlier, step, name) in enumerate(grants):
        for _, later, later_step, later_name in grants[i + 1 :]:
            if later_step == step and later_name != name:
                continue  # made by one step on two semaphores: either order
            assert earlier < later, f"{where}: fencing tokens out of the oracle's order: {grants}"


async def check_waiting(
    track: Track,
    place: Place,
    waiting: Waiting,
    where: str,
    grants: list[tuple[int, int, int, str]],
    step: int,
) -> None:
    """The end of an acquire in flight, if the oracle ended it: the same on the backend
    (a grant moves it to ``track.held`` and ``grants``)."""
    name = place[0]
    if waiting.outcome is None:
        assert not waiting.task.done(), (
            f"{where}: the oracle still queues {name!r} for session {track.session.id}, "
            f"the backend ended it: {await outcome(waiting.task)!r}"
        )
        return
    await asyncio.wait({waiting.task}, timeout=PATIENCE)
    assert waiting.task.done(), f"{where}: the acquire of {name!r} never ended"
    got = await outcome(waiting.task)
    del track.waiting[place]
    if waiting.member is not None and isinstance(got, tenure.HeldLocks):
        got = got.locks[waiting.member]  # (this member's lock of the set)
    if isinstance(waiting.outcome, int):
        if waiting.lost is not None and same(got, waiting.lost):
            return  # granted, and lost before the client took it (``Waiting.lost``)
        assert isinstance(got, tenure.Lease), (
            f"{where}: the oracle granted {name!r} to session {track.session.id}, "
            f"the backend ended it with {got!r}"
        )
        assert got.count == waiting.count
        track.held[place] = HeldLease(
            got, waiting.outcome, lost=waiting.lost, members=waiting.members
        )
        grants.append((waiting.outcome, got.token, step, name))
    else:
        assert same(got, waiting.outcome), (
            f"{where}: acquire of {name!r} by session {track.session.id} ended with "
            f"{got!r}, oracle {waiting.outcome!r}"
        )


async def check_semaphore(
    observer: tenure.Session,
    observer_oid: int,
    engine: Engine,
    now: float,
    ids: dict[int, int],
    tokens: bool,
    name: str,
    where: str,
) -> None:
    """Semaphore ``name`` on the backend (described by ``observer``) and in the oracle:
    existence, limit, count, owners and waiters (and their tokens' order)."""
    mine = await describe(observer, name)
    try:
        command = DescribeSemaphore(observer_oid, name, owners=True, waiters=True)
        theirs = engine.apply(command, now).description
    except NotFoundError:
        assert mine is None, f"{where}: {name!r} exists on the backend only"
        return
    assert mine is not None, f"{where}: {name!r} exists in the oracle only"
    got = (
        mine.limit,
        mine.count,
        [(ids[o.session_id], o.count) for o in mine.owners],
        [(ids[w.session_id], w.count) for w in mine.waiters],
    )
    want = (
        theirs.limit,
        theirs.count,
        [(o.session_id, o.count) for o in theirs.owners],
        [(w.session_id, w.count) for w in theirs.waiters],
    )
    assert got == want, f"{where}: {name!r} (limit, count, owners, waiters) {got} != {want}"
    if tokens:
        order = sorted(range(len(mine.owners)), key=lambda i: mine.owners[i].token)
        oracle = sorted(range(len(theirs.owners)), key=lambda i: theirs.owners[i].token)
        assert order == oracle, f"{where}: {name!r} owners' tokens in another order"


async def outcome(awaitable: Any) -> Any:
    """What awaiting gives: the result, or the exception (a cancellation included)."""
    try:
        return await awaitable
    except BaseException as error:  # the outcome is what is compared
        return error


def same(got: Any, expected: BaseException | None) -> bool:
    """The same outcome: both nothing, or errors of the same class."""
    if expected is None:
        return got is None
    return type(got) is type(expected)
