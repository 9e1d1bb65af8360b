"""The client's listing and identity arguments: checked before anything is sent."""

from __future__ import annotations

import os

import pytest

import tenure
from tenure.client._listing import identity_of_this_process
from tenure.errors import InvalidArgumentError


@pytest.mark.parametrize("name", ["n" * 1025, "\ud800", b"bytes", 7])
def test_a_bad_client_name_is_refused_at_connect(name: object) -> None:
    with pytest.raises(InvalidArgumentError, match="client_name"):
        tenure.connect("memory://", client_name=name)  # type: ignore[arg-type]


def test_the_identity_is_this_host_and_process() -> None:
    identity = identity_of_this_process("worker")
    assert (identity.pid, identity.name) == (os.getpid(), "worker")
    assert 0 < len(identity.host.encode("utf-8")) <= 1024


async def test_listing_arguments_are_checked() -> None:
    async with tenure.connect("memory://", client_name="ops") as client:
        assert client.identity.name == "ops"
        await client.create_node("n")
        for bad in (-1, "1", 1.0, True):
            with pytest.raises(InvalidArgumentError, match="session_id"):
                await client.kill_session("n", bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError, match="prefix"):
            await client.list_semaphores("n", prefix=None)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError, match="node name"):
            await client.list_sessions("")
        assert await client.list_semaphores("n") == []
        assert await client.list_sessions("n") == []
