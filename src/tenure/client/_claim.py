"""Claims: a name taken once per slot, for at least and at most a time of the store's clock.

A lock released when a nightly job ends lets a replica whose clock is late run the
same night again; a claim does not (ShedLock's ``lockAtLeastFor`` and
``lockAtMostFor``, kazoo's NonBlockingLease). ``await session.claim(name,
at_least=60, at_most=600)`` takes the name, or answers None if it is claimed; a
claim then holds it

* at most ``at_most`` seconds after it was granted, whether or not its holder lives
  on or finished (no work outlives a slot by more than that), and
* at least ``at_least`` seconds after it was granted, even once released (so that a
  late replica finds the slot taken),

both timed by the store (:mod:`tenure._core.claims`: the tenure server's clock,
Redis's, PostgreSQL's, etcd's leases), never by a client. A claim is not tied to a
session: it outlives the session that took it, and anyone who knows its ``id`` may
release it (``client.release_claim(node, name, id)``: a producer takes the claim, a
worker releases it when the task is done, as celery-once does). Its ``token`` is a
fencing token, ordered with every grant's of the node.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Self

from tenure._core.claims import ClaimRecord

#: Releases the claim ``id`` of the name: ``release(name, id)``, whether it did.
Releaser = Callable[[str, str], Awaitable[bool]]


class ClaimFacts:
    """What a granted claim is: its node, name, id, token, times and data (the async
    :class:`Claim` and the sync one both are these)."""

    def __init__(self, node: str, name: str, record: ClaimRecord | ClaimFacts) -> None:
        #: The node and the name claimed.
        self.node = node
        self.name = name
        #: The claim's id: what a client's ``release_claim`` takes.
        self.id: str = record.id
        #: The fencing token of the grant (greater than every earlier grant's of the node).
        self.token: int = record.token
        #: Seconds the name stays claimed after the grant, released or not.
        self.at_least: float = record.at_least
        #: Seconds after the grant the claim ends, whatever its holder does.
        self.at_most: float = record.at_most
        #: When it was granted, UNIX seconds of the store's clock (etcd://: this client's).
        self.granted_at: float = record.granted_at
        #: The owner data it was taken with.
        self.data: bytes = record.data


class Claim(ClaimFacts):
    """A claim of ``name`` in ``node`` (see the module docstring).

    ``async with claim:`` releases it at the end of the block; ``await
    claim.release()`` does so at any time. The name stays claimed until ``at_least``
    after the grant either way.
    """

    def __init__(self, node: str, name: str, record: ClaimRecord, release: Releaser) -> None:
        super().__init__(node, name, record)
        self._release = release

    def __repr__(self) -> str:
        return (
            f"<Claim {self.name!r} of node {self.node!r} id {self.id} token {self.token} "
            f"at least {self.at_least:g} s, at most {self.at_most:g} s>"
        )

    async def release(self) -> bool:
        """Release it: it ends at the later of now and ``at_least`` after the grant.

        Returns whether it shortened the live claim (False: it had ended at
        ``at_most`` already, or was released already, by this object or by anyone
        holding its id).
        """
        return await self._release(self.name, self.id)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.release()
