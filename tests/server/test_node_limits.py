"""A real ``tenure serve``: --max-nodes and the --max-node-* ceilings, enforced and named."""

from __future__ import annotations

from pathlib import Path

import pytest

from tenure._core import AlterNode, CreateNode, NodeConfig
from tenure.errors import ErrorCode

from .wire import Clients, ServerProcess

pytestmark = pytest.mark.timeout(60)


async def test_max_nodes_and_the_node_ceilings_are_the_servers_settings(
    tmp_path: Path, wire: Clients
) -> None:
    flags = ("--max-nodes", "2", "--max-node-semaphores", "50")
    with ServerProcess(tmp_path / "data", *flags) as server:
        client = await wire.connect(server.port)
        failure = await client.fail(CreateNode("a", NodeConfig(max_semaphores=51)))
        assert failure.code is ErrorCode.LIMIT_EXCEEDED
        assert "max_semaphores (51)" in failure.message
        assert "--max-node-semaphores" in failure.message
        huge = await client.fail(CreateNode("a", NodeConfig(max_semaphores=50, max_waiters=2**63)))
        assert huge.code is ErrorCode.LIMIT_EXCEEDED
        assert "--max-node-waiters" in huge.message
        await client.call(CreateNode("a", NodeConfig(max_semaphores=50)))
        over = await client.fail(AlterNode("a", {"max_semaphores": 1_000}))
        assert over.code is ErrorCode.LIMIT_EXCEEDED
        await client.call(CreateNode("b", NodeConfig(max_semaphores=50)))
        full = await client.fail(CreateNode("c", NodeConfig(max_semaphores=50)))
        assert full.code is ErrorCode.LIMIT_EXCEEDED
        assert "max_nodes (2)" in full.message
    # After a restart with room for more, what was there replays and more may come.
    with ServerProcess(tmp_path / "data", "--max-nodes", "3") as server:
        client = await wire.connect(server.port)
        await client.call(CreateNode("c", NodeConfig(max_semaphores=1_000)))
