"""What the redis:// tests that read Redis's keys share: a node of the test's own
under a key prefix of its own, a plain Redis client beside it, and the store behind
a session (to call the functions as the client would)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TypeVar

import redis.asyncio as aioredis

import tenure
from tenure.backends._base import CoreSession
from tenure.backends._session import StoreSession
from tenure.backends.redis import node_base
from tenure.backends.redis._store import RedisStore
from tests.redis.server import RedisServer


@dataclass
class Place:
    """A key prefix of the test's own on the run's Redis, node ``n`` made there (a
    test module adds its readers of the keys in a subclass)."""

    url: str
    #: Node n's key prefix (every key of the node starts with it).
    keys: str
    #: A plain Redis client, to read what the functions stored.
    admin: aioredis.Redis


P = TypeVar("P", bound=Place)


@asynccontextmanager
async def node_place(redis_server: RedisServer, kind: type[P]) -> AsyncIterator[P]:
    """Node n under a key prefix of its own (a ``kind`` of :class:`Place` over it)."""
    prefix = f"test-{uuid.uuid4().hex[:12]}:"
    url = f"{redis_server.url(0)}?prefix={prefix}"
    admin = aioredis.Redis(port=redis_server.port)
    try:
        async with tenure.connect(url) as client:
            await client.create_node("n")
        yield kind(url, node_base(prefix, "n"), admin)
    finally:
        await admin.aclose()


def store_of(session: tenure.Session | CoreSession) -> RedisStore:
    """The RedisStore under ``session`` (a client's, or the backend's own)."""
    inner = session._backend if isinstance(session, tenure.Session) else session
    assert isinstance(inner, StoreSession)
    assert isinstance(inner.store, RedisStore)
    return inner.store
