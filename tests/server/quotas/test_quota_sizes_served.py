"""Names, identities and keys pay their token's data_bytes on a real ``tenure serve``
(issue 47).

The abuse: a token with a 64 KiB data quota made empty semaphores with 1 KiB names,
and sessions with 1 KiB descriptions, client names and hosts and 256-byte keys:
none of it was data, so none of it counted, and the server's RSS grew three times
what its memory budget's estimate said. Now each is counted where it is made (and
kept counted across a restart: the journal replays the same counts), the token is
refused at its quota, and another token is not affected.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tenure._core import CreateNode, CreateSemaphore, CreateSession
from tenure._core.values import ClientIdentity
from tenure._protocol import Failure
from tenure.errors import ErrorCode

from ..tenants import TenantServer, token, write_auth_file
from ..wire import Clients

pytestmark = pytest.mark.timeout(120)

ADMIN, HOSTILE = "admin-secret", "hostile-secret"
KIB = 1024
QUOTA = 64 * KIB


def _limit(failure: Failure) -> None:
    assert failure.code is ErrorCode.LIMIT_EXCEEDED, failure
    assert "token 'hostile' is over its quota data_bytes " in failure.message, failure.message


def _name(i: int) -> str:
    """A 1 KiB semaphore name (the longest there may be)."""
    return f"{i:04d}" + "s" * (KIB - 4)


async def test_1_kib_names_and_identities_stop_at_the_tokens_data_quota(
    tmp_path: Path, wire: Clients
) -> None:
    hostile_token = token("hostile", HOSTILE, quota={"data_bytes": QUOTA})
    auth_file = write_auth_file(tmp_path, token("admin", ADMIN), hostile_token)
    with TenantServer(tmp_path, auth_file) as server:
        admin = await wire.connect(server.port, token=ADMIN)
        await admin.call(CreateNode("n"))
        hostile = await wire.connect(server.port, token=HOSTILE)
        sid = (await hostile.call(CreateSession("n", b"k"))).session_id  # (its key: 1 byte)
        made = 0
        for i in range(200):  # (200 KiB of names: three times its quota)
            answer = await hostile.answer(hostile.send(CreateSemaphore(sid, _name(i), 1, b"")))
            if isinstance(answer, Failure):
                _limit(answer)
                break
            made += 1
        assert made == 63  # 63 KiB of names and a 1-byte key; a 64th would pass 64 KiB
        # So is a session of a 256-byte key and a 1,000-byte identity (host, client name).
        big = ClientIdentity("h" * 500, 1, "c" * 500)
        _limit(
            await hostile.fail(CreateSession("n", b"k" * 256, description="d" * 100, identity=big))
        )
        # Another token is not affected.
        opened = CreateSession("n", b"k" * 256, description="d" * KIB, identity=big)
        other = (await admin.call(opened)).session_id
        for i in range(100):
            await admin.call(CreateSemaphore(other, "o" + _name(i)[1:], 1, b""))
    # A restart replays the journal: the names count again, and the next is refused.
    with TenantServer(tmp_path, auth_file) as server:
        hostile = await wire.connect(server.port, token=HOSTILE)
        again = (await hostile.call(CreateSession("n", b"k2"))).session_id  # (2 bytes more)
        _limit(await hostile.fail(CreateSemaphore(again, _name(made), 1, b"")))
        admin = await wire.connect(server.port, token=ADMIN)
        mine = (await admin.call(CreateSession("n", b"k"))).session_id
        await admin.call(CreateSemaphore(mine, _name(made), 1, b""))
