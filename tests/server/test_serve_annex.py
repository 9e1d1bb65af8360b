"""A node's annex through a real ``tenure serve``: over the wire, and across a kill -9."""

from __future__ import annotations

from pathlib import Path

import pytest

from tenure._core import CreateNode, DescribeNode, DropNode, GetNodeAnnex, SetNodeAnnex
from tenure._core.values import MAX_ANNEX_BYTES
from tenure.errors import ErrorCode

from .wire import Clients, ServerProcess

pytestmark = pytest.mark.timeout(60)

SETTINGS = bytes(range(256)) * 3  # opaque: every byte value, as a face may store


async def test_an_annex_set_over_the_wire_survives_a_kill_9(tmp_path: Path, wire: Clients) -> None:
    data = tmp_path / "data"
    with ServerProcess(data) as server:
        client = await wire.connect(server.port)
        await client.call(CreateNode("app"))
        await client.call(CreateNode("other"))
        assert await client.call(GetNodeAnnex("app", "ydb")) == b""
        assert await client.call(SetNodeAnnex("app", "ydb", SETTINGS)) is None
        assert await client.call(SetNodeAnnex("app", "gone", b"x")) is None
        assert await client.call(SetNodeAnnex("app", "gone", b"")) is None
        assert await client.call(SetNodeAnnex("other", "ydb", b"o")) is None
        assert await client.call(DropNode("other")) is None  # its annex goes with it
        assert await client.call(CreateNode("other")) is None
        assert await client.call(GetNodeAnnex("app", "ydb")) == SETTINGS
        server.kill()  # SIGKILL right after the answers: only what was acknowledged
    with ServerProcess(data) as server:
        client = await wire.connect(server.port)
        assert await client.call(GetNodeAnnex("app", "ydb")) == SETTINGS
        assert await client.call(GetNodeAnnex("app", "gone")) == b""
        assert await client.call(GetNodeAnnex("other", "ydb")) == b""
        assert (await client.call(DescribeNode("app"))).name == "app"
        assert await client.call(SetNodeAnnex("app", "ydb", b"v2")) is None
        server.kill()
    with ServerProcess(data) as server:  # a second restart replays the first's record too
        client = await wire.connect(server.port)
        assert await client.call(GetNodeAnnex("app", "ydb")) == b"v2"


async def test_bad_annex_requests_fail_with_their_codes_and_the_connection_serves_on(
    tmp_path: Path, wire: Clients
) -> None:
    with ServerProcess(tmp_path / "data") as server:
        client = await wire.connect(server.port)
        await client.call(CreateNode("app"))
        for command, code in (
            (SetNodeAnnex("missing", "k", b"v"), ErrorCode.NOT_FOUND),
            (GetNodeAnnex("missing", "k"), ErrorCode.NOT_FOUND),
            (SetNodeAnnex("app", "", b"v"), ErrorCode.INVALID_ARGUMENT),
            (GetNodeAnnex("app", "k" * 65), ErrorCode.INVALID_ARGUMENT),
            (SetNodeAnnex("app", "k", b"x" * (MAX_ANNEX_BYTES + 1)), ErrorCode.LIMIT_EXCEEDED),
        ):
            failure = await client.fail(command)
            assert failure.code is code, (command, failure)
        assert await client.call(GetNodeAnnex("app", "k")) == b""
