"""PostgresFence against a real PostgreSQL: late writes refused, in the write's transaction."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator

import psycopg
import pytest

from tenure.errors import FencedError, InvalidArgumentError, LimitExceededError
from tenure.fencing import MAX_TOKEN, PostgresFence
from tests.fencing.scenario import paused_holder_writes_late
from tests.postgres.server import PostgresServer

#: Bound of waiting for another connection to block on the fence's row, in seconds.
BLOCK_WAIT = 20.0


def unique(prefix: str) -> str:
    """A table name no other test uses (the server is shared)."""
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


@pytest.fixture
def connect(postgres_server: PostgresServer) -> Iterator[Callable[[], psycopg.Connection]]:
    """Opens connections to the shared server's ``tenure`` database; closes them after."""
    opened: list[psycopg.Connection] = []

    def open_one() -> psycopg.Connection:
        opened.append(psycopg.connect(postgres_server.url(), connect_timeout=10))
        return opened[-1]

    yield open_one
    for conn in opened:
        conn.close()


@pytest.fixture
def fence() -> PostgresFence:
    """A fence with a table of this test's own."""
    return PostgresFence(table=unique("fence"))


def make_data_table(conn: psycopg.Connection) -> str:
    """A table of this test's own for the protected data: (resource, data)."""
    table = unique("data")
    with conn.transaction():
        conn.execute(f"CREATE TABLE {table} (resource text PRIMARY KEY, data text NOT NULL)")
    return table


def put(conn: psycopg.Connection, table: str, resource: str, data: str) -> None:
    """The protected write: set ``resource``'s data."""
    conn.execute(
        f"INSERT INTO {table} VALUES (%s, %s) ON CONFLICT (resource) DO UPDATE SET data = %s",
        (resource, data, data),
    )


def data_of(conn: psycopg.Connection, table: str, resource: str) -> str | None:
    """``resource``'s data as committed (read in a transaction of its own)."""
    with conn.transaction():
        row = conn.execute(f"SELECT data FROM {table} WHERE resource = %s", (resource,)).fetchone()
    return None if row is None else str(row[0])


async def test_a_paused_holders_late_write_is_refused(
    postgres_server: PostgresServer, fence: PostgresFence
) -> None:
    async with await psycopg.AsyncConnection.connect(postgres_server.url()) as conn:
        async with conn.transaction():
            table = unique("data")
            await conn.execute(f"CREATE TABLE {table} (resource text PRIMARY KEY, data bytea)")

        async def write(token: int, data: bytes) -> None:
            async with fence.atransaction(conn, "invoices", token):
                await conn.execute(
                    f"INSERT INTO {table} VALUES ('invoices', %s)"
                    " ON CONFLICT (resource) DO UPDATE SET data = EXCLUDED.data",
                    (data,),
                )

        outcome = await paused_holder_writes_late(write)
        cursor = await conn.execute(f"SELECT data FROM {table}")
        assert await cursor.fetchall() == [(b"B: writes again with the same token",)]
        assert await fence.ahighest(conn, "invoices") == outcome.token_b
        await conn.rollback()


def test_a_refused_check_rolls_back_the_write_it_guards(
    connect: Callable[[], psycopg.Connection], fence: PostgresFence
) -> None:
    conn = connect()
    table = make_data_table(conn)
    assert fence.highest(conn, "r") is None  # no table yet
    with fence.transaction(conn, "r", 5):
        put(conn, table, "r", "five")
    with fence.transaction(conn, "r", 5):  # the same holder, again
        put(conn, table, "r", "five again")

    def write_then_check() -> None:
        with conn.transaction():
            put(conn, table, "r", "four")  # written first: the refusal must roll it back
            fence.check(conn, "r", 4)

    with pytest.raises(FencedError, match="fencing token 4 is older than 5") as refused:
        write_then_check()
    assert (refused.value.resource, refused.value.token, refused.value.highest) == ("r", 4, 5)
    assert data_of(conn, table, "r") == "five again"
    assert fence.highest(conn, "r") == 5
    conn.rollback()


@pytest.mark.parametrize(
    ("higher", "lower"), [(MAX_TOKEN, MAX_TOKEN - 1), (2**63, 2**63 - 1), (2**53 + 1, 2**53)]
)
def test_tokens_up_to_2_64_minus_1_are_stored_exactly(
    connect: Callable[[], psycopg.Connection], fence: PostgresFence, higher: int, lower: int
) -> None:
    conn = connect()
    with fence.transaction(conn, "big", higher):
        pass
    with pytest.raises(FencedError) as refused, fence.transaction(conn, "big", lower):
        pass
    assert (refused.value.token, refused.value.highest) == (lower, higher)
    assert fence.highest(conn, "big") == higher
    conn.rollback()


def wait_until_blocked(observer: psycopg.Connection, pid: int) -> None:
    """Wait until backend ``pid`` waits for a lock (the fence row another holds)."""
    deadline = time.monotonic() + BLOCK_WAIT
    while True:
        with observer.transaction():
            row = observer.execute(
                "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)
            ).fetchone()
        if row is not None and row[0] == "Lock":
            return
        assert time.monotonic() < deadline, f"backend {pid} never waited for the fence row"
        time.sleep(0.02)


def test_a_newer_holder_waits_for_the_older_ones_commit_then_writes_last(
    connect: Callable[[], psycopg.Connection], fence: PostgresFence
) -> None:
    older, newer, observer = connect(), connect(), connect()
    table = make_data_table(observer)
    with fence.transaction(older, "r", 1):
        pass  # the fence table and row exist: the next checks only lock the row
    done: list[BaseException | None] = []

    def newer_writes() -> None:
        try:
            with fence.transaction(newer, "r", 2):
                put(newer, table, "r", "newer")
            done.append(None)
        except BaseException as error:
            done.append(error)

    with older.transaction():
        fence.check(older, "r", 1)
        thread = threading.Thread(target=newer_writes)
        thread.start()
        wait_until_blocked(observer, newer.info.backend_pid)  # the check waits for us
        put(older, table, "r", "older")
    thread.join(timeout=BLOCK_WAIT)
    assert done == [None]
    assert data_of(observer, table, "r") == "newer"
    assert fence.highest(observer, "r") == 2


def test_an_older_holder_waiting_on_a_newer_ones_row_is_refused(
    connect: Callable[[], psycopg.Connection], fence: PostgresFence
) -> None:
    older, newer, observer = connect(), connect(), connect()
    table = make_data_table(observer)
    with fence.transaction(newer, "r", 1):
        pass
    refused: list[BaseException] = []

    def older_writes() -> None:
        try:
            with fence.transaction(older, "r", 1):
                put(older, table, "r", "older")
        except BaseException as error:
            refused.append(error)

    with newer.transaction():
        fence.check(newer, "r", 2)
        thread = threading.Thread(target=older_writes)
        thread.start()
        wait_until_blocked(observer, older.info.backend_pid)
        put(newer, table, "r", "newer")
    thread.join(timeout=BLOCK_WAIT)
    assert len(refused) == 1
    assert isinstance(refused[0], FencedError)
    assert (refused[0].token, refused[0].highest) == (1, 2)
    assert data_of(observer, table, "r") == "newer"


def test_first_checks_racing_to_create_the_table_both_pass(
    connect: Callable[[], psycopg.Connection],
) -> None:
    table = unique("fence")
    fences = [PostgresFence(table=table), PostgresFence(table=table)]
    conns = [connect(), connect()]
    start = threading.Barrier(2)
    failures: list[BaseException] = []

    def check(i: int) -> None:
        try:
            start.wait(timeout=30)
            with fences[i].transaction(conns[i], f"r{i}", 10 + i):
                pass
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=check, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert failures == []
    assert [fences[0].highest(conns[0], f"r{i}") for i in range(2)] == [10, 11]
    conns[0].rollback()


def test_autocommit_outside_a_transaction_is_refused(
    connect: Callable[[], psycopg.Connection], fence: PostgresFence
) -> None:
    conn = connect()
    conn.autocommit = True
    with pytest.raises(InvalidArgumentError, match="must run in the transaction of the write"):
        fence.check(conn, "r", 1)
    with conn.transaction():  # an explicit transaction is fine, also in autocommit mode
        fence.check(conn, "r", 1)
    assert fence.highest(conn, "r") == 1


def test_a_named_schema_and_table_and_no_creation(
    connect: Callable[[], psycopg.Connection],
) -> None:
    conn = connect()
    schema = unique("Fences")
    with conn.transaction():
        conn.execute(f'CREATE SCHEMA "{schema}"')
    fence = PostgresFence(schema=schema, table='odd "name"')
    with fence.transaction(conn, "r", 3):
        pass
    with conn.transaction():
        row = conn.execute(f'SELECT token FROM "{schema}"."odd ""name"""').fetchone()
    assert row is not None
    assert int(row[0]) == 3
    missing = PostgresFence(table=unique("absent"), create=False)
    with pytest.raises(psycopg.errors.UndefinedTable), missing.transaction(conn, "r", 1):
        pass
    assert missing.highest(conn, "r") is None


def test_a_table_dropped_after_it_was_seen_is_created_again(
    connect: Callable[[], psycopg.Connection], fence: PostgresFence
) -> None:
    conn = connect()
    for token in (1, 2):  # the first creates the table, the second sees it
        with fence.transaction(conn, "r", token):
            pass
    with conn.transaction():
        conn.execute(f"DROP TABLE {fence.table}")
    with pytest.raises(psycopg.errors.UndefinedTable), fence.transaction(conn, "r", 3):
        pass
    with fence.transaction(conn, "r", 3):  # looked for again, and created
        pass
    assert fence.highest(conn, "r") == 3


def test_the_fence_survives_kill_9_of_the_server(postgres_fresh: PostgresServer) -> None:
    fence = PostgresFence()
    with psycopg.connect(postgres_fresh.url()) as conn, fence.transaction(conn, "r", 7):
        pass
    postgres_fresh.kill()
    postgres_fresh.start()
    with psycopg.connect(postgres_fresh.url()) as conn:
        with pytest.raises(FencedError, match="older than 7"), fence.transaction(conn, "r", 6):
            pass
        assert fence.highest(conn, "r") == 7


@pytest.mark.parametrize("token", [0, -1, 2**64, True, "3", 3.0])
def test_a_bad_token_is_refused_before_the_database_is_asked(
    fence: PostgresFence, token: object
) -> None:
    with pytest.raises(InvalidArgumentError, match="token must be an integer"):
        fence.check(None, "r", token)  # type: ignore[arg-type]


def test_bad_resources_and_settings_are_refused() -> None:
    fence = PostgresFence(max_resource_bytes=4)
    with pytest.raises(LimitExceededError, match="max_resource_bytes is 4"):
        fence.check(None, "12345", 1)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="must not contain NUL"):
        fence.check(None, "a\0b", 1)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match=r"max_resource_bytes must be .* in \[1, 2048\]"):
        PostgresFence(max_resource_bytes=4096)
    with pytest.raises(InvalidArgumentError, match="table must be at most 63 bytes"):
        PostgresFence(table="t" * 64)
    with pytest.raises(InvalidArgumentError, match="schema must be a non-empty str"):
        PostgresFence(schema="")
