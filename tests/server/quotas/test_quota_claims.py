"""Claims pay their token's data_bytes quota on a real ``tenure serve`` (issue 47).

The abuse: a token with a 1 MiB data quota wrote ended claims' records into small
semaphores of its own (any writer may: CreateSemaphore), then claimed each with
64 KiB of owner data. A claim of such a semaphore was checked against nothing, and
each record stores its data in hex (128 KiB): the server's estimate went far past
the token's quota and past ``--memory-budget``, and then every other tenant's
state-adding request was refused.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tenure._core import (
    Acquire,
    ClaimName,
    ClaimRecord,
    CreateNode,
    CreateSemaphore,
    CreateSession,
)
from tenure._core.claims import claim_data
from tenure._protocol import Failure
from tenure.errors import ErrorCode

from ..http import value
from ..tenants import TenantServer, token, write_auth_file
from ..wire import Clients

pytestmark = pytest.mark.timeout(120)

ADMIN, HOSTILE = "admin-secret", "hostile-secret"
QUOTA = 1_048_576
BUDGET = 3_000_000
KIB64 = b"x" * 65536
ESTIMATE = "tenure_state_estimate_bytes"


async def test_claims_of_ended_claims_semaphores_stop_at_the_claimers_quota(
    tmp_path: Path, wire: Clients
) -> None:
    hostile_token = token("hostile", HOSTILE, quota={"data_bytes": QUOTA})
    auth_file = write_auth_file(tmp_path, token("admin", ADMIN), hostile_token)
    with TenantServer(tmp_path, auth_file, "--memory-budget", str(BUDGET), http=True) as server:
        admin = await wire.connect(server.port, token=ADMIN)
        await admin.call(CreateNode("n"))
        hostile = await wire.connect(server.port, token=HOSTILE)
        sid = (await hostile.call(CreateSession("n", b"k"))).session_id
        ended = claim_data(ClaimRecord("f" * 32, 1, 1.0, 1.0, 2.0, None, sid, b""))
        for i in range(40):  # 40 x about 100 bytes: well within its quota
            await hostile.call(CreateSemaphore(sid, f"slot{i}", 1, ended))
        before = value(await server.metrics(), ESTIMATE)
        granted, refusals = 0, []
        for i in range(40):  # each would store 128 KiB and the words: 5 MB in all
            answer = await hostile.answer(
                hostile.send(ClaimName(sid, f"slot{i}", f"{i:032x}", 60.0, 3600.0, KIB64))
            )
            if isinstance(answer, Failure):
                refusals.append(answer)
            else:
                assert isinstance(answer.value, ClaimRecord), answer
                assert answer.value.id == f"{i:032x}"
                granted += 1
        # Each stores more than twice its 64 KiB: fewer than 8 fit in 1 MiB.
        assert 0 < granted < QUOTA // (2 * len(KIB64)), granted
        assert len(refusals) == 40 - granted
        for refused in refusals:
            assert refused.code is ErrorCode.LIMIT_EXCEEDED, refused
            assert "token 'hostile' is over its quota data_bytes " in refused.message
        samples = await server.metrics()
        assert value(samples, ESTIMATE) - before <= QUOTA
        assert value(samples, "tenure_quota_refusals_total", quota="data_bytes", token="hostile")
        # A bystander still adds state: a session, a semaphore with data, a hold.
        other = (await admin.call(CreateSession("n", b"a"))).session_id
        await admin.call(CreateSemaphore(other, "mine", 1, KIB64))
        assert (await admin.call(Acquire(other, "mine", 1, 1))).token
        assert (await admin.call(Acquire(other, "lock", 1, 2, ephemeral=True))).token
        assert value(await server.metrics(), ESTIMATE) <= BUDGET
