"""Groups: members with data; everyone sees who joins and who leaves.

The group ``name`` is the persistent semaphore ``name`` whose data is ``group`` and
whose limit is its most members (``max_members``: used by the join that creates it;
later users find the stored limit, as a latch finds its stored count). A member is a
hold of one token whose owner data is a *member record* (:mod:`tenure._core.members`:
``member STATE LEN:ID WEIGHT DATA``), so it lives and dies with its session and has
a fencing token. A join:

1. holds one token at once (``timeout=0``; none free: the group is full,
   LimitExceededError naming ``max_members``), its record saying ``joining``;
2. reads the holds: if one with the same id has a lower token, the id is taken (or
   being taken by an earlier join): it lets go and raises AlreadyExistsError;
3. else restates its record to ``joined`` (same token): it is the member.

Only ``joined`` records are members, each id's of the lowest token
(:func:`~tenure._core.members.members_of`). So of concurrent joins of one id the
earliest grant wins and the others lose, and no loser is ever seen as the member:
a loser never writes ``joined``. Two ``joined`` records of one id cannot coexist:
the later join's read, after its grant, sees the earlier one's hold unless that
hold is gone. A join that loses reports the id taken even if its holder left a
moment after the read.

What a watcher sees: the first view has every member (``joined`` is all of them,
``left`` empty); then one view per change of the members or their data, coalesced
when the watcher is busy (it always gets the latest members, and ``joined`` and
``left`` relative to the view it got before). A member that leaves and an id taken
again by a new join (a new token) between two views is in both ``left`` and
``joined``; a change of data alone is in neither.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from functools import partial

from tenure import lowlevel
from tenure._core.members import (
    DEFAULT_MAX_GROUP_MEMBERS,
    GROUP_DATA,
    Member,
    check_member_id,
    check_weight,
    member_record,
    members_of,
    parse_record,
)
from tenure._core.values import SemaphoreDescription
from tenure.backends._base import CoreSession, CreateWrite, DeleteWrite
from tenure.client import _args
from tenure.client._args import Data
from tenure.client._group_member import GroupMember, GroupView, group_view, member_states
from tenure.client._lease import Lease
from tenure.client._opening import Opening
from tenure.client._partition import Partition, start_partition
from tenure.client._recipe_session import NamedRecipe, RecipeSession
from tenure.errors import (
    AlreadyExistsError,
    LimitExceededError,
    NotFoundError,
    PreconditionFailedError,
)

__all__ = ["DEFAULT_MAX_GROUP_MEMBERS", "Group", "GroupMember", "GroupView"]

#: Seconds a join waits for its turn when its try found others' requests ahead of
#: it in a group that was not full (then LimitExceededError: it filled meanwhile).
CONTENDED_JOIN_WAIT = 10.0

#: How many times a join makes the group again when it was deleted between its
#: check and its hold (after that, NotFoundError).
_REMAKES = 3


class Group(NamedRecipe):
    """The group ``name`` in the session's node (see the module docstring).

    ``me = await group.join("worker-1", data=b"10.0.0.5:8080")`` (or ``async with``),
    ``await group.members()``, ``async for view in group.watch()``, and
    ``await group.partition("worker-1", weight=1)`` for a share of a key space.
    """

    def __init__(self, session: RecipeSession, name: str, max_members: int) -> None:
        super().__init__(session, name)
        #: The most members, if this object's join or :meth:`create` makes the group.
        self.max_members = _args.count(max_members, "max_members")
        self._made = False

    async def create(self, *, exist_ok: bool = False) -> None:
        """Make the group with no members (a join makes it too).

        Raises:
            AlreadyExistsError: it exists, unless ``exist_ok`` (its stored limit stays).
            PreconditionFailedError: ``exist_ok``, and a semaphore of that name is no group.
        """
        exist_ok = _args.flag("exist_ok", exist_ok)
        backend = lowlevel.backend_session(self.session)
        try:
            await backend.write_semaphore(self.name, CreateWrite(self.max_members, GROUP_DATA))
        except AlreadyExistsError:
            if not exist_ok:
                raise
            self._check_group(await self._describe(backend, owners=False))
        self._made = True

    async def delete(self, *, force: bool = False) -> None:
        """Delete the group; with ``force`` even with members (they are lost:
        LeaseLostError).

        Raises:
            NotFoundError: there is no such group.
            PreconditionFailedError: it has members (or joins under way), without
                ``force``; or the semaphore of that name is no group.
        """
        force = _args.flag("force", force)
        backend = lowlevel.backend_session(self.session)
        self._check_group(await self._describe(backend, owners=False))
        await backend.write_semaphore(self.name, DeleteWrite(force))
        self._made = False

    def join(self, member_id: str, data: Data = b"") -> Opening[GroupMember]:
        """Join as ``member_id`` with ``data``; ``await`` it or use ``async with``
        (leaving at the end). Makes the group if missing (with ``max_members``).

        Raises:
            AlreadyExistsError: ``member_id`` is a member already (or being joined).
            LimitExceededError: the group has its most members (``max_members``).
            PreconditionFailedError: the semaphore of that name is no group.
            InvalidArgumentError: at once (before the await), naming a bad argument.
        """
        member_id, owner_data = check_member_id(member_id), _args.as_data(data)
        return Opening(partial(self._join, member_id, owner_data, None))

    def partition(
        self, member_id: str, *, weight: int | float = 1, data: Data = b""
    ) -> Opening[Partition]:
        """Join as ``member_id`` with ``weight`` and take a share of a key space; ``await``
        it or use ``async with`` (leaving at the end). Returns once this member's view
        of the partition is current (see :class:`~tenure.Partition`).

        Raises:
            AlreadyExistsError, LimitExceededError, PreconditionFailedError: as join's.
            InvalidArgumentError: at once (before the await), naming a bad argument
                (``weight``: above 0, at most 1e9).
        """
        member_id, owner_data = check_member_id(member_id), _args.as_data(data)
        weight = check_weight(weight)
        return Opening(partial(self._partition, member_id, owner_data, weight))

    async def _partition(self, member_id: str, data: bytes, weight: int | float) -> Partition:
        member = await self._join(member_id, data, weight)
        return await start_partition(member)

    async def members(self) -> dict[str, bytes]:
        """Each member's id and data, in the order they joined: ``{}`` for a group
        nobody made (as :meth:`watch` shows a missing group: no members), also after a
        join that was refused. Whether the group exists is :meth:`create`'s question
        (AlreadyExistsError), or a describe of the semaphore ``name``.

        Raises:
            PreconditionFailedError: the semaphore of that name is no group.
        """
        backend = lowlevel.backend_session(self.session)
        try:
            found = await self._describe(backend, owners=True)
        except NotFoundError:
            return {}  # nobody made it, or it was deleted: nobody is a member
        self._check_group(found)
        return {i: member.data for i, member in members_of(found.owners).items()}

    async def watch(self) -> AsyncGenerator[GroupView, None]:
        """Yield the members now (all of them ``joined``), then after every change of
        the members or their data (coalesced: see the module docstring). A missing
        group has no members; the iterator ends with the session's loss error."""
        before: dict[str, Member] = {}
        states = member_states(self.session, self.name)
        async with contextlib.aclosing(states):
            async for members in states:
                yield group_view(before, members)
                before = members

    # -- joining ----------------------------------------------------------------------

    async def _join(self, member_id: str, data: bytes, weight: int | float | None) -> GroupMember:
        joining = member_record(member_id, data, weight=weight, state="joining")
        for remake in range(_REMAKES + 1):
            await self._make()
            try:
                lease = await self._hold(joining)
                break
            except TimeoutError:
                raise LimitExceededError(
                    f"group {self.name!r} has its most members (max_members)"
                ) from None
            except NotFoundError:
                self._made = False  # deleted meanwhile: make it again
                if remake == _REMAKES:
                    raise
        try:
            backend = lowlevel.backend_session(self.session)
            holds = (await self._describe(backend, owners=True)).owners
            for hold in holds:
                record = parse_record(hold.data)
                if record is not None and record.id == member_id and hold.token < lease.token:
                    raise AlreadyExistsError(
                        f"{member_id!r} is a member of group {self.name!r} already"
                    )
            joined = member_record(member_id, data, weight=weight, state="joined")
            await lease.restate(data=joined)
        except AlreadyExistsError:
            await lease.release()  # gone before the caller looks again
            raise
        except BaseException:
            lowlevel.start_release(lease)
            raise
        return GroupMember(self.session, self.name, member_id, data, weight, lease)

    async def _hold(self, record: bytes) -> Lease:
        """One token with ``record`` as owner data (TimeoutError: the group is full).

        Tried at once first. A try can also fail with room left while other joins'
        requests are ahead of it in the queue (etcd:// admits requests in queue
        order, so concurrent tries may each see the others'): then, if the group is
        not full, it waits its turn, :data:`CONTENDED_JOIN_WAIT` seconds at most.
        """
        try:
            return await self._acquire(record, 0)
        except TimeoutError:
            found = await self._describe(lowlevel.backend_session(self.session), owners=False)
            if found.count >= found.limit:
                raise
        return await self._acquire(record, CONTENDED_JOIN_WAIT)

    async def _acquire(self, record: bytes, timeout: float) -> Lease:
        """The acquire of :meth:`_hold`, in a task of its own: the session refuses a
        task that asks again for a name it holds (it would wait behind itself), but a
        member's hold is never the wait of its task, and one task may be several
        members. A grant that lands as the caller is cancelled is let go."""
        acquiring = lowlevel.acquire(self.session, Lease, self.name, 1, record, timeout, False)
        task = asyncio.ensure_future(acquiring)
        try:
            return await task
        except asyncio.CancelledError:
            if task.done() and not task.cancelled() and task.exception() is None:
                lowlevel.start_release(task.result())
            raise

    async def _make(self) -> None:
        """Make the group if missing, or check that the semaphore is one (once per
        object, until a join finds it deleted)."""
        if self._made:
            return
        backend = lowlevel.backend_session(self.session)
        try:
            found = await self._describe(backend, owners=False)
        except NotFoundError:
            try:
                await backend.write_semaphore(self.name, CreateWrite(self.max_members, GROUP_DATA))
            except AlreadyExistsError:
                found = await self._describe(backend, owners=False)
            else:
                self._made = True
                return
        self._check_group(found)
        self._made = True

    async def _describe(self, backend: CoreSession, *, owners: bool) -> SemaphoreDescription:
        return await backend.describe_semaphore(self.name, owners=owners, waiters=False)

    def _check_group(self, found: SemaphoreDescription) -> None:
        if found.ephemeral or found.data != GROUP_DATA:
            raise PreconditionFailedError(
                f"semaphore {self.name!r} is not a group (its data is not {GROUP_DATA!r})"
            )
