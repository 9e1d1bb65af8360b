"""The sync groups and partitions: ``session.group("workers").join("worker-1")``."""

from __future__ import annotations

from tenure import client as aio
from tenure.client import GroupView, PartitionView
from tenure.client._args import Data
from tenure.errors import PreconditionFailedError
from tenure.sync._calls import now, opened
from tenure.sync._held import Held, end_block
from tenure.sync._leases import LeaseSession
from tenure.sync._recipe import SyncRecipe
from tenure.sync._stream import Stream, same


class GroupMember(Held):
    """A member of a group (see :class:`tenure.GroupMember`); ``with`` leaves at the end.

    ``lost`` is set when it ends: it left, or it was lost with its session (then
    ``lost_reason`` is the loss error, raised on leaving ``with``).
    """

    def __init__(self, session: LeaseSession, member: aio.GroupMember) -> None:
        super().__init__(session.portal, member.lost)
        self._member = member
        #: The session it is a member in (a :class:`tenure.sync.Session`).
        self.session = session
        self.group = member.group
        self.id = member.id
        self.weight = member.weight
        self.token = member.token

    def __repr__(self) -> str:
        return f"<sync {self._member!r}>"

    @property
    def data(self) -> bytes:
        """This member's data."""
        return self._member.data

    @property
    def held(self) -> bool:
        """Whether it is still a member."""
        return not self.ended

    def update(self, data: Data) -> None:
        """Replace this member's data in place (same token); every watcher sees it."""
        self._portal.call(self._member.update, data)

    def leave(self) -> None:
        """Leave the group (idempotent); returns once the backend applied it, or the
        session was given up (see :meth:`tenure.GroupMember.leave`). After leaving
        ``with``, whose leave is under way, it waits for that leave."""
        if self.ended and self._portal.closed:
            return  # the client closed: every leave ended with it
        self._portal.call(self._member.leave)

    def _check_enter(self) -> None:
        if self.ended and self.lost_reason is None:
            raise PreconditionFailedError(f"{self!r} left the group; join it again")

    def _finish(self) -> None:
        if not self.ended:
            self._portal.call(end_block, self._member)


class Partition(Held):
    """This member's share of a key space (see :class:`tenure.Partition`); ``with``
    leaves at the end.

    ``owns(key)`` and ``owners(key, replicas)`` answer from the latest view without
    a round trip; ``changes()`` blocks for each new assignment.
    """

    def __init__(self, session: LeaseSession, partition: aio.Partition) -> None:
        super().__init__(session.portal, partition.lost)
        self._partition = partition
        #: The group member this partition's share belongs to.
        self.member = GroupMember(session, partition.member)

    def __repr__(self) -> str:
        return f"<sync {self._partition!r}>"

    @property
    def id(self) -> str:
        """This member's id."""
        return self._partition.id

    @property
    def weight(self) -> int | float:
        """This member's weight."""
        return self._partition.weight

    @property
    def token(self) -> int:
        """This member's fencing token (fence the work on the keys it owns with it)."""
        return self._partition.token

    @property
    def held(self) -> bool:
        """Whether this member is still in the group."""
        return not self.ended

    @property
    def view(self) -> PartitionView:
        """The latest assignment."""
        return self._portal.call(now, lambda: self._partition.view)

    def owns(self, key: str) -> bool:
        """Whether this member owns ``key`` in the latest view."""
        return self._portal.call(now, lambda: self._partition.owns(key))

    def owners(self, key: str, replicas: int = 1) -> list[str]:
        """``key``'s owner and next ``replicas - 1`` members (the owner first)."""
        return self._portal.call(now, lambda: self._partition.owners(key, replicas))

    def changes(self) -> Stream[PartitionView]:
        """The current assignment, then each new one (see :meth:`tenure.Partition.changes`)."""
        return Stream(self._portal, self._partition.changes(), same)

    def leave(self) -> None:
        """Leave the group (idempotent); returns once the backend applied it, or the
        session was given up (see :meth:`tenure.GroupMember.leave`)."""
        self.member.leave()

    def _check_enter(self) -> None:
        if self.ended and self.lost_reason is None:
            raise PreconditionFailedError(f"{self!r} left the group; join it again")

    def _finish(self) -> None:
        self.member._finish()


class Group(SyncRecipe[LeaseSession, aio.Group]):
    """The group ``name`` (see :class:`tenure.Group`): members with data, and partitions."""

    def __init__(self, session: LeaseSession, group: aio.Group) -> None:
        super().__init__(session, group)
        self.max_members = group.max_members

    def create(self, *, exist_ok: bool = False) -> None:
        """Make the group with no members (see :meth:`tenure.Group.create`)."""
        self.session.portal.call(self._recipe.create, exist_ok=exist_ok)

    def delete(self, *, force: bool = False) -> None:
        """Delete the group; with ``force`` even with members (they are lost)."""
        self.session.portal.call(self._recipe.delete, force=force)

    def join(self, member_id: str, data: Data = b"") -> GroupMember:
        """Join as ``member_id`` with ``data``; plain, or ``with`` (leaves at the end).

        Raises:
            AlreadyExistsError: the id is a member already.
            LimitExceededError: the group has its most members (``max_members``).
        """
        return self.session.portal.call(
            opened, lambda: self._recipe.join(member_id, data), self._member
        )

    def partition(self, member_id: str, *, weight: int | float = 1, data: Data = b"") -> Partition:
        """Join as ``member_id`` with ``weight`` and take a share of a key space; plain,
        or ``with`` (leaves at the end). See :meth:`tenure.Group.partition`."""
        return self.session.portal.call(
            opened,
            lambda: self._recipe.partition(member_id, weight=weight, data=data),
            self._partitioned,
        )

    def members(self) -> dict[str, bytes]:
        """Each member's id and data, in the order they joined: ``{}`` for a group nobody
        made, also after a refused join (see :meth:`tenure.Group.members`).

        Raises:
            PreconditionFailedError: the semaphore of that name is no group.
        """
        return self.session.portal.call(self._recipe.members)

    def watch(self) -> Stream[GroupView]:
        """The members now, then after every change (see :meth:`tenure.Group.watch`)."""
        return Stream(self.session.portal, self._recipe.watch(), same)

    def _member(self, member: aio.GroupMember) -> GroupMember:
        return GroupMember(self.session, member)

    def _partitioned(self, partition: aio.Partition) -> Partition:
        return Partition(self.session, partition)
