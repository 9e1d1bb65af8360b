"""postgres://: URLs, refusals, capabilities, the schema, and other clients' changes."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import uuid
from typing import Any

import psycopg
import pytest

import tenure
from tenure.backends import Capability
from tenure.backends.postgres import PgBackend
from tenure.backends.postgres._ddl import SCHEMA_VERSION
from tenure.backends.postgres._migrate import digest, schema_version
from tenure.backends.postgres._url import parse_url
from tenure.errors import (
    InvalidArgumentError,
    LeaseLostError,
    LimitExceededError,
    NotFoundError,
    PermissionDeniedError,
    PreconditionFailedError,
    SessionClosedError,
    UnavailableError,
    UnsupportedError,
)
from tests.postgres.server import PostgresServer


def _backend(client: tenure.Client) -> PgBackend:
    backend = client.backend
    assert isinstance(backend, PgBackend)
    return backend


@pytest.mark.parametrize(
    ("url", "match"),
    [
        ("postgres://h/db?nope=1", "unknown postgres:// option"),
        ("postgres://h/db?schema=Bad-Name", "schema must be"),
        ("postgres://h/db?schema=", "schema must be"),
        ("postgres://h/db?pool_size=0", "pool_size"),
        ("postgres://h/db?pool_size=x", "pool_size"),
        ("postgres://h/db?connect_timeout=-1", "connect_timeout"),
        ("postgres://h/db?request_timeout=abc", "request_timeout"),
        ("postgres:///db", "needs a host"),
    ],
)
async def test_bad_urls_are_refused_by_name(url: str, match: str) -> None:
    with pytest.raises(InvalidArgumentError, match=match):
        await tenure.connect(url)


def test_a_url_passes_libpq_settings_through_and_keeps_its_own() -> None:
    parsed = parse_url(
        "postgresql://u:p@h:5433/db?schema=s1&sslmode=require&pool_size=3", {"pool_size": 5}
    )
    assert (parsed.schema, parsed.pool_size) == ("s1", 5)  # keywords win over the query
    assert "sslmode=require" in parsed.conninfo
    assert "schema" not in parsed.conninfo
    assert "pool_size" not in parsed.conninfo
    assert parsed.conninfo.startswith("postgresql://u:p@h:5433/db?")
    assert "keepalives_idle=10" in parsed.conninfo  # the default, unless the URL says
    assert "keepalives_idle=3" in parse_url("postgres://h/db?keepalives_idle=3", {}).conninfo


async def test_an_unreachable_database_is_unavailable() -> None:
    with pytest.raises(UnavailableError, match="cannot connect to PostgreSQL"):
        await tenure.connect("postgres://tenure:x@127.0.0.1:1/tenure?connect_timeout=1")


async def test_capabilities_follow_the_servers_settings(pg_url: str) -> None:
    async with tenure.connect(pg_url) as client:
        # The test server runs with fsync and synchronous_commit on, and no standby.
        assert client.capabilities == {
            Capability.FENCING_TOKENS,
            Capability.FIFO,
            Capability.RATE_RESERVATION,
            Capability.WATCH,
            Capability.DURABLE,
            Capability.SESSION_RECOVERY,
            Capability.LOCK_DELAY,
            Capability.LEASE_TTL,
            Capability.ALL_OR_NONE,
            Capability.PREFIX_WATCH,
            Capability.CLAIMS,
            Capability.HANDOFF,
            Capability.MAX_HOLD,
        }
    with pytest.raises(UnsupportedError, match="replicated"):
        await tenure.connect(pg_url, require={Capability.REPLICATED})


async def test_a_lease_ttl_is_kept_alive_by_renewals(pg_url: str) -> None:
    async with tenure.connect(pg_url) as client, tenure.connect(pg_url) as other:
        await client.create_node("ttl", default_lease=1.5)
        await client.create_node("plain", lock_delay=0.5)
        session = await client.session("ttl")
        lease = await session.mutex("m").lock()
        assert lease._grant.lease_ttl == 1.5
        rival = await other.session("ttl")
        waiting = asyncio.ensure_future(rival.mutex("m").lock())
        await asyncio.sleep(3.2)  # over two TTLs: the client renewed it all along
        assert not waiting.done()
        assert not lease.lost.ended
        backend_session = _backend(client).sessions[session.id]
        assert await backend_session.acquirer.renew("m", lease._grant) == 1.5
        await lease.release()
        granted = await asyncio.wait_for(waiting, 5)
        assert granted.token > lease.token
        await granted.release()

        plain = await client.session("plain")
        untimed = await plain.mutex("m").lock()
        with pytest.raises(PreconditionFailedError, match="no lease TTL"):
            await _backend(client).sessions[plain.id].acquirer.renew("m", untimed._grant)


def test_the_schema_is_made_on_first_use_and_by_the_cli(
    postgres_server: PostgresServer,
) -> None:
    schema = f"t_{uuid.uuid4().hex[:12]}"
    url = postgres_server.url(schema=schema)
    result = subprocess.run(
        [sys.executable, "-m", "tenure", "migrate", url],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert f"schema {schema!r} is now at version {SCHEMA_VERSION}" in result.stdout
    again = subprocess.run(
        [sys.executable, "-m", "tenure", "migrate", url],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "was already at version" in again.stdout
    wrong = subprocess.run(
        [sys.executable, "-m", "tenure", "migrate", "etcd://127.0.0.1:2379"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert wrong.returncode == 2
    assert "only postgres://" in wrong.stderr


async def test_first_use_by_many_clients_at_once_makes_the_schema_once(
    postgres_server: PostgresServer,
) -> None:
    schema = f"t_{uuid.uuid4().hex[:12]}"
    url = postgres_server.url(schema=schema, pool_size="2")
    clients = await asyncio.gather(*(tenure.connect(url) for _ in range(4)))
    try:
        await clients[0].create_node("n")
        assert (await clients[3].describe_node("n")).name == "n"
    finally:
        for client in clients:
            await client.aclose()
    async with await psycopg.AsyncConnection.connect(postgres_server.dsn) as conn:
        assert await schema_version(conn, schema) == SCHEMA_VERSION
        # A newer schema than this client knows is refused, not downgraded.
        await conn.execute(f"UPDATE {schema}.meta SET version = 99")
        await conn.commit()
    with pytest.raises(UnsupportedError, match="newer"):
        await tenure.connect(url)


async def test_a_forced_delete_by_another_client_ends_the_holders_leases(pg_url: str) -> None:
    async with tenure.connect(pg_url) as holder, tenure.connect(pg_url) as admin:
        await holder.create_node("n")
        session = await holder.session("n")
        lease = await session.mutex("m").lock()
        other = await session.mutex("kept").lock()
        killer = await admin.session("n")
        waiter = asyncio.ensure_future(killer.mutex("m").lock())
        await asyncio.sleep(0.2)
        await killer.semaphore("m").delete(force=True)
        reason = await asyncio.wait_for(lease.lost.wait(), 5)
        assert isinstance(reason, LeaseLostError)
        with pytest.raises(NotFoundError, match="deleted"):
            await asyncio.wait_for(waiter, 5)
        assert not other.lost.ended  # another name's grant is untouched
        again = await session.mutex("m").lock()
        assert again.token > lease.token
        await asyncio.sleep(0.3)
        assert not again.lost.ended


async def test_a_node_dropped_by_another_client_closes_its_sessions(pg_url: str) -> None:
    async with tenure.connect(pg_url) as user, tenure.connect(pg_url) as admin:
        await admin.create_node("n")
        session = await user.session("n")
        lease = await session.mutex("m").lock()
        await admin.drop_node("n", force=True)
        reason = await asyncio.wait_for(session.lost.wait(), 5)
        assert isinstance(reason, SessionClosedError)
        assert lease.lost.ended


@pytest.mark.parametrize("limit", ["max_sessions", "max_semaphores"])
async def test_two_clients_racing_for_the_last_place_one_wins(pg_url: str, limit: str) -> None:
    async with tenure.connect(pg_url) as one, tenure.connect(pg_url) as two:
        settings: dict[str, Any] = {limit: 1}
        await one.create_node("n", **settings)
        for _ in range(5):  # several rounds: either may win each, never both
            results: tuple[object, ...]
            if limit == "max_sessions":
                results = await asyncio.gather(
                    one.session("n"), two.session("n"), return_exceptions=True
                )
            else:
                s1, s2 = await one.session("n"), await two.session("n")
                results = await asyncio.gather(
                    s1.semaphore("a").create(limit=1),
                    s2.semaphore("b").create(limit=1),
                    return_exceptions=True,
                )
            refused = [r for r in results if isinstance(r, LimitExceededError)]
            assert len(refused) == 1, results
            assert limit in str(refused[0])
            description = await one.describe_node("n")
            if limit == "max_sessions":
                assert description.sessions == 1
                for r in results:
                    if isinstance(r, tenure.Session):
                        await r.close()
            else:
                assert description.semaphores == 1
                for session, name in ((s1, "a"), (s2, "b")):
                    with contextlib.suppress(NotFoundError):
                        await session.semaphore(name).delete()
                await s1.close()
                await s2.close()


async def test_a_call_the_database_does_not_answer_in_request_timeout_is_unavailable(
    postgres_server: PostgresServer,
) -> None:
    schema = f"t_{uuid.uuid4().hex[:12]}"
    url = postgres_server.url(schema=schema, request_timeout="0.5")
    async with tenure.connect(url) as client:
        await client.create_node("n")
        session = await client.session("n")
        await session.semaphore("s").create(limit=1)
        # Another transaction keeps the semaphore's row locked (a stuck writer).
        async with await psycopg.AsyncConnection.connect(postgres_server.dsn) as blocker:
            await blocker.execute(f"SELECT 1 FROM {schema}.semaphores WHERE name = 's' FOR UPDATE")
            with pytest.raises(UnavailableError, match="request_timeout"):
                await session.semaphore("s").acquire(1, timeout=0)
            await blocker.rollback()
        lease = await session.semaphore("s").acquire(1, timeout=0)  # nothing was applied
        assert lease is not None
        assert lease.count == 1


async def test_a_first_use_waits_for_another_migration_past_request_timeout(
    postgres_server: PostgresServer,
) -> None:
    # Another client's migration holds the schema's DDL guard for longer than a call
    # may take: the first use waits for it, not failing at request_timeout.
    schema = f"t_{uuid.uuid4().hex[:12]}"
    url = postgres_server.url(schema=schema, request_timeout="0.5")
    async with await psycopg.AsyncConnection.connect(postgres_server.dsn) as other:
        await other.execute("SELECT pg_advisory_lock(hashtext(%s))", [f"tenure:{schema}"])
        opening = asyncio.ensure_future(tenure.connect(url))
        await asyncio.sleep(1.5)
        assert not opening.done()
        await other.execute("SELECT pg_advisory_unlock(hashtext(%s))", [f"tenure:{schema}"])
        async with await opening as client:
            await client.create_node("n")
        assert await schema_version(other, schema) == SCHEMA_VERSION


async def test_a_role_that_may_not_create_the_schema_is_told_so(
    postgres_server: PostgresServer,
) -> None:
    role = f"nc_{uuid.uuid4().hex[:12]}"
    postgres_server.psql(
        f"CREATE ROLE {role} LOGIN PASSWORD 'no-create'",
        f"REVOKE CREATE ON DATABASE tenure FROM {role}",
        db="tenure",
    )
    try:
        url = postgres_server.url(schema=f"t_{uuid.uuid4().hex[:12]}")
        auth = url.split("//", 1)[1].split("@", 1)[0]
        with pytest.raises(PermissionDeniedError, match="may not create or upgrade schema"):
            async with tenure.connect(url.replace(auth, f"{role}:no-create", 1)):
                pass
    finally:
        postgres_server.psql(f"DROP OWNED BY {role}", f"DROP ROLE {role}", db="tenure")


async def test_functions_of_another_build_are_replaced_on_first_use(
    postgres_server: PostgresServer,
) -> None:
    schema = f"t_{uuid.uuid4().hex[:12]}"
    url = postgres_server.url(schema=schema)
    async with tenure.connect(url) as client:
        await client.create_node("kept")
    async with await psycopg.AsyncConnection.connect(postgres_server.dsn) as conn:
        # As an older build of the same version left it: another digest, a function
        # that answers differently.
        await conn.execute(f"UPDATE {schema}.meta SET digest = 'older'")
        await conn.execute(
            f"CREATE OR REPLACE FUNCTION {schema}.next_due(p_node text) RETURNS float8 "
            "LANGUAGE sql AS $$ SELECT -1::float8 $$"
        )
        await conn.commit()
    async with tenure.connect(url) as client:
        assert (await client.describe_node("kept")).name == "kept"  # the data stays
    async with await psycopg.AsyncConnection.connect(postgres_server.dsn) as conn:
        cur = await conn.execute(f"SELECT digest FROM {schema}.meta")
        row = await cur.fetchone()
        assert row is not None
        assert row[0] == digest(schema)
        cur = await conn.execute(f"SELECT {schema}.next_due('nothing-here')")
        row = await cur.fetchone()
        assert row is not None
        assert row[0] is None  # this build's function again


async def test_the_window_keeps_its_stored_name_and_an_old_node_reads_back(
    postgres_server: PostgresServer,
) -> None:
    """A node's jsonb names the recovery window ``session_timeout``, as before the
    rename (create_session's PL/pgSQL reads it so); a node an older release made reads
    back, and opens sessions, with its window."""
    schema = f"t_{uuid.uuid4().hex[:12]}"
    async with tenure.connect(postgres_server.url(schema=schema)) as client:
        await client.create_node("new", recovery_window=9.0)
        async with await psycopg.AsyncConnection.connect(postgres_server.dsn) as conn:
            cur = await conn.execute(f"SELECT config FROM {schema}.nodes WHERE name = 'new'")
            row = await cur.fetchone()
            assert row is not None
            stored: dict[str, Any] = row[0]
            assert stored["session_timeout"] == 9.0
            assert "recovery_window" not in stored
            # As the release before the rename wrote it (json.dumps of asdict).
            old = (
                '{"session_timeout": 12.0, "lock_delay": 0.0, "default_lease": null, '
                '"max_sessions": 10000, "max_semaphores": 100000, "max_waiters": 7, '
                '"max_data_size": 65536, "max_watches_per_session": 1000, '
                '"max_missed_per_session": 256}'
            )
            await conn.execute(
                f"INSERT INTO {schema}.nodes (name, config) VALUES ('old', %s::jsonb)", [old]
            )
            await conn.commit()
        config = (await client.describe_node("old")).config
        assert (config.recovery_window, config.max_waiters) == (12.0, 7)
        async with client.session("old") as session:  # the window PL/pgSQL read
            assert session.recovery_window == 12.0
            [summary] = await client.list_sessions("old")
            assert summary.timeout == 12.0
        altered = await client.alter_node("old", max_waiters=8)
        assert altered.config.recovery_window == 12.0
