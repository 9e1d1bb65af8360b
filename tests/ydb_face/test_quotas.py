"""Quotas per token on the YDB face: the same counts and refusals as the native one
(what a token's calls make is its own: tenure._core.quotas), and its rate counted per
request, every unary call and Session stream request alike (OVERLOADED past it)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import pytest

from tenure.compat.ydb import _protos as pb
from tests.server.net.test_reload import reloads
from tests.server.tenants import audit_lines, slow_tokens, token, write_auth_file
from tests.ydb_face.conftest import DATABASE, start_server, unique
from tests.ydb_face.raw import (
    QUIET,
    Status,
    failure_of,
    new_node,
    node_call,
    nothing_pending,
    open_session,
    unary,
)

pytestmark = pytest.mark.timeout(60)

JOBS, ADMIN = "ydb-jobs-quota-secret", "ydb-admin-quota-secret"
TOKENS = (token("jobs", JOBS, quota={"nodes": 1, "sessions": 2}), token("admin", ADMIN))


def ticket(secret: str) -> list[tuple[str, str]]:
    return [("x-ydb-auth-ticket", secret)]


async def test_nodes_and_sessions_quotas_on_the_ydb_face(
    tmp_path: Path, raw: Callable[..., Any]
) -> None:
    auth = write_auth_file(tmp_path, *TOKENS, name="tokens.toml")
    audit = tmp_path / "audit.jsonl"
    server = start_server(
        tmp_path / "data", "--auth-file", str(auth), "--audit-log", str(audit), *QUIET
    )
    try:
        path = f"{DATABASE}/{unique()}"
        assert (await node_call(server, "Create", path, ticket(JOBS))).status == Status.SUCCESS
        second = await node_call(server, "Create", f"{DATABASE}/{unique()}", ticket(JOBS))
        assert second.status != Status.SUCCESS
        assert [issue.message for issue in second.issues] == [
            "token 'jobs' is over its quota nodes (1)"
        ]
        other = f"{DATABASE}/{unique()}"
        assert (await node_call(server, "Create", other, ticket(ADMIN))).status == Status.SUCCESS
        for _ in range(2):
            await open_session(raw, path, server, ticket(JOBS))
        stream = await raw(server, metadata=ticket(JOBS))
        await stream.send(session_start={"path": path, "timeout_millis": 5000})
        failure = await failure_of(stream)
        messages = [issue.message for issue in failure.issues]
        assert messages == ["token 'jobs' is over its quota sessions (2)"], failure
        await open_session(raw, path, server, ticket(ADMIN))  # others: unaffected
        # The session's refusal is audited as on the native face (the node's is the
        # node call's own line, node_create refused): the token's name, never a secret.
        refusals = audit_lines(audit, "quota_refused")
        assert [(line["token"], line["outcome"]) for line in refusals] == [
            ("jobs", "limit_exceeded")
        ]
        assert refusals[0]["address"] == "127.0.0.1"
        assert refusals[0]["what"]["quota"] == "sessions"
        assert refusals[0]["what"]["via"] == "ydb"
        assert JOBS not in audit.read_text()
    finally:
        server.process.kill()


_COORDINATION = "/Ydb.Coordination.V1.CoordinationService"
_RATE_LIMITER = "/Ydb.RateLimiter.V1.RateLimiterService"
#: The unary calls a token makes, each: (its service, its method, the request's fields
#: for a node path and a fresh name). The node has the resource ``r``.
UNARY: Final[dict[str, tuple[str, str, Callable[[str, str], dict[str, Any]]]]] = {
    "create_node": (_COORDINATION, "CreateNode", lambda p, n: {"path": f"{p}-{n}"}),
    "alter_node": (
        _COORDINATION,
        "AlterNode",
        lambda p, n: {"path": p, "config": {"self_check_period_millis": 1500}},
    ),
    "drop_node": (_COORDINATION, "DropNode", lambda p, n: {"path": p}),
    "describe_node": (_COORDINATION, "DescribeNode", lambda p, n: {"path": p}),
    "create_resource": (
        _RATE_LIMITER,
        "CreateResource",
        lambda p, n: {
            "coordination_node_path": p,
            "resource": {"resource_path": n, "hierarchical_drr": {"max_units_per_second": 5}},
        },
    ),
    "alter_resource": (
        _RATE_LIMITER,
        "AlterResource",
        lambda p, n: {
            "coordination_node_path": p,
            "resource": {"resource_path": "r", "hierarchical_drr": {"max_units_per_second": 9}},
        },
    ),
    "drop_resource": (
        _RATE_LIMITER,
        "DropResource",
        lambda p, n: {"coordination_node_path": p, "resource_path": "r"},
    ),
    "list_resources": (
        _RATE_LIMITER,
        "ListResources",
        lambda p, n: {"coordination_node_path": p, "recursive": True},
    ),
    "describe_resource": (
        _RATE_LIMITER,
        "DescribeResource",
        lambda p, n: {"coordination_node_path": p, "resource_path": "r"},
    ),
    "acquire_resource": (
        _RATE_LIMITER,
        "AcquireResource",
        lambda p, n: {"coordination_node_path": p, "resource_path": "r", "used": 1},
    ),
}
#: The Session stream's requests after its start, each with its fields (``sem``: a
#: semaphore of the node, free).
STREAM: Final[dict[str, dict[str, Any]]] = {
    "acquire_semaphore": {"name": "sem", "count": 1},
    "release_semaphore": {"name": "sem"},
    "describe_semaphore": {"name": "sem", "include_owners": True},
    "create_semaphore": {"name": "fresh", "limit": 3},
    "update_semaphore": {"name": "sem", "data": b"new"},
    "delete_semaphore": {"name": "sem", "force": True},
}
#: A token of its own per request kind, each of 0.01 requests a second: a burst of one.
KINDS: Final = [*UNARY, *STREAM, "session_start", "session_reattach", "session_stop"]
RATED_TOKENS = (*slow_tokens(KINDS, "ydb"), token("admin", ADMIN))


def refused(operation: Any, kind: str) -> None:
    """``operation`` (or a Failure, a result) is the rate's refusal of token slow-KIND."""
    assert operation.status == Status.OVERLOADED, (kind, operation)
    assert [issue.message for issue in operation.issues] == [
        f"token 'slow-{kind}' is over its quota requests_per_second (0.01)"
    ], operation


async def call(server: Any, kind: str, path: str, name: str, secret: str) -> Any:
    """The unary call ``kind`` on the node ``path`` (``name``: a fresh one): its operation."""
    service, method, fields = UNARY[kind]
    messages = pb.coordination if service == _COORDINATION else pb.rate_limiter
    request = getattr(messages, f"{method}Request")(**fields(path, name))
    reply = getattr(messages, f"{method}Response")
    return (await unary(server, f"{service}/{method}", request, reply, ticket(secret))).operation


async def test_every_request_kind_counts_against_requests_per_second(
    tmp_path: Path, raw: Callable[..., Any]
) -> None:
    """Issue 47: a token's node calls other than CreateNode, its describes and listings
    were not counted at all. Now every unary call, every Session stream's start and
    each of its requests is one request of its token's: a token of 0.01 a second (a
    burst of one) is refused OVERLOADED (YDB's status for a throughput limit) at its
    second, whatever the two are, and the refused request does nothing; pings are no
    requests (refusing them would end an honest session)."""
    auth = write_auth_file(tmp_path, *RATED_TOKENS, name="tokens.toml")
    server = start_server(tmp_path / "data", "--auth-file", str(auth), *QUIET)
    try:
        for kind in KINDS:
            secret = f"ydb-slow-{kind}-secret"
            path = await new_node(server, ticket(ADMIN))
            made = await call(server, "create_resource", path, "r", ADMIN)
            assert made.status == Status.SUCCESS, made
            admin = await open_session(raw, path, server, ticket(ADMIN))
            await admin.ok("create_semaphore", name="sem", limit=1)
            if kind in UNARY:
                # Its burst: a DescribeNode; then the kind, refused, then sent by another
                # token: served as it should be (the refused one did nothing).
                spent = await node_call(server, "Describe", path, ticket(secret))
                assert spent.status == Status.SUCCESS, spent
                refused(await call(server, kind, path, "a", secret), kind)
                served = await call(server, kind, path, "b", ADMIN)
                assert served.status == Status.SUCCESS, (kind, served)
            elif kind in STREAM:
                session = await open_session(raw, path, server, ticket(secret))  # its burst
                await session.stream.send(ping={"opaque": 5})  # no request: answered
                pong = await session.stream.next()
                assert pong.WhichOneof("response") == "pong", pong
                refused(await session.result(kind, **STREAM[kind]), kind)
                await admin.ok(kind, **STREAM[kind])
            elif kind == "session_start":
                spent = await node_call(server, "Describe", path, ticket(secret))
                assert spent.status == Status.SUCCESS, spent
                stream = await raw(server, metadata=ticket(secret))
                await stream.send(session_start={"path": path, "timeout_millis": 5000})
                refused(await failure_of(stream), kind)
            elif kind == "session_reattach":
                session = await open_session(raw, path, server, ticket(secret))  # its burst
                stream = await raw(server, metadata=ticket(secret))
                start = {"path": path, "session_id": session.session_id, "timeout_millis": 5000}
                await stream.send(session_start=start)
                refused(await failure_of(stream), kind)
                await session.stream.send(ping={"opaque": 6})  # still its session's stream
                assert (await session.stream.next()).WhichOneof("response") == "pong"
            else:  # session_stop: refused, the stream ends (its session kept, detached)
                session = await open_session(raw, path, server, ticket(secret))  # its burst
                await session.stream.send(session_stop={})
                refused(await failure_of(session.stream), kind)
                stream = await raw(server, metadata=ticket(ADMIN))
                start = {"path": path, "session_id": session.session_id, "timeout_millis": 5000}
                await stream.send(session_start=start)
                assert (await stream.next()).WhichOneof("response") == "session_started"
    finally:
        server.process.kill()


async def test_a_reload_ends_the_streams_of_a_removed_token(
    tmp_path: Path, raw: Callable[..., Any]
) -> None:
    """Issue 50: a token removed from the auth file by a reload (SIGHUP) has its open
    Session streams ended UNAUTHORIZED (their sessions detached, as on a lost stream),
    as its native connections are closed; another token's stream is served on."""
    auth = write_auth_file(tmp_path, *TOKENS, name="tokens.toml")
    server = start_server(tmp_path / "data", "--auth-file", str(auth), *QUIET)
    try:
        path = f"{DATABASE}/{unique()}"
        assert (await node_call(server, "Create", path, ticket(ADMIN))).status == Status.SUCCESS
        doomed = await open_session(raw, path, server, ticket(JOBS))
        kept = await open_session(raw, path, server, ticket(ADMIN))
        write_auth_file(tmp_path, token("admin", ADMIN), name="tokens.toml")
        reloads(server.process)
        failure = await failure_of(doomed.stream)
        assert failure.status == Status.UNAUTHORIZED
        assert "'jobs' was removed or rotated" in failure.issues[0].message
        await nothing_pending(kept)  # the admin's stream: served on
        assert '"connections_closed": 1' in server.process.output()
    finally:
        server.process.kill()
