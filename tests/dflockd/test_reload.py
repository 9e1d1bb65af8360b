"""A reload (SIGHUP) on the dflockd face: a token removed or rotated in the auth file has
its dflockd connections closed, as its native ones are (issue 50); the other tokens'
connections are served on, and a connection with the old secret is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.dflockd.conftest import Raws, Serve, grant, server_args, unique
from tests.server.net.test_reload import reloads
from tests.server.tenants import token, write_auth_file

pytestmark = pytest.mark.timeout(60)

GONE, ROTATED, NEW, KEPT = "dfl-gone-secret", "dfl-rotated-old", "dfl-rotated-new", "dfl-kept"


async def test_a_reload_closes_the_connections_of_removed_and_rotated_tokens(
    serve: Serve, raw: Raws, tmp_path: Path
) -> None:
    auth = write_auth_file(
        tmp_path, token("gone", GONE), token("rotated", ROTATED), token("kept", KEPT)
    )
    server = serve(*server_args("--auth-file", str(auth)))
    conns = {}
    for name, secret in (("gone", GONE), ("rotated", ROTATED), ("kept", KEPT)):
        conns[name] = await raw.connect(server.port)
        assert await conns[name].ask("auth", "_", secret) == "ok"
    held = unique("held")
    grant(await conns["kept"].ask("l", held, "5 60"), lease=60)
    write_auth_file(tmp_path, token("rotated", NEW), token("kept", KEPT))
    reloads(server)
    assert await conns["gone"].closed()
    assert await conns["rotated"].closed()
    assert await conns["kept"].ask("ping") == "ok"  # served on, its lock held still
    assert await conns["kept"].ask("l", held, "0 60") == "timeout"
    assert '"connections_closed": 2' in server.output()
    old = await raw.connect(server.port)
    assert await old.ask("auth", "_", ROTATED) == "error_auth"
    again = await raw.connect(server.port)
    assert await again.ask("auth", "_", NEW) == "ok"
