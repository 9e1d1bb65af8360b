"""postgres:// tests run on the shared PostgreSQL server (tests/postgres), a schema each."""

from __future__ import annotations

import uuid

import pytest

from tests.postgres.server import PostgresServer


@pytest.fixture
def pg_url(postgres_server: PostgresServer) -> str:
    """A URL with a schema of its own on the shared server (tests do not meet)."""
    return postgres_server.url(schema=f"t_{uuid.uuid4().hex[:12]}", pool_size="4")
