"""The audit log of the YDB face (``--audit-log``, issue 50): node calls, done or refused,
and failed logins, with the token's name, never a secret (not even one typed as a user)."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from tests.ydb_face.conftest import DATABASE, start_server, unique
from tests.ydb_face.raw import QUIET, Status, node_call
from tests.ydb_face.test_auth import ADMIN, JOBS, READER, auth_file, login, ticket

pytestmark = pytest.mark.timeout(60)


async def test_node_calls_and_failed_logins_are_recorded_without_a_secret(
    tmp_path: Path,
) -> None:
    audit = tmp_path / "audit.jsonl"
    tokens = auth_file(tmp_path)
    running = start_server(
        tmp_path / "data", "--auth-file", str(tokens), "--audit-log", str(audit), *QUIET
    )
    path = f"{DATABASE}/{unique()}"
    try:
        assert (await node_call(running, "Create", path, ticket(ADMIN))).status == Status.SUCCESS
        refused = await node_call(running, "Create", f"{path}-2", ticket(READER))
        assert refused.status == Status.UNAUTHORIZED
        assert (await node_call(running, "Describe", path, ticket(ADMIN))).status == Status.SUCCESS
        assert (await node_call(running, "Drop", path, ticket(ADMIN))).status == Status.SUCCESS
        for user, password in (("admin", "guess"), (JOBS, "typed-as-the-user")):
            assert (await login(running, user, password)).status == Status.UNAUTHORIZED
        assert running.process.signal(signal.SIGTERM) == 0  # the queued lines written
    finally:
        running.process.kill()
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    seen = [(line["act"], line["token"], line["outcome"]) for line in lines]
    assert seen == [
        ("node_create", "admin", "ok"),  # (a Describe is no act)
        ("node_create", "reader", "unauthorized"),
        ("node_drop", "admin", "ok"),
        ("auth_failed", "admin", "authentication"),  # a login names the token it aimed at
        ("auth_failed", None, "authentication"),  # never a name no token has
    ]
    assert lines[0]["what"] == {"via": "ydb", "path": path}
    assert "read-only" in lines[1]["what"]["why"]
    assert {line["address"] for line in lines} == {"127.0.0.1"}
    text = audit.read_text()
    for secret in (ADMIN, READER, JOBS, "typed-as-the-user", "guess"):
        assert secret not in text
