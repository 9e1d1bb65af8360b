"""Who blocks a name (``client.why``): the store's own answer, or one made from a describe.

A store that knows what each holder waits for (:attr:`Capability.WAIT_CHAINS`:
``memory://``, ``tenure://``) answers itself
(:meth:`~tenure.backends.WaitChains.why`): each holder's waits, the chain of holders
that wait across names, and its roots. Elsewhere (``etcd://``, ``redis://``,
``postgres://``, a third party's store) the answer is made here from a describe of the
name, which the client makes in a session of its own, closed at once
(:data:`DESCRIPTION`): the holders and the waiters (no ``address``: ""), each one's
age by the store's ``since`` against this machine's clock (None where the store keeps
none), and
``waiting_for``, ``chain`` and ``roots`` None (not known: the capability says so). The
page is the same either way: ``limit`` holders, ``limit`` waiters after the
``after``-th.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Final

from tenure._core.values import SemaphoreDescription, check_page_limit
from tenure._core.why_report import WhyHolder, WhyReport, WhyWaiter
from tenure.backends import Backend, Capability, WaitChains
from tenure.client import _args
from tenure.errors import InvalidArgumentError

__all__ = ["DESCRIPTION", "why"]

#: The description of the session a describe is made in (operators see it listed).
DESCRIPTION: Final = "tenure why"


async def why(
    backend: Backend,
    node: str,
    name: str,
    after: int,
    limit: int,
    describe: Callable[[str, str], Awaitable[SemaphoreDescription]],
) -> WhyReport:
    """Who blocks ``name`` of ``node`` (module docstring); ``describe(node, name)`` is
    the client's describe of it, with its owners and waiters, where the store does not
    answer itself."""
    node, name = _args.node_name(node), _args.semaphore_name(name)
    limit = check_page_limit(limit)
    if type(after) is not int or after < 0:
        raise InvalidArgumentError(f"after must be a non-negative position, got {after!r}")
    if Capability.WAIT_CHAINS in backend.capabilities and isinstance(backend, WaitChains):
        return await backend.why(node, name, after=after, limit=limit)
    described = await describe(node, name)
    now = time.time()
    holders = tuple(
        WhyHolder(
            owner.session_id,
            owner.description,
            owner.identity,
            "",
            owner.count,
            owner.token,
            _age(owner.since, now),
            None,
            None,
        )
        for owner in described.owners[:limit]
    )
    waiters = tuple(
        WhyWaiter(
            waiter.session_id,
            waiter.description,
            waiter.identity,
            "",
            waiter.count,
            position,
            _age(waiter.since, now),
        )
        for position, waiter in enumerate(described.waiters, start=1)
        if after < position <= after + limit
    )
    total_holders, total_waiters = len(described.owners), len(described.waiters)
    return WhyReport(node, name, holders, waiters, None, None, total_holders, total_waiters)


def _age(since: float | None, now: float) -> float | None:
    """Seconds from ``since`` (UNIX seconds by the store's clock) to ``now`` (this
    machine's), never negative; None where the store keeps no ``since``."""
    return None if since is None else max(0.0, now - since)
