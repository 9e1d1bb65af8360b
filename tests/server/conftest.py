"""Fixtures of the server tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from .wire import BOUND, Clients


@pytest.fixture
async def wire() -> AsyncIterator[Clients]:
    """Raw protocol clients of real servers; every connection is closed at teardown."""
    clients = Clients()
    try:
        yield clients
    finally:
        await clients.close_all()


@pytest.fixture(autouse=True)
def close_bound() -> Iterator[None]:
    """Close the listening sockets a test bound for its servers (``wire.bound``)."""
    try:
        yield
    finally:
        while BOUND:
            BOUND.pop().close()
