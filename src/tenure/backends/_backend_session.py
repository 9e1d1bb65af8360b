"""One session of the backend contract, the full set: the core and every ability.

:class:`BackendSession` is what the built-in backends' sessions implement: the core
(:class:`~tenure.backends._core_session.CoreSession`) and every ability
(:data:`~tenure.backends._abilities.ABILITIES`) composed, each member's meaning
stated once, in the protocol that owns it. What :meth:`Backend.open_session
<tenure.backends._base.Backend.open_session>` must return is the core; the values it
grants and its listener are :mod:`tenure.backends._grants`' (re-exported here, as
before). Part of the backend contract (re-exported by :mod:`tenure.backends._base`
and :mod:`tenure.backends`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from tenure.backends._abilities import (
    AllOrNone,
    Claiming,
    Handoffs,
    LeaseRenewal,
    MaxHolds,
    PrefixWatch,
    RateReservations,
    SessionRecovery,
    TaskNumbers,
)
from tenure.backends._core_session import CoreSession
from tenure.backends._grants import Grant, HeldGrant, SessionListener

__all__ = ["BackendSession", "Grant", "HeldGrant", "SessionListener"]


# MaxHolds and TaskNumbers come before CoreSession: their acquire (the core's, taking
# ``task=`` and ``max_hold=`` too: MaxHolds') and restate (``task=``: TaskNumbers') are
# the ones the full set has.
class BackendSession(
    MaxHolds,
    TaskNumbers,
    CoreSession,
    AllOrNone,
    LeaseRenewal,
    SessionRecovery,
    Handoffs,
    RateReservations,
    Claiming,
    PrefixWatch,
    Protocol,
):
    """One session with the core and every ability: what the built-in backends'
    sessions implement, where their backend declares each capability (``StoreSession``
    of ``session_class(capabilities)``, without the members of the abilities it
    lacks). A backend of another package implements the core and the abilities it
    declares, not this."""

    async def acquire_all(
        self,
        names: Sequence[str],
        *,
        count: int,
        data: bytes,
        timeout: float | None,
        ephemeral: bool,
        task: int = 0,
    ) -> list[Grant] | None:
        """:meth:`AllOrNone.acquire_all`, asked by the task numbered ``task``
        (:class:`TaskNumbers`): the one member two abilities shape together."""
