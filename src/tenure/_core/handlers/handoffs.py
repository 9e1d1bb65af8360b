"""A hold's hand-off: offer a hold (OfferHold), adopt an offered one (AdoptHold).

The offer keeps only the SHA-256 digest of the holder's secret with the hold (a
describe never lists it, and a snapshot or a journal's OfferHold holds nothing that
adopts); the adopter shows the secret itself. Adopting is one step: the offering
session's hold ends (told LeaseLost, kept for a re-attach as any loss it did not
cause) and the adopter holds the same count and data under a new token from
:func:`~tenure._core.shared_steps.grant` (rule 3), so every token of the old holder is
below the adopter's: a fence that saw the new one refuses the old.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Final

from tenure._core import commands as c
from tenure._core.checks import check_place
from tenure._core.effects import LeaseLost
from tenure._core.quotas import Q_DATA_BYTES, Q_HOLDS
from tenure._core.semaphore import holder_key
from tenure._core.shared_steps import grant, settle, tell_missed
from tenure._core.state import EngineState
from tenure._core.values import check_hold
from tenure._core.watches import OWNERS
from tenure.errors import (
    ErrorCode,
    InvalidArgumentError,
    LeaseLostError,
    NotFoundError,
    PreconditionFailedError,
)

#: The length of an offer's digest (SHA-256's).
DIGEST_BYTES: Final = 32
#: The most bytes a hand-off's secret may have (the client sends 16 or more).
MAX_SECRET_BYTES: Final = 64


def digest_of(secret: bytes) -> bytes:
    """What an offer keeps of ``secret``: its SHA-256 digest."""
    return hashlib.sha256(secret).digest()


def offer_hold(state: EngineState, cmd: c.OfferHold, now: float) -> c.AcquireResult:
    """Keep ``digest`` with the session's hold (replacing an earlier offer); the hold."""
    session, node = state.lookup_session_node(cmd.session_id)
    name, hold = check_place(cmd.name, cmd.hold)
    digest = cmd.digest
    if type(digest) is not bytes or len(digest) != DIGEST_BYTES:
        raise InvalidArgumentError(
            f"a hand-off's digest must be {DIGEST_BYTES} bytes (SHA-256), got {digest!r}"
        )
    sem = node.semaphores.get(name)
    owner = None if sem is None else sem.owner(holder_key(session.session_id, hold))
    if owner is None:
        raise NotFoundError(f"session {session.session_id} holds no tokens of {name!r}")
    owner.offer = digest
    return c.AcquireResult(c.AcquireStatus.GRANTED, owner.token, owner.count, owner.lease_ttl)


def adopt_hold(state: EngineState, cmd: c.AdoptHold, now: float) -> c.AcquireResult:
    """Move the offered hold to this session under a new token (module docstring)."""
    session, node = state.lookup_session_node(cmd.session_id)
    name, hold = check_place(cmd.name, cmd.hold)
    holder_hold = check_hold(cmd.holder_hold)
    secret, holder, token = cmd.secret, cmd.holder, cmd.token
    if type(secret) is not bytes or not 0 < len(secret) <= MAX_SECRET_BYTES:
        raise InvalidArgumentError(
            f"a hand-off's secret must be 1 to {MAX_SECRET_BYTES} bytes, got {secret!r}"
        )
    if type(holder) is not int or type(token) is not int:
        raise InvalidArgumentError("a hand-off's holder and token must be integers")
    sem = node.semaphores.get(name)
    old = None if sem is None or holder < 0 else sem.owner(holder_key(holder, holder_hold))
    offer = None if old is None else old.offer
    if (
        sem is None
        or old is None
        or offer is None
        or old.token != token
        or not hmac.compare_digest(digest_of(secret), offer)
    ):
        # One answer for every case: which one it was tells a guesser nothing.
        raise LeaseLostError(
            f"the hold on {name!r} handed off with token {token} cannot be adopted: it "
            "ended, was adopted already or offered again, or this is not its hand-off"
        )
    sid = session.session_id
    key = holder_key(sid, hold)
    if sem.owner(key) is not None or sem.waiter(key) is not None:
        raise PreconditionFailedError(
            f"session {sid}'s hold {hold} on {name!r} is taken: adopt as another hold"
        )
    if state.ledger.limited:
        state.check_all(session.usage, [(Q_HOLDS, 1), (Q_DATA_BYTES, len(old.data))])
    # Validated: from here on the command succeeds (rule 1).
    sem.remove_owner(old.key)
    state.sessions[old.session_id].discard_hold(name, old.hold)
    state.hold_ended(node, name, old, False, now)  # (handed off: its holder let it go)
    tell_missed(
        state,
        LeaseLost(
            old.session_id,
            name,
            old.token,
            ErrorCode.LEASE_LOST,
            f"the hold on {name!r} was handed off: session {sid} adopted it",
            old.hold,
        ),
    )
    # The adopted grant keeps the end of the hold it takes over (its max_hold): a
    # hand-off must not be a way past the bound (``replaced``: never extended).
    owner = grant(
        state,
        node,
        sem,
        sid,
        old.count,
        old.data,
        old.lease_ttl,
        now,
        hold,
        replaced=old,
        known=True,
    )
    settle(state, node, sem, now, OWNERS)
    return c.AcquireResult(c.AcquireStatus.GRANTED, owner.token, owner.count, owner.lease_ttl)
