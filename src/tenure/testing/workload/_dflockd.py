"""The linearizable workload through dflockd's face: mutexes taken with dflockd's client.

On a target that serves dflockd's protocol on its port (one ``tenure serve``: the
face is accepted on the main port by the first byte; the fault suite's ``linearizable``
scenario on ``tenure``, and the simulation's ``--dflockd``), each client also takes, now
and then, one of its own mutexes (``dfl-<n>``) with ``dflockd-client``'s
``AsyncDistributedLock`` (a connection of its own through the client's door, the
lease renewed by the library), recorded in the ``mutex`` model as the native ones:

* ``acquire`` (``acquire()``): ``ok`` with the token's fence (its first 16 hex
  digits, the tenure token: they strictly increase per key), ``fail`` when not
  granted within the wait, ``info`` when the connection failed;
* ``release`` (``release()``): ``ok`` when the face answered it. The library says
  False for every other end (the lease had run out, the connection was lost: the
  face releases a dropped connection's locks itself): ``info``, and with it a
  ``lost`` invoked when the acquire was called and never completed: a dflockd lease
  ends by itself, on the face's clock, when its renewals stop (a paused worker, a cut
  link), perhaps long before the release, and nothing tells the holder when; it may
  even have ended before the grant reached the client, which the library still
  returns as held (a grant held 4.4 s by a cut link, its 3 s lease run out and the
  key granted to others meanwhile: the next grants carried higher tokens, as fencing
  needs). (Not for every grant: a hold released ``ok`` ended at its release, and an
  open loss on each costs the search dearly, every one of them placeable anywhere.)

A cluster of tenure servers is left out: dflockd's client dials one address (a
standby closes its connections at once), and its ``servers`` list shards keys, it
does not fail over (docs/cluster.md says to put a load balancer on ``/readyz``).

``dflockd-client`` is imported by the step, when it runs: the workload's other steps
need none of it (it is the repo's test dependency, not an extra of tenure).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Final

import tenure
from tenure.testing.workload._recording import ANSWER_LOST

if TYPE_CHECKING:
    from tenure.testing.workload._client import LinClient, Step

__all__ = ["DFLOCKD_STEPS", "LEASE", "hold_through_dflockd"]

#: The dflockd lease of a hold, in whole seconds (renewed at half of it by the library).
LEASE: Final = 3


async def hold_through_dflockd(client: LinClient, session: tenure.Session) -> None:
    """One dflockd mutex: acquire, hold, release (see the module docstring)."""
    from dflockd_client import AsyncDistributedLock, DflockdError, fence_from_token

    config = client.config
    key = client.rng.choice(config.dflockd_keys)
    host, port = config.dflockd_door_of(client.number)
    lock = AsyncDistributedLock(
        key,
        acquire_timeout_s=max(1, round(config.acquire_wait)),
        lease_ttl_s=LEASE,
        servers=[(host, port)],
        connect_timeout_s=2.0,
    )
    writer = client.books.writer("mutex")
    try:
        process, called = client.procs.current, client.books.now_ns()
        client.books.record_at(called, "mutex", "invoke", process, "acquire", None, key)
        try:
            async with asyncio.timeout(config.op_timeout + config.acquire_wait):
                granted = await lock.acquire()
        except (DflockdError, *ANSWER_LOST):
            writer.info(process, "acquire", None, key)
            client.procs.unknown()
            return
        if not granted or lock.token is None:
            writer.fail(process, "acquire", None, key)
            return
        token, seen = fence_from_token(lock.token), client.books.now_ns()
        client.books.record_at(seen, "mutex", "ok", process, "acquire", token, key)
        await asyncio.sleep(client.rng.uniform(*config.hold))
        await client.pauses.maybe(client.rng, client.label)
        process = client.procs.current
        writer.invoke(process, "release", token, key)
        try:
            async with asyncio.timeout(config.op_timeout):
                released = await lock.release()
        except (DflockdError, *ANSWER_LOST):
            released = False
        if released:
            writer.ok(process, "release", token, key)
        else:
            writer.info(process, "release", token, key)
            client.procs.unknown()
            loss = client.procs.loss(key, token)
            client.books.record_at(called, "mutex", "invoke", loss, "lost", token, key)
    finally:
        with contextlib.suppress(DflockdError, *ANSWER_LOST):
            async with asyncio.timeout(config.op_timeout):
                await lock.aclose()


#: The steps dflockd's face adds to a client's (:data:`tenure.testing.workload.STEPS`).
DFLOCKD_STEPS: Final[dict[str, tuple[Step, int]]] = {"hold-dflockd": (hold_through_dflockd, 2)}
