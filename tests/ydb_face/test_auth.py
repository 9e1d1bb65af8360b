"""Authentication on the YDB port with ``--auth-file``: tickets, logins, access rules.

A call names its token in ``x-ydb-auth-ticket``: the token's secret itself, or a
ticket from ``AuthService/Login`` (static credentials: a token's name and secret).
Without one, unary calls answer UNAUTHORIZED in their operation (the SDK raises)
and Session streams end with a Failure UNAUTHORIZED. The tokens' access rules are
the native protocol's (read-only, node patterns).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import ydb
from ydb.coordination import CoordinationClient

from tenure.compat.ydb import _protos as pb
from tests.server.tenants import auth_text, token
from tests.server.wire import WAIT
from tests.ydb_face.conftest import DATABASE, YdbServer, start_server, unique
from tests.ydb_face.raw import (
    QUIET,
    Status,
    failure_of,
    node_call,
    nothing_pending,
    open_session,
    quiet_server,  # noqa: F401  (the module's server)
    unary,
)

pytestmark = pytest.mark.timeout(60)

Raw = Callable[..., Any]

ADMIN, READER, JOBS = "ydb-admin-secret-1", "ydb-reader-secret-2", "ydb-jobs-secret-3"

AUTH_FILE = auth_text(
    token("admin", ADMIN),
    token("reader", READER, "read-only"),
    token("jobs-deployer", JOBS, nodes=["jobs-*"]),
)

LOGIN = "/Ydb.Auth.V1.AuthService/Login"
WHO_AM_I = "/Ydb.Discovery.V1.DiscoveryService/WhoAmI"


def ticket(secret: str) -> list[tuple[str, str]]:
    """The metadata that names a token (its secret, or a login's ticket)."""
    return [("x-ydb-auth-ticket", secret)]


def auth_file(directory: Path, text: str = AUTH_FILE) -> Path:
    """An auth file with ``text`` in ``directory``."""
    path = directory / "tokens.toml"
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[YdbServer]:
    """One server with the auth file, for the tests that do not restart it."""
    base = tmp_path_factory.mktemp("ydb-auth")
    running = start_server(base / "data", "--auth-file", str(auth_file(base)), *QUIET)
    try:
        yield running
    finally:
        running.process.kill()


async def login(server: YdbServer, user: str, password: str) -> Any:
    """``AuthService/Login``: its operation (the ticket is in its result)."""
    request = pb.auth.LoginRequest(user=user, password=password)
    return (await unary(server, LOGIN, request, pb.auth.LoginResponse)).operation


async def login_ticket(server: YdbServer, user: str, password: str) -> str:
    """A ticket for ``user`` (the login must succeed)."""
    operation = await login(server, user, password)
    assert operation.status == Status.SUCCESS, operation
    result = pb.auth.LoginResult()
    operation.result.Unpack(result)
    return str(result.token)


async def who_am_i(server: YdbServer, metadata: Any) -> Any:
    """``DiscoveryService/WhoAmI``: its operation."""
    request = pb.discovery.WhoAmIRequest()
    return (await unary(server, WHO_AM_I, request, pb.discovery.WhoAmIResponse, metadata)).operation


def user_of(operation: Any) -> str:
    """The user a successful WhoAmI names."""
    assert operation.status == Status.SUCCESS, operation
    result = pb.discovery.WhoAmIResult()
    operation.result.Unpack(result)
    return str(result.user)


async def test_calls_without_credentials_are_unauthorized(guarded: YdbServer, raw: Raw) -> None:
    path = f"{DATABASE}/{unique()}"
    assert (await node_call(guarded, "Create", path)).status == Status.UNAUTHORIZED
    assert (await node_call(guarded, "Create", path, ticket("not-a-token"))).status == (
        Status.UNAUTHORIZED
    )
    assert (await who_am_i(guarded, ())).status == Status.UNAUTHORIZED
    stream = await raw(guarded)
    failure = await failure_of(stream)
    assert failure.status == Status.UNAUTHORIZED
    assert "credentials" in failure.issues[0].message


def test_the_sdk_without_credentials_is_refused(guarded: YdbServer) -> None:
    driver = ydb.Driver(endpoint=guarded.endpoint, database=DATABASE)
    try:
        driver.wait(timeout=WAIT, fail_fast=True)  # discovery needs no ticket
        with pytest.raises(ydb.issues.Unauthorized):
            CoordinationClient(driver).create_node(f"{DATABASE}/{unique()}")
    finally:
        driver.stop()


async def test_a_tokens_secret_as_the_ticket_works(guarded: YdbServer, raw: Raw) -> None:
    path = f"{DATABASE}/{unique()}"
    assert (await node_call(guarded, "Create", path, ticket(ADMIN))).status == Status.SUCCESS
    session = await open_session(raw, path, guarded, ticket(ADMIN))
    await session.ok("create_semaphore", name="s", limit=1)
    assert (await session.ok("acquire_semaphore", name="s", count=1)).acquired


@pytest.mark.parametrize(
    "credentials",
    [
        lambda: ydb.AccessTokenCredentials(ADMIN),  # type: ignore[no-untyped-call]
        lambda: ydb.StaticCredentials.from_user_password("admin", ADMIN),
    ],
    ids=["access-token", "static"],
)
def test_the_sdk_with_credentials_works(
    guarded: YdbServer, credentials: Callable[[], ydb.Credentials]
) -> None:
    driver = ydb.Driver(endpoint=guarded.endpoint, database=DATABASE, credentials=credentials())
    try:
        driver.wait(timeout=WAIT, fail_fast=True)
        client = CoordinationClient(driver)
        path = f"{DATABASE}/{unique()}"
        client.create_node(path)
        with client.session(path) as session, session.semaphore("job", 1) as semaphore:
            assert semaphore.describe().count == 1
        client.delete_node(path)
    finally:
        driver.stop()


async def test_a_wrong_password_or_user_is_refused(guarded: YdbServer) -> None:
    for user, password in (("admin", READER), ("admin", "guess"), ("nobody", ADMIN)):
        operation = await login(guarded, user, password)
        assert operation.status == Status.UNAUTHORIZED, (user, password)
    forged = await login_ticket(guarded, "reader", READER) + "x"
    assert (await who_am_i(guarded, ticket(forged))).status == Status.UNAUTHORIZED


async def test_who_am_i_names_the_token(guarded: YdbServer) -> None:
    assert user_of(await who_am_i(guarded, ticket(ADMIN))) == "admin"
    reader = await login_ticket(guarded, "reader", READER)
    assert user_of(await who_am_i(guarded, ticket(reader))) == "reader"


async def test_a_node_is_described_with_the_user_who_made_it_as_owner(guarded: YdbServer) -> None:
    path = f"{DATABASE}/{unique('owned')}"
    made_by = await login_ticket(guarded, "reader", READER)  # may not create: admin does
    assert (await node_call(guarded, "Create", path, ticket(ADMIN))).status == Status.SUCCESS
    described = await node_call(guarded, "Describe", path, ticket(made_by))
    result = pb.coordination.DescribeNodeResult()
    described.result.Unpack(result)
    assert result.self.owner == "admin"  # as WhoAmI names the creator (YDB: its user SID)


async def test_a_read_only_token_may_describe_but_not_change(guarded: YdbServer, raw: Raw) -> None:
    path = f"{DATABASE}/{unique()}"
    assert (await node_call(guarded, "Create", path, ticket(ADMIN))).status == Status.SUCCESS
    admin = await open_session(raw, path, guarded, ticket(ADMIN))
    await admin.ok("create_semaphore", name="s", limit=1, data=b"cfg")
    assert (await node_call(guarded, "Describe", path, ticket(READER))).status == Status.SUCCESS
    assert (await node_call(guarded, "Create", f"{path}-2", ticket(READER))).status == (
        Status.UNAUTHORIZED
    )
    reader = await open_session(raw, path, guarded, ticket(READER))
    described = await reader.ok("describe_semaphore", name="s", include_owners=True)
    assert described.semaphore_description.data == b"cfg"
    for request, fields in (
        ("acquire_semaphore", {"name": "s", "count": 1}),
        ("update_semaphore", {"name": "s", "data": b"x"}),
        ("create_semaphore", {"name": "t", "limit": 1}),
        ("delete_semaphore", {"name": "s"}),
    ):
        refused = await reader.result(request, **fields)
        assert refused.status == Status.UNAUTHORIZED, request
    assert (await reader.ok("describe_semaphore", name="s")).semaphore_description.count == 0


async def test_a_read_only_token_may_not_take_back_a_read_write_tokens_session(
    guarded: YdbServer, raw: Raw
) -> None:
    """Issue 58, D7: a session's key (or a keyless session's id) is no right. A reader
    that re-attaches a writer's session, holding or owned by a read-write token, is
    refused UNAUTHORIZED, and the session stays its stream's; its own it re-attaches."""
    path = f"{DATABASE}/{unique()}"
    assert (await node_call(guarded, "Create", path, ticket(ADMIN))).status == Status.SUCCESS
    holding = await open_session(raw, path, guarded, ticket(ADMIN), protection_key=b"admin-k")
    assert (await holding.ok("acquire_semaphore", name="e", count=1, ephemeral=True)).acquired
    keyless = await open_session(raw, path, guarded, ticket(ADMIN))
    for session, key, why in (
        (holding, b"admin-k", "holds or waits for locks"),
        (keyless, b"", "is owned by read-write token 'admin'"),
    ):
        thief = await raw(guarded, metadata=ticket(READER))
        start = {"path": path, "session_id": session.session_id, "protection_key": key}
        await thief.send(session_start={**start, "timeout_millis": 5000})
        failure = await failure_of(thief)
        assert failure.status == Status.UNAUTHORIZED
        assert why in failure.issues[0].message
        assert "needs read-write access" in failure.issues[0].message
        await nothing_pending(session)  # (still its stream's: nothing was taken from it)
    described = await holding.ok("describe_semaphore", name="e", include_owners=True)
    assert [o.session_id for o in described.semaphore_description.owners] == [holding.session_id]
    mine = await open_session(raw, path, guarded, ticket(READER), protection_key=b"reader-k")
    again = await raw(guarded, metadata=ticket(READER))
    taken = await again.start(path, session_id=mine.session_id, protection_key=b"reader-k")
    assert taken.session_id == mine.session_id


async def test_a_node_limited_token_may_not_touch_other_nodes(guarded: YdbServer, raw: Raw) -> None:
    own, other = f"{DATABASE}/jobs-{unique()}", f"{DATABASE}/{unique()}"
    assert (await node_call(guarded, "Create", own, ticket(JOBS))).status == Status.SUCCESS
    assert (await node_call(guarded, "Create", other, ticket(JOBS))).status == (Status.UNAUTHORIZED)
    assert (await node_call(guarded, "Create", other, ticket(ADMIN))).status == Status.SUCCESS
    assert (await node_call(guarded, "Describe", other, ticket(JOBS))).status == (
        Status.UNAUTHORIZED
    )
    jobs = await open_session(raw, own, guarded, ticket(JOBS))
    assert (await jobs.ok("acquire_semaphore", name="e", count=1, ephemeral=True)).acquired
    elsewhere = await raw(guarded, metadata=ticket(JOBS))
    await elsewhere.send(session_start={"path": other, "timeout_millis": 5000})
    assert (await failure_of(elsewhere)).status == Status.UNAUTHORIZED
    assert (await node_call(guarded, "Drop", other, ticket(JOBS))).status == Status.UNAUTHORIZED


async def test_a_ticket_survives_a_restart_and_dies_with_its_token(
    serve: Callable[..., YdbServer], tmp_path: Path
) -> None:
    tokens = auth_file(tmp_path)
    first = serve("--auth-file", str(tokens))
    reader = await login_ticket(first, "reader", READER)
    first.process.kill()
    again = serve("--auth-file", str(tokens), ydb_port=first.ydb_port)
    assert user_of(await who_am_i(again, ticket(reader))) == "reader"
    again.process.kill()
    without = AUTH_FILE.replace('name = "reader"', 'name = "someone-else"')
    gone = serve("--auth-file", str(auth_file(tmp_path, without)), ydb_port=first.ydb_port)
    refused = await who_am_i(gone, ticket(reader))
    assert refused.status == Status.UNAUTHORIZED
    assert "no longer in the auth file" in refused.issues[0].message


async def test_a_ticket_dies_when_its_tokens_secret_is_rotated(
    serve: Callable[..., YdbServer], tmp_path: Path
) -> None:
    # Issue 37: a leaked secret rotated in the auth file must cut its logins too.
    first = serve("--auth-file", str(auth_file(tmp_path)))
    admin = await login_ticket(first, "admin", ADMIN)
    first.process.kill()
    rotated = AUTH_FILE.replace(ADMIN, "ydb-admin-secret-rotated")
    again = serve("--auth-file", str(auth_file(tmp_path, rotated)), ydb_port=first.ydb_port)
    refused = await who_am_i(again, ticket(admin))
    assert refused.status == Status.UNAUTHORIZED
    assert "secret changed" in refused.issues[0].message
    assert user_of(await who_am_i(again, ticket("ydb-admin-secret-rotated"))) == "admin"


async def test_an_expired_ticket_is_refused(
    serve: Callable[..., YdbServer], tmp_path: Path
) -> None:
    short = serve("--auth-file", str(auth_file(tmp_path)), "--ydb-ticket-ttl", "1")
    reader = await login_ticket(short, "reader", READER)
    deadline = time.monotonic() + WAIT
    while (operation := await who_am_i(short, ticket(reader))).status == Status.SUCCESS:
        assert time.monotonic() < deadline, "the ticket never expired"
        await asyncio.sleep(0.1)  # (the server's clock decides the expiry)
    assert operation.status == Status.UNAUTHORIZED
    assert "expired" in operation.issues[0].message
    fresh = await login_ticket(short, "reader", READER)  # logging in again works
    assert fresh != reader


async def test_without_an_auth_file_calls_are_anonymous_and_login_is_refused(
    server: YdbServer,
) -> None:
    assert user_of(await who_am_i(server, ())) == ""
    assert user_of(await who_am_i(server, ticket("anything"))) == ""  # no ticket is checked
    refused = await login(server, "admin", ADMIN)
    assert refused.status == Status.UNAUTHORIZED
    assert "no auth file" in refused.issues[0].message
