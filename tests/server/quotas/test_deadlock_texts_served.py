"""Deadlock texts stay small on a real ``tenure serve`` (issue 47).

The abuse: a token built a cycle of 300 tasks waiting on mutexes of 1 KiB names and
closed it eight times. Each refusal's text named the whole cycle (300 KiB), the
node kept the latest eight, and its description (2.5 MB) passed a client's frame
limit: describing the node failed for every token, the admin's included, until the
node was dropped or the server restarted. Now a cycle's text names its first waits,
each name cut, and how many more there are.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tenure._core import (
    MAX_COUNT,
    Acquire,
    CreateNode,
    CreateSession,
    DescribeNode,
    NodeConfig,
    NodeDescription,
)
from tenure._core.limits import MAX_DEADLOCKS_SHOWN
from tenure.errors import ErrorCode

from ..tenants import TenantServer, token, write_auth_file
from ..wire import Clients

pytestmark = pytest.mark.timeout(120)

ADMIN, HOSTILE = "admin-secret", "hostile-secret"
LINKS = 300


def _name(i: int) -> str:
    """A 1 KiB mutex name (the longest there may be)."""
    return f"{i:04d}" + "m" * 1020


def _lock(sid: int, i: int, request_id: int) -> Acquire:
    return Acquire(sid, _name(i), MAX_COUNT, request_id, ephemeral=True, task=1)


async def test_a_long_cycle_of_long_names_leaves_the_node_describable(
    tmp_path: Path, wire: Clients
) -> None:
    auth_file = write_auth_file(tmp_path, token("admin", ADMIN), token("hostile", HOSTILE))
    with TenantServer(tmp_path, auth_file) as server:
        admin = await wire.connect(server.port, token=ADMIN)
        await admin.call(CreateNode("n", NodeConfig(max_sessions=LINKS + 10)))
        hostile = await wire.connect(server.port, token=HOSTILE)
        sids = [(await hostile.call(CreateSession("n", b"k"))).session_id for _ in range(LINKS)]
        for i, sid in enumerate(sids):  # each holds its mutex...
            await hostile.call(_lock(sid, i, i + 1))
        for i, sid in enumerate(sids[:-1]):  # ...and waits for the next one's
            await hostile.call(_lock(sid, i + 1, LINKS + i + 1))
        refusals = [
            await hostile.fail(_lock(sids[-1], 0, 10 * LINKS + attempt))
            for attempt in range(MAX_DEADLOCKS_SHOWN)
        ]
        # Another token describes the node: its answer fits a frame.
        described = await admin.call(DescribeNode("n"))
        assert isinstance(described, NodeDescription)
        kept = described.deadlocks
        assert len(kept) == MAX_DEADLOCKS_SHOWN
        assert sum(len(d.cycle.encode()) for d in kept) <= MAX_DEADLOCKS_SHOWN * 1536
        for refused in refusals:
            assert refused.code is ErrorCode.DEADLOCK, refused
            assert len(refused.message.encode()) <= 1536
            assert refused.message.endswith(f"a cycle of {LINKS}")
