"""Partitions: every key belongs to exactly one live member of a group, by rendezvous hashing.

``part = await session.group("workers").partition("worker-1", weight=1)`` joins the
group as a member whose record carries its weight, then follows the group in a
background task: ``part.owns(key)`` and ``part.owners(key, replicas)`` answer at
once from the latest view, and ``part.changes()`` yields each new assignment.

The assignment is weighted rendezvous hashing (:mod:`tenure._core.rendezvous`) over
the group's members that have a weight: a key's owner is the member of the highest
``weight / -ln(u)``, ``u`` a fixed hash of (member id, key). So:

* every member that sees the same members and weights gives every key the same
  owner, without talking to the others;
* a member that joins takes keys only for itself, and one that leaves gives only
  its own keys away (to the next in their ranking); the rest stay where they were;
* a member of weight ``w`` owns about ``w / sum(weights)`` of the keys.

Members that joined with :meth:`Group.join` (no weight) take no keys.

During a rebalance, members learn of the change one by one (each by its own
watch): for a moment, the member a key moves from and the one it moves to may both
believe they own it, or neither may. Work that must not be done twice should be
fenced with the member's fencing token (``part.token``), as a lock's is.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Awaitable, Mapping
from dataclasses import dataclass

from tenure._core.members import Member
from tenure._core.rendezvous import rank
from tenure.client._group_member import (
    GroupMember,
    fail_member,
    let_go,
    member_states,
    renewed,
)
from tenure.client._loss import CancelOnLoss, Guarded
from tenure.errors import (
    InvalidArgumentError,
    LeaseLostError,
    LostError,
    PreconditionFailedError,
    SessionClosedError,
)


def _key(key: object) -> str:
    if not isinstance(key, str):
        raise InvalidArgumentError(f"key must be a string, got {type(key).__name__}")
    return key


def _replicas(replicas: object) -> int:
    if type(replicas) is not int or replicas < 1:
        raise InvalidArgumentError(f"replicas must be an int of 1 or more, got {replicas!r}")
    return replicas


@dataclass(frozen=True, slots=True)
class PartitionView:
    """One assignment of a partition: its members, as member ``me`` saw them.

    ``members``: each partition member's data; ``weights``: each one's weight;
    ``tokens``: each one's fencing token; ``joined`` and ``left``: the members that
    joined and left since the view before (the first view: all joined). Members
    of the group without a weight are not in it.
    """

    me: str
    members: dict[str, bytes]
    weights: dict[str, int | float]
    tokens: dict[str, int]
    joined: set[str]
    left: set[str]

    def owns(self, key: str) -> bool:
        """Whether ``me`` owns ``key`` in this view."""
        return rank(_key(key), self.weights, 1) == [self.me]

    def owners(self, key: str, replicas: int = 1) -> list[str]:
        """``key``'s owner and next ``replicas - 1`` members (distinct; fewer if the
        view has fewer), the owner first."""
        return rank(_key(key), self.weights, _replicas(replicas))


def partition_view(
    me: str, before: Mapping[str, Member], now: Mapping[str, Member]
) -> PartitionView:
    """The view of ``now`` after ``before`` (the partition members of each)."""
    again = renewed(before, now)
    return PartitionView(
        me=me,
        members={i: member.data for i, member in now.items()},
        weights={i: member.weight for i, member in now.items() if member.weight is not None},
        tokens={i: member.token for i, member in now.items()},
        joined=(now.keys() - before.keys()) | again,
        left=(before.keys() - now.keys()) | again,
    )


def _weighted(members: Mapping[str, Member]) -> dict[str, Member]:
    return {i: member for i, member in members.items() if member.weight is not None}


class Partition(Guarded):
    """This member's share of a key space (see the module docstring).

    ``owns(key)``, ``owners(key, replicas)``: from the latest view, at once;
    ``changes()``: the current assignment, then each new one; ``leave()``, or leave
    ``async with`` (whose block is cancelled if the member is lost, raising the loss
    error). ``member`` is the :class:`GroupMember`, ``token`` its fencing token.
    """

    def __init__(
        self, member: GroupMember, states: AsyncGenerator[dict[str, Member], None]
    ) -> None:
        #: The group member this partition's share belongs to.
        self.member = member
        self._signal = member._signal  # (one end: the member's)
        self._scopes: list[CancelOnLoss] = []
        self._states = states
        self._current: dict[str, Member] = {}
        self._previous: dict[str, Member] = {}
        self._weights: dict[str, int | float] = {}  # (of _current, for owns and owners)
        self._changed = asyncio.Event()
        self._follower: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        return f"<Partition {self.id!r} of {self.member.group!r} weight={self.weight}>"

    @property
    def id(self) -> str:
        """This member's id."""
        return self.member.id

    @property
    def weight(self) -> int | float:
        """This member's weight."""
        assert self.member.weight is not None
        return self.member.weight

    @property
    def token(self) -> int:
        """This member's fencing token (fence the work on the keys it owns with it)."""
        return self.member.token

    @property
    def held(self) -> bool:
        """Whether this member is still in the group."""
        return not self._signal.ended

    @property
    def view(self) -> PartitionView:
        """The latest assignment (``joined`` and ``left``: since the one before)."""
        self._check_held()
        return partition_view(self.id, self._previous, self._current)

    def owns(self, key: str) -> bool:
        """Whether this member owns ``key`` in the latest view.

        Raises:
            PreconditionFailedError: it left; LostError: it was lost (its error).
        """
        key = _key(key)
        self._check_held()
        return rank(key, self._weights, 1) == [self.id]

    def owners(self, key: str, replicas: int = 1) -> list[str]:
        """``key``'s owner and next ``replicas - 1`` members in the latest view (the
        owner first; distinct, fewer if there are fewer members)."""
        key, count = _key(key), _replicas(replicas)
        self._check_held()
        return rank(key, self._weights, count)

    async def changes(self) -> AsyncGenerator[PartitionView, None]:
        """Yield the current assignment, then each new one (one per change of the
        partition's members, their weights or their data; coalesced when you are
        busy: always the latest, with ``joined`` and ``left`` since the view you got
        before).

        Ends when the member leaves or its session is closed; raises the loss error
        if it is lost (SessionExpiredError, LeaseLostError...).
        """
        seen: dict[str, Member] = {}
        shown: dict[str, Member] | None = None
        while True:
            if self._signal.ended:
                self._check_lost()
                return
            current = self._current
            if current is not shown:
                view = partition_view(self.id, seen, current)
                seen = shown = current
                yield view
                continue
            self._changed.clear()
            await self._changed.wait()

    async def leave(self) -> None:
        """Leave the group (idempotent); returns once the backend applied it."""
        await self.member.leave()

    # -- following the group ------------------------------------------------------------

    def _keep(self, members: dict[str, Member]) -> None:
        """Make ``members`` (those with a weight) the latest view."""
        self._previous, self._current = self._current, members
        self._weights = {i: m.weight for i, m in members.items() if m.weight is not None}
        self._changed.set()

    async def _first_view(self) -> None:
        async for members in self._states:
            self.member._check_held()  # (lost meanwhile: its group was deleted, say)
            if self._has_me(members):
                self._keep(_weighted(members))
                self._previous = {}
                return
        raise PreconditionFailedError(f"{self.member!r}: the group's watch ended")

    def _has_me(self, members: Mapping[str, Member]) -> bool:
        found = members.get(self.id)
        return found is not None and found.token == self.member.token

    async def _follow(self) -> None:
        """Keep the latest view; a view without this member (a read from before a
        change it made, say) is skipped. A watch that fails other than by a loss,
        or ends, ends the member lost and lets it go: a partition whose view is no
        longer kept must not go on owning keys."""
        try:
            async for members in self._states:
                weighted = _weighted(members)
                if self._has_me(weighted) and weighted != self._current:
                    self._keep(weighted)
            failure: LostError = LeaseLostError(f"{self!r}: the group's watch ended")
        except LostError:
            return  # the member ends with the session (its lease's callback)
        except Exception as error:
            failure = LeaseLostError(f"{self!r}: the group's watch failed: {error!r}")
        finally:
            with contextlib.suppress(Exception):
                await self._states.aclose()
        fail_member(self.member, failure)

    def _ended(self, reason: LostError | None) -> None:
        self._changed.set()
        follower = self._follower
        if follower is not None and not follower.done():
            follower.cancel()

    def _check_held(self) -> None:
        self.member._check_held()

    def _check_lost(self) -> None:
        reason = self._signal.reason
        if reason is not None and not isinstance(reason, SessionClosedError):
            raise reason

    def _check_enter(self) -> None:
        self.member._check_enter()

    def _confirm_held(self) -> None:
        self.member._confirm_held()

    def _end_block(self) -> Awaitable[None] | None:
        return self.member._end_block()


async def start_partition(member: GroupMember) -> Partition:
    """The partition of ``member``'s group, following it; returns once a view has
    ``member`` in it (the group's ``partition``). If that fails, the member leaves."""
    states = member_states(member.session, member.group)
    partition = Partition(member, states)
    try:
        await partition._first_view()
    except BaseException:
        with contextlib.suppress(Exception):
            await states.aclose()
        let_go(member)
        raise
    partition._follower = asyncio.ensure_future(partition._follow())
    member.lost.add_callback(partition._ended)
    return partition
