"""A group's members as a client sees them: a member it is, and views of who is in.

:class:`GroupMember` is one hold of a group (``tenure.client._group``) that this
session took; :class:`GroupView` the members at one moment with what changed since
the view before; :func:`member_states` follows a group's members through a watch
of its semaphore. Partitions (``_partition``) are made of the same parts.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Awaitable, Mapping
from dataclasses import dataclass

from tenure._core.members import Member, member_record, members_of
from tenure.client import _args
from tenure.client._args import Data
from tenure.client._lease import Lease, start_release
from tenure.client._loss import CancelOnLoss, EndSignal, Guarded
from tenure.client._recipe_session import RecipeSession
from tenure.client._semaphore import watch_semaphore
from tenure.errors import LostError, PreconditionFailedError


@dataclass(frozen=True, slots=True)
class GroupView:
    """A group's members at one moment, and what changed since the view before.

    ``members``: each member's id and data, in the order they joined; ``tokens``:
    each member's fencing token; ``joined`` and ``left``: the ids that joined and
    left since the view before (the first view: every member joined, none left; an
    id that left and was taken again by a new join is in both; a change of data
    alone is in neither).
    """

    members: dict[str, bytes]
    joined: set[str]
    left: set[str]
    tokens: dict[str, int]


def renewed(before: Mapping[str, Member], now: Mapping[str, Member]) -> set[str]:
    """Ids in both whose holds differ (left, and taken again by a new join)."""
    return {i for i in now.keys() & before.keys() if now[i].token != before[i].token}


def group_view(before: Mapping[str, Member], now: Mapping[str, Member]) -> GroupView:
    """The view of ``now`` after ``before`` (both from :func:`members_of`)."""
    again = renewed(before, now)
    return GroupView(
        members={i: member.data for i, member in now.items()},
        joined=(now.keys() - before.keys()) | again,
        left=(before.keys() - now.keys()) | again,
        tokens={i: member.token for i, member in now.items()},
    )


async def member_states(
    session: RecipeSession, name: str
) -> AsyncGenerator[dict[str, Member], None]:
    """The members of group ``name`` now, then after each change of them or their
    data (a missing group has none); ends with the session's loss error."""
    last: dict[str, Member] | None = None
    states = watch_semaphore(session, name, data=False, owners=True, waiters=False)
    async with contextlib.aclosing(states):
        async for state in states:
            current = members_of(state.owners) if state.exists else {}
            if current != last:
                last = current
                yield current


class GroupMember(Guarded):
    """A member of a group: its ``id``, ``data``, ``weight`` (None unless it joined
    through ``Group.partition``) and the fencing ``token`` of its hold; ``group`` is
    the group's name.

    It ends when it leaves (:meth:`leave`, or leaving ``async with``) and with its
    session's end or loss; in ``async with`` a loss cancels the block, raising the
    loss error, as a lease's does.
    """

    def __init__(
        self,
        session: RecipeSession,
        group: str,
        member_id: str,
        data: bytes,
        weight: int | float | None,
        lease: Lease,
    ) -> None:
        #: The session it is a member in (a :class:`~tenure.client.Session`).
        self.session = session
        self.group = group
        self.id = member_id
        self.data = data
        self.weight = weight
        self.token = lease.token
        self._lease = lease
        self._signal = EndSignal()
        self._scopes: list[CancelOnLoss] = []
        lease.lost.add_callback(self._signal.end)

    def __repr__(self) -> str:
        state = "held" if not self._signal.ended else f"ended({self._signal.reason!r})"
        return f"<GroupMember {self.id!r} of {self.group!r} token={self.token} {state}>"

    @property
    def held(self) -> bool:
        """Whether it is still a member."""
        return not self._signal.ended

    async def update(self, data: Data) -> None:
        """Replace this member's data in place (same token); every watcher sees it.

        Raises:
            PreconditionFailedError: it left.
            LostError: it was lost (its error).
        """
        data = _args.as_data(data)
        self._check_held()
        record = member_record(self.id, data, weight=self.weight, state="joined")
        await self._lease.restate(data=record)
        self.data = data

    async def leave(self) -> None:
        """Leave the group (idempotent; nothing to do once lost); returns once the
        backend applied it: from then on no view has this member. It also returns if
        the session was given up meanwhile (``session.lost_reason`` is set): the
        member then ends when the server ends the session, later ("Releasing" in
        docs/concepts.md)."""
        await self._lease.release()

    def _check_held(self) -> None:
        """Raise the loss error if it was lost, PreconditionFailedError if it left."""
        self.check()
        if self._signal.ended:
            raise PreconditionFailedError(f"{self!r} left the group; join it again")

    def _check_enter(self) -> None:
        if self._signal.ended and self._signal.reason is None:
            raise PreconditionFailedError(f"{self!r} left the group; join it again")

    def _confirm_held(self) -> None:
        self._lease._confirm_held()

    def _end_block(self) -> Awaitable[None] | None:
        return self._lease._end_block()


def fail_member(member: GroupMember, error: LostError) -> None:
    """End ``member`` lost with ``error`` and let go of its hold (a partition whose view
    can no longer be kept must not go on owning keys)."""
    member._signal.end(error)
    start_release(member._lease)


def let_go(member: GroupMember) -> None:
    """Start ``member``'s leaving without waiting for the backend's answer (a partition
    that could not start lets its member go, from a failure path that cannot wait)."""
    start_release(member._lease)
