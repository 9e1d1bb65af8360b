"""Commands of a hold's hand-off: offer a hold, adopt an offered one (docs/recipes.md,
"Handing a lease to another process")."""

from __future__ import annotations

from dataclasses import dataclass

from tenure._core.commands.base import Command
from tenure._core.commands.semaphores import AcquireResult


@dataclass(frozen=True, slots=True)
class OfferHold(Command[AcquireResult]):
    """Offer the session's hold ``hold`` on ``name`` for adoption by whoever shows the
    secret whose SHA-256 digest is ``digest`` (:class:`AdoptHold`); replies the hold as
    offered (GRANTED, its fencing token, count and lease TTL: what the hand-off names).

    The digest is kept with the hold (never listed: a describe does not show it) until
    the hold ends, is adopted, or is offered again (the latest offer replaces it). The
    hand-off names the hold by its token: a restate in place (new data, fewer tokens:
    the same token) keeps the offer, and the adopter takes the hold as it is then; an
    upgrade (a new token) withdraws it. NotFoundError if the session does not hold
    ``name`` with that number.
    """

    session_id: int
    name: str
    digest: bytes
    hold: int = 0


@dataclass(frozen=True, slots=True)
class AdoptHold(Command[AcquireResult]):
    """Take over the hold ``holder_hold`` of session ``holder`` on ``name``, offered with
    the secret ``secret`` (:class:`OfferHold`) while its token was ``token``, as this
    session's hold ``hold``: in one step the offering session's hold ends (it is told
    LeaseLost) and this session holds the same count with the same data (and the same
    lease TTL, restarted now) under a new, greater fencing token. Replies that grant.

    LeaseLostError if no such hold is offered with that secret now (it ended, was
    adopted already, was offered again, or the secret is not its); PreconditionFailedError
    if this session's hold ``hold`` on ``name`` is taken (held or waiting).
    """

    session_id: int
    name: str
    holder: int
    holder_hold: int
    token: int
    secret: bytes
    hold: int = 0
