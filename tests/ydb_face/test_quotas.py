"""Quotas per token on the YDB face: the same counts and refusals as the native one
(what a token's calls make is its own: tenure._core.quotas)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.ydb_face.conftest import DATABASE, start_server, unique
from tests.ydb_face.raw import QUIET, Status, failure_of, node_call, open_session

pytestmark = pytest.mark.timeout(60)

JOBS, ADMIN = "ydb-jobs-quota-secret", "ydb-admin-quota-secret"
AUTH_FILE = f"""
[[token]]
name = "jobs"
secret = "{JOBS}"
access = "read-write"
[token.quota]
nodes = 1
sessions = 2

[[token]]
name = "admin"
secret = "{ADMIN}"
access = "read-write"
"""


def ticket(secret: str) -> list[tuple[str, str]]:
    return [("x-ydb-auth-ticket", secret)]


async def test_nodes_and_sessions_quotas_on_the_ydb_face(
    tmp_path: Path, raw: Callable[..., Any]
) -> None:
    auth = tmp_path / "tokens.toml"
    auth.write_text(AUTH_FILE)
    server = start_server(tmp_path / "data", "--auth-file", str(auth), *QUIET)
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
    finally:
        server.process.kill()
