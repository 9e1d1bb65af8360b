"""The redis:// backend's own tests: the run's shared Redis, a key prefix per test."""

from __future__ import annotations

import uuid

import pytest

from tests.redis.server import RedisServer


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """A URL with a key prefix of its own (tests do not meet)."""
    return f"{redis_server.url(0)}?prefix=test-{uuid.uuid4().hex[:12]}:"
