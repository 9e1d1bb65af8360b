"""Fixtures of the server tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from .wire import Clients


@pytest.fixture
async def wire() -> AsyncIterator[Clients]:
    """Raw protocol clients of real servers; every connection is closed at teardown."""
    clients = Clients()
    try:
        yield clients
    finally:
        await clients.close_all()
