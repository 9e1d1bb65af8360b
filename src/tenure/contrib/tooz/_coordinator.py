"""What one tooz coordinator holds in tenure: its sessions, memberships and leaderships.

A coordinator (one ``get_coordinator(url, member_id)``, started) has a *main*
session, which holds its locks and its leaderships, and one session per group it
joined, which holds that membership alone. Every one of them is opened with the
URL's ``timeout`` as both its ttl and its recovery window
(``client.session(node, ttl=, recovery_window=)``): tooz's ``heartbeat()`` renews
them all (:meth:`Coordinator.renew`), and a coordinator that stops beating for
``timeout`` seconds loses its memberships, leaderships and locks, as tooz's Redis
and memcached members time out; a process that dies loses them ``timeout``
seconds after its connection dropped (sooner if it stopped cleanly).

Why a session per membership: tooz lets any coordinator with the same member id
leave a group for it (a restarted service "boots out" its previous incarnation).
In tenure a member is a hold of its own session, so another session can end it
only by ending that session (``client.kill_session``): with the membership alone
in it, nothing else the old coordinator holds is touched.

Every method here runs on the shared client's event loop (the driver calls them through
its portal), so the coordinator's state has one thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import tenure
from tenure.errors import LostError, PermissionDeniedError, TenureError

from ._settings import ToozSettings, name_of

__all__ = ["Coordinator", "Membership", "own_caller"]

L = TypeVar("L", bound=tenure.Lease)

log = logging.getLogger("tenure.contrib.tooz")


@dataclass(frozen=True, slots=True)
class Membership:
    """One group joined: the session that holds the membership, and the member."""

    session: tenure.Session
    member: tenure.GroupMember

    @property
    def live(self) -> bool:
        """Whether the member is still in the group (its session may have ended)."""
        return self.member.held and not self.session.closed


class Coordinator:
    """One tooz coordinator's sessions, memberships and leaderships (module docstring)."""

    def __init__(self, client: tenure.Client, settings: ToozSettings, member_id: bytes) -> None:
        self.client = client
        self.settings = settings
        self.node = settings.node
        self.member_id = member_id
        #: The member id as tenure text (a group member's id, a leader's data).
        self.member = name_of(member_id)
        self._main: tenure.Session | None = None
        self._opening = asyncio.Lock()
        #: Groups joined, by tenure group name.
        self.memberships: dict[str, Membership] = {}
        #: Elections led, by tenure election name.
        self.leaderships: dict[str, tenure.Leadership] = {}

    async def open(self) -> None:
        """Make the node if it is missing, and open the main session."""
        # A token that may not make nodes: the node must exist (the session says).
        with contextlib.suppress(PermissionDeniedError):
            await self.client.create_node(self.node, exist_ok=True)
        await self.main()

    async def session(self, purpose: str) -> tenure.Session:
        """A new session of this coordinator, renewed by its heartbeats."""
        return await self.client.session(
            self.node,
            recovery_window=self.settings.timeout,
            ttl=self.settings.timeout,
            # (ASCII: ids are percent-encoded; 1024 bytes is a description's most.)
            description=f"tooz {self.member}: {purpose}"[:1024],
        )

    async def main(self) -> tenure.Session:
        """The main session (locks, leaderships); a new one if it was lost (what it
        held went with it)."""
        main = self._main
        if main is not None and not main.closed:
            return main
        async with self._opening:  # one new session, however many callers found it gone
            main = self._main
            if main is None or main.closed:
                if main is not None:
                    log.warning(
                        "tooz member %s: session %d ended (%s); opening another",
                        self.member,
                        main.id,
                        main.lost_reason,
                    )
                main = self._main = await self.session("locks and leadership")
            return main

    async def renew(self) -> None:
        """The heartbeat: renew every session; forget the memberships that ended."""
        await (await self.main()).renew()
        for name, membership in list(self.memberships.items()):
            try:
                await membership.session.renew()
                if membership.live:
                    continue
            except LostError:
                pass
            log.warning(
                "tooz member %s: its membership of %s ended (%s)",
                self.member,
                name,
                membership.session.lost_reason or membership.member.lost_reason,
            )
            await self._forget(name, membership)

    async def membership(self, group: str) -> Membership | None:
        """The live membership of ``group`` (a lost one is forgotten)."""
        membership = self.memberships.get(group)
        if membership is not None and not membership.live:
            await self._forget(group, membership)
            return None
        return membership

    async def _forget(self, group: str, membership: Membership) -> None:
        """Drop a membership that ended, and its session (which may live on: a group
        deleted by force ends its members, not their sessions)."""
        if self.memberships.get(group) is membership:  # (not left and joined again since)
            del self.memberships[group]
        try:
            await membership.session.close()
        except TenureError as error:
            log.warning("tooz member %s: closing its session of %s: %s", self.member, group, error)

    def leadership(self, election: str) -> tenure.Leadership | None:
        """The live leadership of ``election`` (a lost one is forgotten)."""
        leadership = self.leaderships.get(election)
        if leadership is not None and not leadership.held:
            del self.leaderships[election]
            return None
        return leadership

    async def close(self) -> None:
        """Close every session: memberships, leaderships and locks are released."""
        sessions = [m.session for m in self.memberships.values()]
        if self._main is not None:
            sessions.append(self._main)
        self.memberships.clear()
        self.leaderships.clear()
        self._main = None
        for session in sessions:
            try:
                await session.close()
            except TenureError as error:  # unreachable: the server ends it by its window
                log.warning(
                    "tooz member %s: closing session %d: %s", self.member, session.id, error
                )


async def own_caller(make: Callable[[], Awaitable[L | None]]) -> L | None:
    """``await make()`` in a task of its own, a caller of its own to the session.

    A tenure session refuses a caller (a task; in a portal call, the calling thread)
    that asks for a name it holds, since it would wait behind itself. tooz's locks
    are not tied to threads: one thread may hold a lock through one object and try
    it through another (told False), or take a shared lock twice. So each acquire
    asks as a new task. A grant that lands as the caller is cancelled is released.
    """
    task = asyncio.ensure_future(make())
    try:
        return await task
    except asyncio.CancelledError:
        if task.done() and not task.cancelled() and task.exception() is None:
            granted = task.result()
            if granted is not None:
                releasing = asyncio.ensure_future(granted.release())
                _releasing.add(releasing)  # (a task nobody refers to may be collected)
                releasing.add_done_callback(_releasing.discard)
        raise


_releasing: set[asyncio.Future[None]] = set()
