"""Quotas per token on the dflockd face: a lock's hold is a session of the token that
``auth``-ed its connection, counted against its quotas; over one, ``error`` (one info
line naming the quota and the token), and other tokens' locks go on."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.dflockd.conftest import Raws, Serve, grant, server_args, unique

pytestmark = pytest.mark.timeout(60)

SMALL, OTHER = "dflockd-small-secret", "dflockd-other-secret"
AUTH_FILE = f"""
[[token]]
name = "small"
secret = "{SMALL}"
access = "read-write"
[token.quota]
sessions = 2

[[token]]
name = "other"
secret = "{OTHER}"
access = "read-write"
"""


async def test_a_tokens_sessions_quota_bounds_its_locks(
    serve: Serve, raw: Raws, tmp_path: Path
) -> None:
    auth = tmp_path / "auth.toml"
    auth.write_text(AUTH_FILE)
    server = serve(*server_args("--auth-file", str(auth)))
    small = await raw.connect(server.port)
    assert await small.ask("auth", "_", SMALL) == "ok"
    keys = [unique("q") for _ in range(3)]
    tokens = [grant(await small.ask("l", key, "5 60"), lease=60) for key in keys[:2]]
    assert await small.ask("l", keys[2], "5 60") == "error"
    server.wait_log("token 'small' is over its quota sessions (2)")
    other = await raw.connect(server.port)
    assert await other.ask("auth", "_", OTHER) == "ok"
    grant(await other.ask("l", keys[2], "5 60"), lease=60)
    # A release gives the place back.
    assert await small.ask("r", keys[0], tokens[0]) == "ok"
    grant(await small.ask("l", unique("q"), "5 60"), lease=60)
