"""The tooz driver: ``tooz.coordination.get_coordinator("tenure://...", member_id)``.

Registered under tooz's ``tooz.backends`` entry points as ``tenure`` and
``tenures`` (pyproject.toml). Each tooz call is made at once, in the calling
thread, on the process's shared client of the URL (:func:`tenure.sync.shared_client`:
one connection for every coordinator of the process, :mod:`._results` says why); its
result is ready when
the call returns (``get()`` gives it, or raises its error), so calls take effect in
the order they are made, as with tooz's drivers that run one call at a time.
The work is in :mod:`._groups`, :mod:`._leaders` and :mod:`._lock`, over one
:class:`~._coordinator.Coordinator` (its sessions) per started driver.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import tooz
from tooz import coordination, utils

import tenure.sync

from . import _groups, _leaders
from ._coordinator import Coordinator
from ._lock import TenureLock
from ._results import Result, translated
from ._settings import ToozSettings, as_id, decode_capabilities, id_of, name_of

__all__ = ["TenureDriver"]

T = TypeVar("T")


class TenureDriver(coordination.CoordinationDriverCachedRunWatchers):
    """tooz over a tenure server or cluster (docs/integrations.md, "tooz").

    URL: ``tenure://host:port[,host:port...][?node=NODE&timeout=SECONDS&max_members=N
    &token=...]`` (``tenures://`` for TLS). Members live by ``heartbeat()`` (start
    with ``start(start_heart=True)``, or call it yourself well within ``timeout``);
    groups, leaders, locks (exclusive and shared, with fencing tokens) and tooz's
    partitioner are all there.
    """

    CHARACTERISTICS = (
        coordination.Characteristics.DISTRIBUTED_ACROSS_THREADS,
        coordination.Characteristics.DISTRIBUTED_ACROSS_PROCESSES,
        coordination.Characteristics.DISTRIBUTED_ACROSS_HOSTS,
        # One engine orders every change (a cluster's leader serves them all, each
        # acknowledged once in etcd): docs/guarantees.md, docs/cluster.md.
        coordination.Characteristics.LINEARIZABLE,
        coordination.Characteristics.SERIALIZABLE,
    )

    def __init__(self, member_id: bytes, parsed_url: Any, options: dict[str, Any]) -> None:
        # Member ids come back from the server as bytes: compare like with like.
        super().__init__(as_id(member_id), parsed_url, options)
        #: What the URL says (node, timeout, max_members, the tenure:// URL).
        self.settings = ToozSettings.of(parsed_url, utils.collapse(options))
        #: The loop the coordinator runs on: its shared client's portal when it started.
        self._portal: tenure.sync.Portal | None = None
        self._state: Coordinator | None = None

    # -- life -------------------------------------------------------------------------

    def _start(self) -> None:
        with translated():
            client = tenure.sync.shared_client(self.settings.url, client_name="tooz")
            portal, aio = client.portal, client.async_client
        state = Coordinator(aio, self.settings, self._member_id)
        _on(portal, state.open)
        self._portal, self._state = portal, state

    def stop(self) -> None:
        """Leave every group, resign, release every lock: close the sessions."""
        # Leaving is closing: _stop closes each membership's session. tooz's stop would
        # call leave_group for each group joined, which, for a membership lost
        # meanwhile (a missed heartbeat), ends the member of that id another
        # coordinator holds now (leave_group's boot-out).
        self._joined_groups = set()
        super().stop()

    def _stop(self) -> None:
        portal, state = self._portal, self._state
        self._portal = self._state = None
        if portal is None or state is None or portal.forked:
            return  # (a parent's coordinator, in a child made by fork: the parent's)
        _on(portal, state.close)

    def heartbeat(self) -> float:
        """Renew every session of this member; the seconds before the next is due
        (tooz's heart thread beats twice as often)."""
        self._call(Coordinator.renew)
        return self.settings.timeout

    # -- the loop ---------------------------------------------------------------------

    @property
    def coordinator(self) -> Coordinator:
        """The member's sessions, memberships and leaderships (use them on the loop)."""
        if self._state is None:
            raise tooz.ToozError("the tenure coordinator is not started")
        return self._state

    def run(self, fn: Callable[..., Coroutine[Any, Any, T]], /, *args: Any) -> T:
        """``await fn(*args)`` on the shared client's loop, tenure's errors as tooz's."""
        return _on(self._here(), fn, *args)

    def _call(self, fn: Callable[..., Coroutine[Any, Any, T]], /, *args: Any) -> T:
        """``await fn(coordinator, *args)`` on the loop."""
        portal = self._here()
        return _on(portal, fn, self.coordinator, *args)

    def _here(self) -> tenure.sync.Portal:
        """The loop, of this process: in a child made by fork, the shared client's new
        one, with a new main session (the parent's memberships, leaderships and locks
        stay the parent's)."""
        portal = self._portal
        if portal is None or self._state is None:
            raise tooz.ToozError("the tenure coordinator is not started")
        if portal.forked:
            self._portal = self._state = None
            self._joined_groups = set()
            self._start()
            assert self._portal is not None
            portal = self._portal
        return portal

    # -- groups -----------------------------------------------------------------------

    def create_group(self, group_id: bytes) -> Result[None]:
        """Make the group (GroupAlreadyExist if it exists)."""
        return Result.of(lambda: self._call(_groups.create_group, group_id))

    def get_groups(self) -> Result[list[bytes]]:
        """Every group's id."""
        return Result.of(lambda: self._call(_groups.get_groups))

    def delete_group(self, group_id: bytes) -> Result[None]:
        """Delete the group (GroupNotCreated, GroupNotEmpty)."""
        return Result.of(lambda: self._call(_groups.delete_group, group_id))

    def join_group(
        self, group_id: bytes, capabilities: coordination.Capabilities | None = None
    ) -> Result[None]:
        """Join the group with ``capabilities`` (GroupNotCreated, MemberAlreadyExist)."""

        def join() -> None:
            self._call(_groups.join_group, group_id, capabilities)
            self._joined_groups.add(group_id)

        return Result.of(join)

    def leave_group(self, group_id: bytes) -> Result[None]:
        """Leave the group (GroupNotCreated, MemberNotJoined)."""

        def leave() -> None:
            self._call(_groups.leave_group, group_id)
            self._joined_groups.discard(group_id)

        return Result.of(leave)

    def get_members(self, group_id: bytes) -> Result[set[bytes]]:
        """The group's member ids (GroupNotCreated)."""

        def member_ids() -> set[bytes]:
            return {id_of(member) for member in self._call(_groups.members, group_id)}

        return Result.of(member_ids)

    def get_member_capabilities(
        self, group_id: bytes, member_id: bytes
    ) -> Result[coordination.Capabilities | None]:
        """A member's capabilities (GroupNotCreated, MemberNotJoined)."""

        def capabilities() -> Any:
            found = self._call(_groups.members, group_id)
            member = name_of(member_id)
            if member not in found:
                raise coordination.MemberNotJoined(group_id, member_id)
            return decode_capabilities(found[member])

        return Result.of(capabilities)

    def get_members_with_capabilities(
        self, group_id: bytes
    ) -> Result[dict[bytes, coordination.Capabilities | None]]:
        """Every member's capabilities, in one read (GroupNotCreated)."""

        def everyone() -> dict[bytes, Any]:
            found = self._call(_groups.members, group_id)
            return {id_of(member): decode_capabilities(data) for member, data in found.items()}

        return Result.of(everyone)

    def get_member_info(self, group_id: bytes, member_id: bytes) -> Result[dict[str, Any]]:
        """A member's ``capabilities``, ``created_at`` (when it joined: a UTC datetime)
        and fencing ``token`` (GroupNotCreated, MemberNotJoined)."""
        return Result.of(lambda: self._call(_groups.member_info, group_id, member_id))

    def update_capabilities(
        self, group_id: bytes, capabilities: coordination.Capabilities
    ) -> Result[None]:
        """Replace this member's capabilities (GroupNotCreated, MemberNotJoined)."""
        return Result.of(lambda: self._call(_groups.update_capabilities, group_id, capabilities))

    # -- leaders ----------------------------------------------------------------------

    def run_watchers(self, timeout: float | None = None) -> list[Any]:
        """Run the join and leave hooks of what changed since the last run, then the
        leader election of every group watched with ``watch_elected_as_leader``."""
        result = super().run_watchers(timeout=timeout)
        self.run_elect_coordinator()
        return result

    def run_elect_coordinator(self) -> None:
        """Try to lead each group watched for leadership; run its hooks on election."""
        for group_id, hooks in list(self._hooks_elected_leader.items()):
            if self._call(_leaders.try_lead, group_id):
                hooks.run(coordination.LeaderElected(group_id, self._member_id))

    def stand_down_group_leader(self, group_id: bytes) -> bool:
        """Resign the group's leadership; whether this member led it."""
        return self._call(_leaders.stand_down, group_id)

    def get_leader(self, group_id: bytes) -> Result[bytes | None]:  # type: ignore[override]
        """The group's leader's member id (None if nobody leads: tooz's drivers say so,
        though its annotation says bytes)."""
        return Result.of(lambda: self._call(_leaders.leader_of, group_id))

    def leadership_token(self, group_id: bytes) -> int | None:
        """The fencing token of this member's leadership of the group (None if it does
        not lead it): greater than every earlier leader's. Not part of tooz's API."""
        return self._call(_leaders.leadership_token, group_id)

    # -- locks ------------------------------------------------------------------------

    def get_lock(self, name: bytes) -> TenureLock:
        """The lock ``name`` (exclusive, or shared with ``acquire(shared=True)``; its
        fencing token is the lock's ``token``)."""
        return TenureLock(self, name)


def _on(portal: tenure.sync.Portal, fn: Callable[..., Coroutine[Any, Any, T]], *args: Any) -> T:
    """``await fn(*args)`` on ``portal``'s loop, tenure's errors as tooz's."""
    with translated():
        return portal.call(fn, *args)
