"""What a backend session grants, and whom it tells: :class:`Grant`, :class:`HeldGrant`,
:class:`SessionListener`.

The values and the listener every part of the session contract speaks of: the core
(:mod:`tenure.backends._core_session`) and the abilities
(:mod:`tenure.backends._abilities`) give and take grants, and a session tells its
listener the news it did not answer a call with. Kept apart from the protocols so
that each of them can import these without a circle. Part of the backend contract
(re-exported by :mod:`tenure.backends._backend_session`, :mod:`tenure.backends._base`
and :mod:`tenure.backends`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from tenure.errors import LostError

__all__ = ["Grant", "HeldGrant", "SessionListener"]


@dataclass(frozen=True, slots=True)
class Grant:
    """A successful acquire: the fencing token, the count held, the lease TTL if any.

    ``hold`` tells this hold from the session's other holds on the same semaphore
    (the backend's number for it; the session gives it back to restate, release or
    renew this hold).
    """

    token: int
    count: int
    lease_ttl: float | None = None
    hold: int = 0


@dataclass(frozen=True, slots=True)
class HeldGrant:
    """One hold of a session, as :meth:`SessionRecovery.holds
    <tenure.backends._abilities.SessionRecovery.holds>` reads it back.

    ``grant`` is what the acquire that made the hold returned (token, count, lease
    TTL, hold number); ``data`` is the owner data the hold carries.
    """

    name: str
    grant: Grant
    data: bytes


class SessionListener(Protocol):
    """Receives a backend session's bad news; called on the event loop, never twice."""

    def session_lost(self, error: LostError) -> None:
        """The session ended without being closed by its client (expired, dropped...).

        Every grant of the session ended with it; the backend does not also call
        :meth:`lease_lost` for each.
        """

    def lease_lost(self, name: str, token: int, error: LostError) -> None:
        """The grant with ``token`` on semaphore ``name`` ended without a release.

        (Its lease TTL ran out, the semaphore was deleted by force...)
        """
