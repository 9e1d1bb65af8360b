"""tooz's groups over tenure's membership groups (``session.group``).

A tooz group is the tenure group ``tooz/group/<id>`` of the node (docs/recipes.md,
"Groups"): a persistent semaphore whose holds are its members, each with its
capabilities as data (tooz's msgpack). Its member ids are the tooz member ids, so
``tenure group ls NODE tooz/group/<id>`` lists who is in. What tooz asks and
tenure answers:

* ``create_group``: ``group.create()`` (AlreadyExistsError is GroupAlreadyExist);
* ``join_group``: the group must exist (tooz's GroupNotCreated), then
  ``group.join(member_id, capabilities)`` in a session of its own (see
  :mod:`._coordinator`); one member per id, so a second coordinator with the same
  id gets MemberAlreadyExist;
* ``leave_group``: closing that session; a member another coordinator with this id
  holds (a previous incarnation) is ended by ending its membership's session
  (``client.kill_session``);
* ``get_members`` and the capabilities: ``group.members()``;
  ``update_capabilities``: ``member.update(data)``;
* ``delete_group``: ``group.delete()`` (members left: GroupNotEmpty).

Each function runs on the shared client's loop, for one :class:`~._coordinator.Coordinator`.
"""

from __future__ import annotations

import contextlib
import datetime
from typing import Any

from tooz import coordination

import tenure
from tenure.errors import AlreadyExistsError, NotFoundError, PreconditionFailedError

from ._coordinator import Coordinator, Membership
from ._settings import (
    GROUPS,
    decode_capabilities,
    encode_capabilities,
    id_of,
    name_of,
)

__all__ = [
    "create_group",
    "delete_group",
    "get_groups",
    "group_name",
    "join_group",
    "leave_group",
    "member_info",
    "members",
    "update_capabilities",
]


def group_name(group_id: bytes) -> str:
    """The tenure group of the tooz group ``group_id``."""
    return GROUPS + name_of(group_id)


async def create_group(coordinator: Coordinator, group_id: bytes) -> None:
    """Make the group, empty (GroupAlreadyExist if it exists)."""
    main = await coordinator.main()
    group = main.group(group_name(group_id), max_members=coordinator.settings.max_members)
    try:
        await group.create()
    except AlreadyExistsError:
        raise coordination.GroupAlreadyExist(group_id) from None


async def get_groups(coordinator: Coordinator) -> list[bytes]:
    """Every group's id."""
    found = await coordinator.client.list_semaphores(coordinator.node, prefix=GROUPS)
    return [id_of(summary.name[len(GROUPS) :]) for summary in found if not summary.ephemeral]


async def delete_group(coordinator: Coordinator, group_id: bytes) -> None:
    """Delete the group (GroupNotCreated if missing, GroupNotEmpty with members)."""
    main = await coordinator.main()
    name = group_name(group_id)
    try:
        await main.group(name).delete()
    except NotFoundError:
        raise coordination.GroupNotCreated(group_id) from None
    except PreconditionFailedError:
        found = await main.semaphore(name).describe()
        if found.count > 0:  # members, or joins under way
            raise coordination.GroupNotEmpty(group_id) from None
        raise


async def join_group(coordinator: Coordinator, group_id: bytes, capabilities: Any) -> None:
    """Join as the coordinator's member id with ``capabilities``."""
    name = group_name(group_id)
    if await coordinator.membership(name) is not None:
        raise coordination.MemberAlreadyExist(group_id, coordinator.member_id)
    data = encode_capabilities(capabilities)
    await members(coordinator, group_id)  # GroupNotCreated: tooz's join never makes it
    session = await coordinator.session(f"member of {name}")
    # (A group deleted between that check and this join is made again by the join.)
    group = session.group(name, max_members=coordinator.settings.max_members)
    try:
        member = await group.join(coordinator.member, data=data)
    except AlreadyExistsError:
        await session.close()
        raise coordination.MemberAlreadyExist(group_id, coordinator.member_id) from None
    except BaseException:
        await session.close()
        raise
    coordinator.memberships[name] = Membership(session, member)


async def leave_group(coordinator: Coordinator, group_id: bytes) -> None:
    """Leave the group: this coordinator's membership, or the one another coordinator
    with the same member id holds."""
    name = group_name(group_id)
    membership = await coordinator.membership(name)
    if membership is not None:
        del coordinator.memberships[name]
        await membership.session.close()
        return
    if coordinator.member not in await members(coordinator, group_id):
        raise coordination.MemberNotJoined(group_id, coordinator.member_id)
    hold = await _hold_of(await coordinator.main(), name, coordinator.member)
    if hold is None:  # it left meanwhile
        raise coordination.MemberNotJoined(group_id, coordinator.member_id)
    with contextlib.suppress(NotFoundError):  # its session ended meanwhile: out either way
        await coordinator.client.kill_session(coordinator.node, hold.session_id)


async def members(coordinator: Coordinator, group_id: bytes) -> dict[str, bytes]:
    """Each member's id (tenure text) and data (GroupNotCreated if the group is missing).

    A tenure group nobody made has no members (``{}``), where tooz's contract tells a
    missing group apart: an empty answer is checked with a describe of the group's
    semaphore (a round trip only then)."""
    main = await coordinator.main()
    name = group_name(group_id)
    found = await main.group(name).members()
    if not found:
        try:
            await main.semaphore(name).describe()
        except NotFoundError:
            raise coordination.GroupNotCreated(group_id) from None
    return found


async def update_capabilities(coordinator: Coordinator, group_id: bytes, capabilities: Any) -> None:
    """Replace this member's capabilities (every watcher sees them)."""
    data = encode_capabilities(capabilities)
    membership = await coordinator.membership(group_name(group_id))
    if membership is None:
        await members(coordinator, group_id)  # GroupNotCreated first
        raise coordination.MemberNotJoined(group_id, coordinator.member_id)
    await membership.member.update(data)


async def member_info(
    coordinator: Coordinator, group_id: bytes, member_id: bytes
) -> dict[str, Any]:
    """A member's ``capabilities``, ``created_at`` (when it joined, as a datetime in
    UTC; None where the store cannot know) and fencing ``token``."""
    member = name_of(member_id)
    found = await members(coordinator, group_id)
    if member not in found:
        raise coordination.MemberNotJoined(group_id, member_id)
    hold = await _hold_of(await coordinator.main(), group_name(group_id), member)
    if hold is None:  # it left meanwhile
        raise coordination.MemberNotJoined(group_id, member_id)
    joined = (
        None if hold.since is None else datetime.datetime.fromtimestamp(hold.since, tz=datetime.UTC)
    )
    return {
        "capabilities": decode_capabilities(found[member]),
        "created_at": joined,
        "token": hold.token,
    }


async def _hold_of(session: tenure.Session, name: str, member: str) -> tenure.OwnerInfo | None:
    """The hold that is ``member`` of group ``name`` (its session, token, grant time), or
    None: the member's token from a view of the group, then the owner of that token."""
    views = session.group(name).watch()
    try:
        view = await anext(views)
    finally:
        await views.aclose()
    token = view.tokens.get(member)
    if token is None:
        return None
    found = await session.semaphore(name).describe(owners=True)
    return next((owner for owner in found.owners if owner.token == token), None)
