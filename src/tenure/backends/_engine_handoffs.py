"""A hold's hand-off where the store is an engine spoken to in commands: OfferHold and
AdoptHold (:mod:`tenure._core.handlers.handoffs`), the
:class:`~tenure.backends._store.HandingOff` of :class:`~tenure.backends._engine.CommandStore`.

The engine keeps only the SHA-256 digest of an offer's secret: the secret itself
travels once, in the AdoptHold that spends it.
"""

from __future__ import annotations

from tenure._core import AdoptHold, DescribeSemaphore, OfferHold
from tenure._core.handlers.handoffs import digest_of
from tenure.backends._base import Grant, Handoff, HeldGrant
from tenure.backends._watch import EngineCalls
from tenure.errors import NotFoundError

__all__ = ["HandoffCommands"]


class HandoffCommands:
    """OfferHold and AdoptHold over :attr:`channel`, for the session :attr:`session_id`
    (a base of :class:`~tenure.backends._engine.CommandStore`, which sets both)."""

    channel: EngineCalls
    session_id: int

    async def offer_hold(self, name: str, hold: int, secret: bytes) -> Grant:
        """OfferHold, with the digest of ``secret``; the hold as offered."""
        result = await self.channel.call(OfferHold(self.session_id, name, digest_of(secret), hold))
        assert result.token is not None
        return Grant(result.token, result.count, result.lease_ttl, hold)

    async def adopt_hold(self, handoff: Handoff, hold: int) -> HeldGrant:
        """AdoptHold, then the new hold's data read back (the reply carries none)."""
        command = AdoptHold(
            self.session_id,
            handoff.name,
            handoff.holder,
            handoff.holder_hold,
            handoff.token,
            handoff.secret,
            hold,
        )
        result = await self.channel.call(command)
        assert result.token is not None
        grant = Grant(result.token, result.count, result.lease_ttl, hold)
        describe = DescribeSemaphore(self.session_id, handoff.name, owners=True, waiters=False)
        try:
            owners = (await self.channel.call(describe)).description.owners
        except NotFoundError:  # (deleted meanwhile: its loss is on its way)
            owners = ()
        data = next((o.data for o in owners if o.token == grant.token), b"")
        return HeldGrant(handoff.name, grant, data)
