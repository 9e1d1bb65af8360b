"""Quotas per token on a real ``tenure serve --auth-file``: the abuses of issue 37.

Each refusal is LIMIT_EXCEEDED naming the quota and the token; other tokens go on
as before; the counts survive a restart (the journal keeps who owns what); the
refusals are counted in ``tenure_quota_refusals_total``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tenure._core import (
    Acquire,
    CloseSession,
    Command,
    CreateNode,
    CreateSemaphore,
    CreateSession,
    DeleteSemaphore,
    DescribeSemaphore,
    DetachSession,
    Release,
    Renew,
)
from tenure._protocol import Failure
from tenure._protocol.cluster import ClusterStatus
from tenure.errors import ErrorCode

from ..http import value
from ..tenants import TenantServer, token, write_auth_file
from ..wire import Clients, ServerProcess, WireClient

pytestmark = pytest.mark.timeout(120)

ADMIN, READER, BATCH, SLOW = "admin-secret", "reader-secret", "batch-secret", "slow-secret"
DAY = 86400.0
KIB64 = b"x" * 65536


@pytest.fixture
def auth_file(tmp_path: Path) -> Path:
    return write_auth_file(
        tmp_path,
        token("admin", ADMIN),
        token("reader", READER, "read-only"),
        token("batch", BATCH, nodes=["jobs-*"], quota={"data_bytes": 1048576, "semaphores": 1000}),
        token("slow", SLOW, quota={"requests_per_second": 0.01}),
    )


def _limit(failure: Failure, quota: str, token: str) -> None:
    assert failure.code is ErrorCode.LIMIT_EXCEEDED, failure
    assert f"token {token!r} is over its quota {quota} " in failure.message, failure.message


async def _until_refused(
    client: WireClient, commands: Iterator[Command[Any]]
) -> tuple[int, Failure]:
    """Send ``commands`` until one fails: (how many succeeded before, its Failure)."""
    for done, command in enumerate(commands):
        answer = await client.answer(client.send(command))
        if isinstance(answer, Failure):
            return done, answer
    raise AssertionError("every command succeeded")


async def test_a_read_only_token_cannot_lock_writers_out_for_a_day(
    tmp_path: Path, wire: Clients, auth_file: Path
) -> None:
    """The abuse: a read-only token opening 10,000 sessions of 24 h windows."""
    with TenantServer(tmp_path, auth_file, http=True) as server:
        admin = await wire.connect(server.port, token=ADMIN)
        await admin.call(CreateNode("n"))
        reader = await wire.connect(server.port, token=READER)
        day = await reader.fail(CreateSession("n", b"k", timeout=DAY))
        _limit(day, "recovery_window", "reader")
        assert "(300 s): it asked 86400 s" in day.message
        sessions = (CreateSession("n", b"k", timeout=300.0) for _ in range(10_000))
        opened, refused = await _until_refused(reader, sessions)
        assert opened == 100
        _limit(refused, "sessions", "reader")
        # Writers are not locked out, nor is anybody else; the reader's sessions work.
        writer = (await admin.call(CreateSession("n", b"w", timeout=DAY))).session_id
        assert (await admin.call(Acquire(writer, "m", 1, 1, ephemeral=True))).token
        samples = await server.metrics()
        quota_refusals = "tenure_quota_refusals_total"
        assert value(samples, quota_refusals, quota="sessions", token="reader") == 1
        assert value(samples, quota_refusals, quota="recovery_window", token="reader") == 1
    # The sessions survive a restart, and so does their count: still 100.
    with TenantServer(tmp_path, auth_file) as server:
        reader = await wire.connect(server.port, token=READER)
        _limit(await reader.fail(CreateSession("n", b"k")), "sessions", "reader")
        admin = await wire.connect(server.port, token=ADMIN)
        await admin.call(CreateSession("n", b"w"))


async def test_a_write_token_cannot_fill_the_server_with_data(
    tmp_path: Path, wire: Clients, auth_file: Path
) -> None:
    """The abuse: 14,000 semaphores of 64 KiB by a token limited to jobs-*."""
    with TenantServer(tmp_path, auth_file) as server:
        batch = await wire.connect(server.port, token=BATCH)
        await batch.call(CreateNode("jobs-1"))
        sid = (await batch.call(CreateSession("jobs-1", b"k"))).session_id
        fills = (CreateSemaphore(sid, f"s{i}", 1, KIB64) for i in range(14_000))
        made, refused = await _until_refused(batch, fills)
        # 1 MiB, its data_bytes quota, is 16 x 64 KiB: with their names, its node's name
        # and its session's key (what it chose the size of counts too), 15 fit.
        assert made == 15
        _limit(refused, "data_bytes", "batch")
        # Its own deletes give room back; others' writes never counted against it.
        await batch.call(DeleteSemaphore(sid, "s0"))
        await batch.call(CreateSemaphore(sid, "again", 1, KIB64))
        admin = await wire.connect(server.port, token=ADMIN)
        await admin.call(CreateNode("other"))
        other = (await admin.call(CreateSession("other", b"k"))).session_id
        for i in range(20):  # (more than batch's quota: admin has none)
            await admin.call(CreateSemaphore(other, f"big{i}", 1, KIB64))
    with TenantServer(tmp_path, auth_file) as server:
        batch = await wire.connect(server.port, token=BATCH)
        sid = (await batch.call(CreateSession("jobs-1", b"k2"))).session_id
        _limit(await batch.fail(CreateSemaphore(sid, "more", 1, KIB64)), "data_bytes", "batch")


async def test_the_memory_budget_refuses_writes_and_lets_the_rest_work(
    tmp_path: Path, wire: Clients
) -> None:
    """Without an auth file too: past --memory-budget, what adds state is refused."""
    with ServerProcess(tmp_path / "data", "--memory-budget", "2000000") as server:
        client = await wire.connect(server.port)
        await client.call(CreateNode("n"))
        sid = (await client.call(CreateSession("n", b"k"))).session_id
        await client.call(CreateSemaphore(sid, "held", 1, b""))
        assert (await client.call(Acquire(sid, "held", 1, 1, lease_ttl=60.0))).token
        fills = (CreateSemaphore(sid, f"s{i}", 1, KIB64) for i in range(14_000))
        made, answer = await _until_refused(client, fills)
        assert 20 < made < 31, made  # (2 MB at most, with the state there was before)
        assert answer.code is ErrorCode.LIMIT_EXCEEDED
        assert "the server's memory budget (2000000 bytes) is used up" in answer.message
        # Filled to the brim with small ones, no session fits either.
        small = (CreateSemaphore(sid, f"t{i}", 1, b"") for i in range(14_000))
        await _until_refused(client, small)
        refused = await client.fail(CreateSession("n", b"k2"))
        assert "memory budget" in refused.message
        # Reads, renewals, releases, detaches, closes and deletes keep working.
        assert (await client.call(DescribeSemaphore(sid, "s0"))).description.data == KIB64
        await client.call(Renew(sid, "held", 60.0))
        assert await client.call(Release(sid, "held"))
        await client.call(DeleteSemaphore(sid, "s0"))
        await client.call(DeleteSemaphore(sid, "s1"))
        other = await wire.connect(server.port)
        second = (await other.call(CreateSession("n", b"k3"))).session_id  # room again
        await other.call(CloseSession(second))
        await client.call(DetachSession(sid))


async def test_requests_per_second_is_a_token_bucket_per_token(
    tmp_path: Path, wire: Clients, auth_file: Path
) -> None:
    with TenantServer(tmp_path, auth_file) as server:
        slow = await wire.connect(server.port, token=SLOW)
        await slow.call(CreateNode("n"))  # its burst: one command (0.01 a second)
        _limit(await slow.fail(CreateNode("m")), "requests_per_second", "slow")
        # Its other connections share the bucket; other tokens have their own.
        again = await wire.connect(server.port, token=SLOW)
        _limit(await again.fail(CreateNode("m")), "requests_per_second", "slow")
        admin = await wire.connect(server.port, token=ADMIN)
        for name in ("a", "b", "c"):
            await admin.call(CreateNode(name))


async def test_every_native_request_counts_once_and_a_ping_never(
    tmp_path: Path, wire: Clients, auth_file: Path
) -> None:
    """Issue 47: the rate is counted per request, on every face. A native request is one
    (ClusterStatus too, which the server answers itself: it was not counted); a Ping is
    a keepalive, never counted (refusing it would end an honest session)."""
    with TenantServer(tmp_path, auth_file) as server:
        slow = await wire.connect(server.port, token=SLOW)
        for nonce in range(1, 51):  # pings take nothing of its burst of one
            assert (await slow.ping(nonce)).nonce == nonce
        await slow.call(CreateNode("n"))  # its burst: one request (0.01 a second)
        _limit(await slow.fail(ClusterStatus()), "requests_per_second", "slow")
        assert (await slow.ping(51)).nonce == 51  # and pings still go when it is spent
