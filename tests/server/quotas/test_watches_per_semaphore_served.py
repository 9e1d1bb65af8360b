"""Watches on one name on a real ``tenure serve --auth-file`` (issue 47, round two).

Every watch on a semaphore name fires on each change of it, in the step of whoever
changes it: a read-only token could arm its whole ``watches`` quota (10,000) of
repeating watches on an honest client's register, and each honest change then
fired them all. Now one token has at most ``--max-watches-per-semaphore`` (1,000;
40 here) on one name, whatever its sessions; counted per token, the reader's never
use up the owner's room. Counted in the answers, the pushes and
``tenure_quota_refusals_total``, never timed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tenure._core import (
    CreateNode,
    CreateSemaphore,
    CreateSession,
    DescribeSemaphore,
    UpdateSemaphore,
    WatchFired,
)
from tenure._protocol import Failure
from tenure.errors import ErrorCode

from ..http import value
from ..tenants import TenantServer, token, write_auth_file
from ..wire import Clients, WireClient

pytestmark = pytest.mark.timeout(120)

ADMIN, READER = "admin-secret", "reader-secret"
#: The server's ``--max-watches-per-semaphore``.
PER_NAME = 40
#: The reader's sessions, each asking this many repeating watches of the register
#: (well within its ``watches`` quota and each session's max_watches_per_session).
SESSIONS, ASKS = 3, 30


async def _arm(client: WireClient, sid: int, name: str, asked: int) -> list[Failure]:
    """Ask ``asked`` repeating watches of ``name`` (sent at once, then read): the refusals."""
    sent = [
        client.send(DescribeSemaphore(sid, name, watch_data=True, watch_repeat=True))
        for _ in range(asked)
    ]
    answers = [await client.answer(request) for request in sent]
    return [answer for answer in answers if isinstance(answer, Failure)]


async def test_a_token_s_watches_on_another_s_register_are_bounded(
    tmp_path: Path, wire: Clients
) -> None:
    auth_file = write_auth_file(
        tmp_path, token("admin", ADMIN), token("reader", READER, "read-only")
    )
    flags = ("--max-watches-per-semaphore", str(PER_NAME))
    with TenantServer(tmp_path, auth_file, *flags, http=True) as server:
        admin = await wire.connect(server.port, token=ADMIN)
        await admin.call(CreateNode("n"))
        owner = (await admin.call(CreateSession("n", b"a"))).session_id
        await admin.call(CreateSemaphore(owner, "config", 1, b"v0"))
        readers: list[tuple[WireClient, int, int]] = []  # (client, session, watches armed)
        refusals: list[Failure] = []
        for _ in range(SESSIONS):
            reader = await wire.connect(server.port, token=READER)
            sid = (await reader.call(CreateSession("n", b"r"))).session_id
            theirs = await _arm(reader, sid, "config", ASKS)
            refusals += theirs
            readers.append((reader, sid, ASKS - len(theirs)))
        assert len(refusals) == SESSIONS * ASKS - PER_NAME
        for refused in refusals:
            assert refused.code is ErrorCode.LIMIT_EXCEEDED, refused
            assert (
                f"max_watches_per_semaphore ({PER_NAME}) reached on 'config' of node 'n' "
                "for token 'reader'" in refused.message
            ), refused.message
        # The reader's room on another name is whole; the owner's on this one too.
        reader, sid, _ = readers[0]
        assert not await _arm(reader, sid, "other", 1)
        assert not await _arm(admin, owner, "config", 1)
        # An honest change fires the reader's PER_NAME watches: each session's own.
        for reader, _, _ in readers:
            reader.pushes.clear()
        await admin.call(UpdateSemaphore(owner, "config", b"v1"))
        for reader, _, armed in readers:
            firings = [await reader.next_push() for _ in range(armed)]
            assert all(type(firing) is WatchFired for firing in firings), firings
            assert {firing.name for firing in firings} <= {"config"}
        samples = await server.metrics()
        refusals_seen = value(
            samples,
            "tenure_quota_refusals_total",
            quota="max_watches_per_semaphore",
            token="reader",
        )
        assert refusals_seen == len(refusals)
