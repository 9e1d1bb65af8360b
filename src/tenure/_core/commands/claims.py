"""Commands on claims (:mod:`tenure._core.claims`): claim a name, release a claim."""

from __future__ import annotations

from dataclasses import dataclass

from tenure._core.claims import ClaimRecord
from tenure._core.commands.base import Command


@dataclass(frozen=True, slots=True)
class ClaimName(Command[ClaimRecord]):
    """Claim ``name`` for at least ``at_least`` and at most ``at_most`` seconds
    (:mod:`tenure._core.claims`); replies with the claim that holds the name now:
    the new one (its id is ``claim_id``), the live one of that id (a retry), or
    another's (refused: the name is claimed).

    ``at`` is the store's wall clock, UNIX seconds: the host that applies the command
    sets it (whatever a client sent), so that a replay of the journal records the
    same grant time. The claim's end is timed on the engine's clock.
    """

    session_id: int
    name: str
    claim_id: str
    at_least: float
    at_most: float
    data: bytes = b""
    at: float = 0.0


@dataclass(frozen=True, slots=True)
class ReleaseClaim(Command[bool]):
    """Release the claim ``claim_id`` of ``name`` in ``node``, by anyone (no session):
    it ends at the later of now and ``at_least`` after its grant. Replies whether it
    shortened a live claim of that id (False: none, ended, another's, released).

    ``at`` is set by the host, as ClaimName's (the record's release time).
    """

    node: str
    name: str
    claim_id: str
    at: float = 0.0
