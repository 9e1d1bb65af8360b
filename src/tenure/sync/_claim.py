"""The sync claim: ``claim = session.claim("nightly-report", at_least=60, at_most=600)``."""

from __future__ import annotations

from types import TracebackType
from typing import Self

from tenure import client as aio
from tenure.client._claim import ClaimFacts
from tenure.sync._held import NotAsync
from tenure.sync._portal import Portal


class Claim(ClaimFacts, NotAsync):
    """A claim of a name for a slot (see :class:`tenure.Claim`); ``with claim:``
    releases it at the end of the block."""

    def __init__(self, portal: Portal, claim: aio.Claim) -> None:
        super().__init__(claim.node, claim.name, claim)
        self._portal = portal
        self._claim = claim

    def __repr__(self) -> str:
        return f"<sync Claim {self.name!r} id {self.id} token {self.token}>"

    def release(self) -> bool:
        """Release it (it ends at the later of now and ``at_least`` after the grant);
        whether it shortened the live claim."""
        return self._portal.call(self._claim.release)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()
