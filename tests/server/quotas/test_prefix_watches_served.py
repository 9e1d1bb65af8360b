"""Prefix watches on a real ``tenure serve --auth-file``: the abuse of issue 47.

Each prefix watch fires on every change under its prefix, and a detached session's
firings wait in the server: a read-only token's thousands of ``WatchPrefix("")``,
left detached, made every change of the node cost seconds, and a node-scoped
read-write token with no quota stalled the server by changing its own node (a
bystander's lock with a short recovery window was lost). Now a read-only token has
100 prefix watches by default (the ``prefix_watches`` quota), and no node more than
``--max-prefix-watches-per-node`` (1,000; 700 here) whoever armed them: the refusals are
counted (in the answers and in ``tenure_quota_refusals_total``), never timed, and a
bystander's lock on another node is kept while the watched nodes change.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from tenure._core import (
    MAX_COUNT,
    Acquire,
    CreateNode,
    CreateSemaphore,
    CreateSession,
    DeleteSemaphore,
    DescribeSemaphore,
    Release,
    WatchPrefix,
)
from tenure._protocol import Failure
from tenure.errors import ErrorCode

from ..http import value
from ..tenants import TenantServer, token, write_auth_file
from ..wire import Clients, WireClient

pytestmark = pytest.mark.timeout(120)

ADMIN, READER, BATCH, CALM = "admin-secret", "reader-secret", "batch-secret", "calm-secret"
TOKENS = (
    token("admin", ADMIN),
    token("reader", READER, "read-only"),
    token("batch", BATCH, nodes=["jobs-*"]),
    token("calm", CALM, nodes=["calm"]),
)
#: Each hostile session asks this many prefix watches (a node's max_watches_per_session
#: is 1,000 by default: each session could have had them all): the reader's, the batch's.
READER_ASKS, BATCH_ASKS = 150, 500
#: Each hostile token's sessions, each asking its token's asks above.
SESSIONS = 2
#: The server's ``--max-prefix-watches-per-node``.
PER_NODE = 700


async def _arm_all(client: WireClient, sid: int, asked: int) -> list[Failure]:
    """Ask ``asked`` prefix watches of every name in ``sid`` (sent at once, then read):
    the refusals, in order."""
    sent = [client.send(WatchPrefix(sid, "", watch_data=True)) for _ in range(asked)]
    answers = [await client.answer(request) for request in sent]
    return [answer for answer in answers if isinstance(answer, Failure)]


async def _keep_pinging(client: WireClient) -> None:
    """What a real client does: a Ping now and then, so that its connection (with
    a session of a short recovery window attached) is never silent."""
    nonce = 0
    while True:
        nonce += 1
        await client.ping(nonce)
        await asyncio.sleep(0.2)


async def test_hostile_prefix_watches_are_bounded_and_a_bystander_keeps_its_lock(
    tmp_path: Path, wire: Clients
) -> None:
    auth_file = write_auth_file(tmp_path, *TOKENS)
    flags = ("--max-prefix-watches-per-node", str(PER_NODE))
    with TenantServer(tmp_path, auth_file, *flags, http=True) as server:
        admin = await wire.connect(server.port, token=ADMIN)
        await admin.call(CreateNode("n"))
        # The bystander: a lock on its own node, with a recovery window of 3 s.
        calm = await wire.connect(server.port, token=CALM)
        await calm.call(CreateNode("calm"))
        bystander = (await calm.call(CreateSession("calm", b"c", timeout=3.0))).session_id
        held = await calm.call(Acquire(bystander, "lock", MAX_COUNT, 1, ephemeral=True))
        pinging = asyncio.ensure_future(_keep_pinging(calm))
        try:
            # A read-only token: 100 prefix watches on the admin's node, no more.
            reader_refusals: list[Failure] = []
            for _ in range(SESSIONS):
                reader = await wire.connect(server.port, token=READER)
                sid = (await reader.call(CreateSession("n", b"r", timeout=300.0))).session_id
                reader_refusals += await _arm_all(reader, sid, READER_ASKS)
                await reader.close()  # (detached: its firings wait in the server)
            assert len(reader_refusals) == SESSIONS * READER_ASKS - 100
            for refused in reader_refusals:
                assert refused.code is ErrorCode.LIMIT_EXCEEDED, refused
                assert "token 'reader' is over its quota prefix_watches (100)" in refused.message
            # A node-scoped token with no quota table, on its own node: PER_NODE at most.
            batch = await wire.connect(server.port, token=BATCH)
            await batch.call(CreateNode("jobs-1"))
            batch_refusals: list[Failure] = []
            for _ in range(SESSIONS):
                watcher = await wire.connect(server.port, token=BATCH)
                sid = (await watcher.call(CreateSession("jobs-1", b"b"))).session_id
                batch_refusals += await _arm_all(watcher, sid, BATCH_ASKS)
                await watcher.close()
            assert len(batch_refusals) == SESSIONS * BATCH_ASKS - PER_NODE
            for refused in batch_refusals:
                assert refused.code is ErrorCode.LIMIT_EXCEEDED, refused
                assert (
                    f"max_prefix_watches_per_node ({PER_NODE}) reached on node 'jobs-1'"
                    in refused.message
                )
            # The watched nodes change, each change firing every armed watch into
            # its detached session's queue (one firing kept per watch).
            writer = (await batch.call(CreateSession("jobs-1", b"w"))).session_id
            worker = (await admin.call(CreateSession("n", b"a"))).session_id
            for i in range(20):
                await batch.call(CreateSemaphore(writer, f"job{i}", 1, b"x"))
                await batch.call(DeleteSemaphore(writer, f"job{i}"))
                await admin.call(Acquire(worker, "m", MAX_COUNT, i + 1, ephemeral=True))
                assert await admin.call(Release(worker, "m"))
        finally:
            pinging.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pinging
        # The bystander kept its lock, and its mutex still answers.
        described = await calm.call(DescribeSemaphore(bystander, "lock", owners=True))
        assert [owner.session_id for owner in described.description.owners] == [bystander]
        assert await calm.call(Release(bystander, "lock"))
        again = await calm.call(Acquire(bystander, "lock", MAX_COUNT, 2, ephemeral=True))
        assert again.token > held.token
        samples = await server.metrics()
        refusals = "tenure_quota_refusals_total"
        assert value(samples, refusals, quota="prefix_watches", token="reader") == len(
            reader_refusals
        )
        assert value(samples, refusals, quota="max_prefix_watches_per_node", token="batch") == len(
            batch_refusals
        )
