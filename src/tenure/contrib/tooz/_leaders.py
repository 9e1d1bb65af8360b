"""tooz's group leaders over tenure's elections (``session.election``).

The leader of tooz group ``<id>`` is whoever holds the election
``tooz/leader/<id>`` of the node (docs/recipes.md: one hold of every token of an
ephemeral semaphore), with its member id as the leadership's data; it is held by
the coordinator's main session, so it ends with the coordinator (stopped, or not
heartbeating for ``timeout``). As tooz's other drivers do, a coordinator that
watches ``watch_elected_as_leader`` runs for leadership at each ``run_watchers``
(``run_elect_coordinator``): a campaign that only tries, so the hooks run in the
caller's ``run_watchers``, once per term. ``stand_down_group_leader`` resigns;
``get_leader`` reads ``election.leader()``. Each leadership has a fencing token
(:func:`leadership_token`), greater than every earlier term's.
"""

from __future__ import annotations

import tenure

from ._coordinator import Coordinator, own_caller
from ._settings import LEADERS, name_of

__all__ = ["election_name", "leader_of", "leadership_token", "stand_down", "try_lead"]


def election_name(group_id: bytes) -> str:
    """The tenure election of the tooz group ``group_id``."""
    return LEADERS + name_of(group_id)


async def try_lead(coordinator: Coordinator, group_id: bytes) -> bool:
    """Become the group's leader if nobody is: whether this made it leader (False if
    it leads already, or another does)."""
    name = election_name(group_id)
    if coordinator.leadership(name) is not None:
        return False
    election = (await coordinator.main()).election(name)

    async def campaign() -> tenure.Leadership | None:
        try:
            return await election.campaign(coordinator.member_id, timeout=0)
        except TimeoutError:
            return None

    leadership = await own_caller(campaign)
    if leadership is None:
        return False
    coordinator.leaderships[name] = leadership
    return True


async def stand_down(coordinator: Coordinator, group_id: bytes) -> bool:
    """Resign the group's leadership: whether this coordinator led it."""
    leadership = coordinator.leadership(election_name(group_id))
    if leadership is None:
        return False
    del coordinator.leaderships[election_name(group_id)]
    await leadership.resign()
    return True


async def leader_of(coordinator: Coordinator, group_id: bytes) -> bytes | None:
    """The member id of the group's leader, or None."""
    state = await (await coordinator.main()).election(election_name(group_id)).leader()
    return None if state is None else state.data


async def leadership_token(coordinator: Coordinator, group_id: bytes) -> int | None:
    """The fencing token of this coordinator's leadership of the group, or None."""
    leadership = coordinator.leadership(election_name(group_id))
    return None if leadership is None else leadership.token
