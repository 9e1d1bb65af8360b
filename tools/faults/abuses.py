"""The hostile tenant's abuses (issue 37): what a valid but limited token may try.

Each abuse is ``async def abuse(tenant, tally, deadline) -> None``
(:mod:`tools.faults.abuse_kit`): it runs until its own count is reached or the
monotonic time ``deadline`` passes, whichever is first, then undoes what it made
(closes its sessions, cancels its waits and watches, deletes its semaphores and
nodes) and returns. Every answer is counted in the abuse's :class:`Tally`: done,
refused (a ``LimitExceededError``, by the quota or limit its message names) or
failed (any other tenure error, by its type). :data:`ABUSES` has them all, those of
issue 47 (:mod:`tools.faults.abuses_surfaces`) included. The tokens are
:mod:`tools.faults.tokens`'s: ``mallory`` (read-write, its own ``jobs-*`` nodes) and
``reader`` (read-only, the workload's node).

* ``list-nodes``: ListNodes pages of one name (and now and then a whole listing)
  while 10,000 nodes it cannot see exist (a scan per page stalled the loop 3.5 s);
* ``list-semaphores``: ListSemaphores pages of one, at random places of a node of
  20,000 semaphores, and a whole listing;
* ``sessions``: ``mallory`` opens sessions in its node, a few with a day's recovery
  window, many with ten minutes;
* ``reader-sessions``: ``reader`` opens sessions in the workload's node (where the
  honest clients must keep opening theirs): many with a 5-minute window, a few with
  a day's;
* ``watches``: ``reader`` arms data watches in the workload's node, on the honest
  clients' registers (every honest update is pushed to it) and on absent names;
* ``waiters``: ``mallory`` holds 60 semaphores of its node (the admin's) from one
  session and queues acquires on each from two more;
* ``big-data``: ``mallory`` creates semaphores, every other one holding 64 KiB of data;
* ``nodes``: ``mallory`` asks for a node with limits of 2**63, then makes nodes of
  its own;
* ``flood``: ``flooder`` (the tenant's token for it: tools/faults/tokens.py) sends
  DescribeNode from 32 tasks as fast as answers come;
* ``guesses``: Hellos with wrong secrets (a good one, ``mallory``'s, every third)
  from another loopback address (127.0.0.2): the throttle blocks an address, good
  secrets too, and blocking the honest clients' address is not what this measures.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from typing import Any, Final

import tenure
from tenure._protocol import NEED_DATA, ClientConnection, ConnectionClosed, Hello, Refused, Welcome
from tools.faults.abuse_kit import (
    FAILED,
    STEP,
    Abuse,
    Tally,
    Tenant,
    in_batches,
    quietly,
    refusal_name,
)
from tools.faults.abuses_surfaces import SURFACES
from tools.faults.history import now
from tools.faults.tokens import (
    BIG_NODE,
    BIG_SEMAPHORES,
    FLOODER,
    HONEST_NODE,
    JOBS_NODE,
    MALLORY,
    QUEUES,
    READER,
)

__all__ = ["ABUSES", "FAILED", "Abuse", "Tally", "Tenant", "refusal_name"]

#: A day, the recovery window the hoarding sessions ask for.
DAY: Final = 86_400.0
#: How many times ``waiters`` asks for a session while the quota refuses it (0.2 s apart).
SESSION_TRIES: Final = 300
#: The 64 KiB a semaphore's data may hold by default (a node's max_data_size).
BIG_DATA: Final = b"x" * 65_536


async def list_nodes(tenant: Tenant, tally: Tally, deadline: float) -> None:
    """``list-nodes`` (module docstring): 300 pages of one, every 20th a whole listing."""
    async with await tenant.client(MALLORY.secret) as client:
        for count in range(300):
            if tally.over(deadline):
                break
            if count % 20 == 0:
                await tenant.ask(tally, client.list_nodes())
            else:
                await tenant.ask(tally, client.backend.list_nodes(after="", limit=1))


async def list_semaphores(tenant: Tenant, tally: Tally, deadline: float) -> None:
    """``list-semaphores`` (module docstring): 300 pages of one, one whole listing."""
    async with await tenant.client(MALLORY.secret) as client:
        await tenant.ask(tally, client.list_semaphores(BIG_NODE))
        for _ in range(300):
            if tally.over(deadline):
                break
            after = f"s{tenant.rng.randrange(BIG_SEMAPHORES):06d}"
            page = client.backend.list_semaphores(BIG_NODE, prefix="", after=after, limit=1)
            await tenant.ask(tally, page)


async def _hoard(
    tenant: Tenant, tally: Tally, secret: str, node: str, windows: list[float], deadline: float
) -> None:
    """Open a session per window in ``windows`` (50 at a time), then close them all."""
    async with await tenant.client(secret) as client:
        sessions: list[tenure.Session] = []
        for start in range(0, len(windows), 50):
            if tally.over(deadline):
                break
            batch = windows[start : start + 50]
            opened = await asyncio.gather(
                *(tenant.ask(tally, client.session(node, recovery_window=w)) for w in batch)
            )
            sessions += [session for session in opened if session is not FAILED]
        await in_batches([quietly(session.close()) for session in sessions], 50)


async def sessions(tenant: Tenant, tally: Tally, deadline: float) -> None:
    """``sessions`` (module docstring): 10 sessions with a day's window, 140 with 10 min."""
    windows = [DAY] * 10 + [600.0] * 140
    await _hoard(tenant, tally, MALLORY.secret, JOBS_NODE, windows, deadline)


async def reader_sessions(tenant: Tenant, tally: Tally, deadline: float) -> None:
    """``reader-sessions`` (module docstring): 5 with a day's window, 100 with 5 minutes."""
    windows = [DAY] * 5 + [300.0] * 100
    await _hoard(tenant, tally, READER.secret, HONEST_NODE, windows, deadline)


async def _arm(tenant: Tenant, tally: Tally, session: tenure.Session, name: str) -> Any:
    """A data watch of ``name`` armed (its first description read), or None."""
    watch = session.semaphore(name).watch(data=True)
    if await tenant.ask(tally, anext(watch)) is FAILED:
        await quietly(watch.aclose())
        return None
    return watch


async def watches(tenant: Tenant, tally: Tally, deadline: float) -> None:
    """``watches`` (module docstring): two sessions of 400 watches each."""
    armed: list[AsyncGenerator[Any, None]] = []
    opened: list[tenure.Session] = []
    async with await tenant.client(READER.secret) as client:
        for _ in range(2):
            if tally.over(deadline):
                break
            session = await tenant.ask(tally, client.session(HONEST_NODE, recovery_window=60.0))
            if session is FAILED:
                continue
            opened.append(session)
            names = [f"reg-w{i % 8}c{i % 2}" if i % 4 == 0 else f"absent-{i}" for i in range(400)]
            found = await in_batches([_arm(tenant, tally, session, n) for n in names], 100)
            armed += [watch for watch in found if watch is not None]
        await in_batches([quietly(watch.aclose()) for watch in armed], 100)
        await in_batches([quietly(session.close()) for session in opened], 10)


async def _session_soon(
    tenant: Tenant, tally: Tally, client: tenure.Client, deadline: float
) -> Any:
    """A session of ``mallory``'s node, asked again every 0.2 s while its quota refuses
    (the ``sessions`` abuse holds them all for a moment), until ``deadline`` (or its
    evidence: :meth:`Tally.over`), :data:`SESSION_TRIES` times at most."""
    session = FAILED
    for _ in range(SESSION_TRIES):
        session = await tenant.ask(tally, client.session(JOBS_NODE, recovery_window=60.0))
        if session is not FAILED or tally.over(deadline):
            break
        await asyncio.sleep(0.2)
    return session


async def waiters(tenant: Tenant, tally: Tally, deadline: float) -> None:
    """``waiters`` (module docstring): the admin's 60 queue semaphores held, and 2 x 60
    acquires queued on them."""
    async with await tenant.client(MALLORY.secret) as client:
        holder = await _session_soon(tenant, tally, client, deadline)
        if holder is FAILED:
            return
        names = [f"queue-{i}" for i in range(QUEUES)]
        held = await asyncio.gather(
            *(tenant.ask(tally, holder.semaphore(n).acquire()) for n in names)
        )
        queued: list[asyncio.Task[Any]] = []
        others: list[tenure.Session] = []
        for _ in range(2):
            other = await _session_soon(tenant, tally, client, deadline)
            if other is FAILED:
                continue
            others.append(other)
            queued += [
                asyncio.create_task(tenant.ask(tally, other.semaphore(n).acquire()))
                for n, lease in zip(names, held, strict=True)
                if lease is not FAILED
            ]
        # Queued until the phase ends (a refusal ends its task at once), or until the
        # quota's refusal came back (its evidence); then withdrawn.
        pending = set(queued)
        if pending:
            _, pending = await asyncio.wait(pending, timeout=max(0.0, min(deadline - now(), 2.0)))
        while pending and not tally.over(deadline):
            _, pending = await asyncio.wait(
                pending, timeout=STEP, return_when=asyncio.FIRST_COMPLETED
            )
        for task in queued:
            task.cancel()
        await asyncio.gather(*queued, return_exceptions=True)
        await in_batches([quietly(s.close()) for s in [*others, holder]], 10)


def _data(name: str) -> bytes:
    """64 KiB for every other semaphore of ``big-data`` (by its number), none for the rest."""
    return BIG_DATA if int(name.rsplit("-", 1)[1]) % 2 == 0 else b""


async def big_data(tenant: Tenant, tally: Tally, deadline: float) -> None:
    """``big-data`` (module docstring): 120 semaphores, every other one holding 64 KiB
    (the data quota refuses those first, the semaphore quota the rest), deleted after."""
    async with await tenant.client(MALLORY.secret) as client:
        session = await tenant.ask(tally, client.session(JOBS_NODE, recovery_window=60.0))
        if session is FAILED:
            return
        async with session:
            made: list[str] = []
            for start in range(0, 120, 20):
                if tally.over(deadline):
                    break
                names = [f"big-{i}" for i in range(start, start + 20)]
                created = await asyncio.gather(
                    *(tenant.ask(tally, session.semaphore(n).create(1, _data(n))) for n in names)
                )
                made += [n for n, got in zip(names, created, strict=True) if got is not FAILED]
            await in_batches([quietly(session.semaphore(n).delete(force=True)) for n in made], 20)


async def nodes(tenant: Tenant, tally: Tally, deadline: float) -> None:
    """``nodes`` (module docstring): one node of limits 2**63, then 20 nodes, dropped."""
    async with await tenant.client(MALLORY.secret) as client:
        huge = 2**63
        limits = client.create_node(
            "jobs-huge", max_sessions=huge, max_semaphores=huge, max_waiters=huge
        )
        await tenant.ask(tally, limits)
        made = []
        for i in range(20):
            if tally.over(deadline):
                break
            name = f"jobs-n{i}"
            if await tenant.ask(tally, client.create_node(name, exist_ok=True)) is not FAILED:
                made.append(name)
        for name in [*made, "jobs-huge"]:
            await quietly(client.drop_node(name, force=True))


async def flood(tenant: Tenant, tally: Tally, deadline: float) -> None:
    """``flood`` (module docstring): 32 tasks of DescribeNode, 20,000 requests at most."""
    async with await tenant.client(FLOODER.secret) as client:
        left = [20_000]

        async def one() -> None:
            while left[0] > 0 and not tally.over(deadline):
                left[0] -= 1
                await tenant.ask(tally, client.describe_node(JOBS_NODE))

        await asyncio.gather(*(one() for _ in range(32)))


async def _hello(host: str, port: int, secret: str) -> str:
    """One Hello with ``secret`` from 127.0.0.2: ``welcome``, ``blocked`` or ``unknown``."""
    reader, writer = await asyncio.open_connection(host, port, local_addr=("127.0.0.2", 0))
    try:
        codec = ClientConnection()
        writer.write(codec.send(Hello(client_name="guesser", token=secret)))
        while True:
            event = codec.next_event()
            if event is NEED_DATA:
                data = await reader.read(65536)
                codec.receive_data(data)
                continue
            if isinstance(event, Welcome):
                return "welcome"
            if isinstance(event, Refused):
                return "blocked" if "too many" in event.message else "unknown"
            if isinstance(event, ConnectionClosed):
                return "closed"
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


async def guesses(tenant: Tenant, tally: Tally, deadline: float) -> None:
    """``guesses`` (module docstring): 30 Hellos, every third with a good secret.

    Counted by what the server said: ``done`` for the good secret welcomed, ``failed``
    by secret and answer (``wrong unknown``: a wrong secret refused; ``... blocked``:
    refused unheard, good or wrong, the address being blocked).

    Its evidence (:data:`~tools.faults.abuse_kit.EVIDENCE`) is a wrong secret refused
    unheard: the throttle's block, past the server's count of failures
    (``--auth-failures-per-minute``, 10).
    """
    host, port = tenant.url.removeprefix("tenure://").rsplit(":", 1)
    for count in range(30):
        if tally.over(deadline):
            break
        secret = MALLORY.secret if count % 3 == 2 else f"guess-{tenant.rng.getrandbits(64):x}"
        try:
            async with asyncio.timeout(STEP):
                said = await _hello(host, int(port), secret)
        except (OSError, TimeoutError) as error:
            said = type(error).__name__
        good = secret == MALLORY.secret
        if good and said == "welcome":
            tally.done += 1
        else:  # (a wrong secret welcomed would show here as "wrong welcome")
            tally.failed[f"{'good' if good else 'wrong'} {said}"] += 1


#: Every abuse by name, in the report's order.
ABUSES: Final[dict[str, Abuse]] = {
    "list-nodes": list_nodes,
    "list-semaphores": list_semaphores,
    "sessions": sessions,
    "reader-sessions": reader_sessions,
    "watches": watches,
    "waiters": waiters,
    "big-data": big_data,
    "nodes": nodes,
    "flood": flood,
    "guesses": guesses,
    **SURFACES,
}
