"""Fixtures of the tenure:// tests: a client behind the fault proxy, and one direct."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

import tenure
from tests.netproxy import NetProxy
from tests.server.wire import ServerProcess


@pytest.fixture
async def client(proxy: NetProxy) -> AsyncIterator[tenure.Client]:
    """A client that reaches ``tenure_server`` through ``proxy``; node ``n`` exists."""
    async with tenure.connect(f"tenure://127.0.0.1:{proxy.port}") as client:
        await client.create_node("n")
        yield client


@pytest.fixture
async def direct(
    tenure_server: ServerProcess, client: tenure.Client
) -> AsyncIterator[tenure.Client]:
    """A client of ``tenure_server`` that no fault reaches (made after ``client``)."""
    async with tenure.connect(f"tenure://127.0.0.1:{tenure_server.port}") as direct:
        yield direct
