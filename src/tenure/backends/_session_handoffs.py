"""A session's hand-offs: a hold offered for another session to adopt, and one adopted.

What the contract promises (:class:`~tenure.backends._abilities.Handoffs`) is carried
out here for one :class:`~tenure.backends._session.StoreSession`, over its store's
:class:`~tenure.backends._store.HandingOff`, with the session's ledger:

* **an offer** is of a hold the ledger says the session has, with a fresh secret each
  time (the store keeps only its proof): the :class:`~tenure.backends._base.Handoff`
  names the hold by the token the store answered;
* **an adoption** takes a hold number as an acquire does (a pending one in the
  ledger), so that a re-attach meanwhile finds the adopted hold asked for, not
  unknown; the grant is the ledger's once the store has moved the hold.

A store without hand-offs (its :class:`~tenure.backends._store.Acquiring` is no
:class:`~tenure.backends._store.HandingOff`) refuses both with UnsupportedError (its
session's class lacks them too: :mod:`tenure.backends._session_class`).
"""

from __future__ import annotations

import secrets

from tenure.backends._base import Grant, Handoff, HeldGrant
from tenure.backends._handoffs import SECRET_BYTES, check_handoff
from tenure.backends._ledger import HoldLedger
from tenure.backends._store import Acquiring, HandingOff
from tenure.errors import InvalidArgumentError, LeaseLostError, UnsupportedError

__all__ = ["SessionHandoffs"]


class SessionHandoffs:
    """The hand-offs of the session ``session_id`` on ``node`` (module docstring), its
    tickets' ``scheme`` naming the kind of backend."""

    __slots__ = ("_acquiring", "_ledger", "_node", "_scheme", "_session_id")

    def __init__(
        self, acquiring: Acquiring, ledger: HoldLedger, scheme: str, node: str, session_id: int
    ) -> None:
        self._acquiring = acquiring
        self._ledger = ledger
        self._scheme = scheme
        self._node = node
        self._session_id = session_id

    async def offer(self, name: str, grant: Grant) -> Handoff:
        """Offer the session's hold ``grant`` on ``name``: what another session adopts."""
        store = self._handing_off()
        if self._ledger.held.get((name, grant.hold)) != grant:
            raise LeaseLostError(f"the grant of {name!r} (token {grant.token}) is not held")
        secret = secrets.token_bytes(SECRET_BYTES)
        offered = await store.offer_hold(name, grant.hold, secret)
        return Handoff(
            self._scheme, self._node, name, self._session_id, grant.hold, offered.token, secret
        )

    async def adopt(self, handoff: Handoff) -> HeldGrant:
        """Take the hold ``handoff`` offers as a hold of this session."""
        store = self._handing_off()
        if not isinstance(handoff, Handoff):
            raise InvalidArgumentError(f"not a Handoff: {type(handoff).__name__}")
        check_handoff(handoff, self._scheme, self._node)
        name, ledger = handoff.name, self._ledger
        hold = ledger.free_hold(name)
        request_id = self._acquiring.new_request_id()
        ledger.open(request_id, name, hold)
        try:
            held = await store.adopt_hold(handoff, hold)
            grant = ledger.take(request_id, (name, hold), held.grant)
        finally:
            ledger.close(request_id)
        return HeldGrant(name, grant, held.data)

    def _handing_off(self) -> HandingOff:
        store = self._acquiring
        if not isinstance(store, HandingOff):  # (its class has no offer_hold then)
            raise UnsupportedError(f"{self._scheme}:// cannot hand a hold to another session")
        return store
