"""Bad and greedy dflockd clients (issue 10, findings 1 and 3), over raw sockets.

* A line that never ends is cut off with ``error`` at its cap (spec §4.2), not read
  for ever; before ``auth`` on a server that requires it, any framing error is
  answered ``error_auth`` and closed, as dflockd does (spec §6.8).
* A client that pipelines requests gets its turn like every other connection, and
  one that does not read its answers is not read either, then dropped
  (docs/operations.md, "Fair share").

Outcomes only (answers, what the server logged, who holds what), never timings.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tenure
from tests.api.support import eventually, owners, within
from tests.flooder import Flooder, flooding_socket

from .conftest import SECRET, Raws, Serve, fence, grant

pytestmark = pytest.mark.timeout(120)

#: Requests with a line over its cap and no newline after it: nothing more comes.
ENDLESS = {
    "command": b"l" * 257,
    "key": b"l\n" + b"k" * 257,
    "argument": b"l\nk\n" + b"1" * 257,
    "auth argument": b"auth\n_\n" + b"s" * 65_537,
}


@pytest.mark.parametrize("data", list(ENDLESS.values()), ids=list(ENDLESS))
async def test_a_line_without_a_newline_is_cut_off_at_its_cap(
    serve: Serve, raw: Raws, data: bytes
) -> None:
    server = serve("--idle-timeout", "0")  # no stall timeout could answer instead
    conn = await raw.connect(server.port)
    await conn.send(b"ping\n_\n_\n" + data)
    assert await conn.rest() == b"ok\nerror\n"


async def test_an_endless_line_is_not_read_for_ever(serve: Serve, raw: Raws) -> None:
    server = serve("--idle-timeout", "0")
    flooder = Flooder(flooding_socket(server.port), b"l\nk\n" + b"1" * (16 << 20))
    flooder.start()
    try:
        assert flooder.wait_dropped()  # the server closed it: the rest was never read
        assert not flooder.all_sent
    finally:
        flooder.finish()
    conn = await raw.connect(server.port)
    assert await conn.ask("ping") == "ok"


#: Framing errors in a first request: fatal (over-long lines) and not (bad UTF-8).
BAD_FIRST = {
    "over-long key": b"l\n" + b"k" * 300 + b"\n5\n",
    "over-long secret": b"auth\n_\n" + b"s" * 65_537 + b"\n",
    "endless command": b"a" * 300,
    "invalid UTF-8": b"auth\n_\n\xff\xfe\n",
}


@pytest.mark.parametrize("data", list(BAD_FIRST.values()), ids=list(BAD_FIRST))
async def test_a_framing_error_before_auth_is_refused_with_error_auth(
    serve: Serve, raw: Raws, auth_file: Path, data: bytes
) -> None:
    server = serve("--auth-file", str(auth_file))
    refused = await raw.connect(server.port)
    await refused.send(data)
    assert await refused.rest() == b"error_auth\n"  # and the close
    conn = await raw.connect(server.port)
    assert await conn.ask("auth", "_", SECRET) == "ok"
    assert await conn.ask("ping") == "ok"


async def test_a_first_request_that_stalls_is_refused_with_error_auth(
    serve: Serve, raw: Raws, auth_file: Path
) -> None:
    server = serve("--auth-file", str(auth_file), "--idle-timeout", "1")
    stalled = await raw.connect(server.port)
    await stalled.send(b"auth\n_\n")  # two lines of three, then nothing
    assert await stalled.rest() == b"error_auth\n"


async def test_a_dflockd_flood_does_not_starve_the_others(serve: Serve) -> None:
    server = serve()
    sock = flooding_socket(server.port, small=False)
    sock.sendall(b"l\nflooding\n0\n")  # held: every try-lock below answers `timeout`
    assert sock.recv(4096).startswith(b"ok ")
    # A marker grant (so the healthy side knows the flood is being served), then
    # 200,000 try-locks: a session, an acquire and a close each, journaled.
    flood = b"l\nflood-started\n0\n" + b"l\nflooding\n0\n" * 200_000
    flooder = Flooder(sock, flood)
    flooder.start()
    try:
        async with tenure.connect(f"tenure://127.0.0.1:{server.port}") as client:
            observer = await client.session("dflockd")

            async def flooding() -> bool:
                return bool(await owners(observer, "flood-started"))

            await eventually(flooding, "the flood being served")
            await client.create_node("n", exist_ok=True)
            # A server that served the flood in big gulps would go quiet for this long.
            session = await client.session("n", recovery_window=0.5)
            for _ in range(50):
                lock = await within(session.mutex("healthy").lock())
                await within(lock.release())
            assert session.lost_reason is None
            assert observer.lost_reason is None
    finally:
        flooder.finish()


async def test_a_dflockd_client_that_does_not_read_is_not_read_then_dropped(
    serve: Serve, raw: Raws
) -> None:
    server = serve("--idle-timeout", "1", "--dflockd-max-locks", "100000")
    helper = await raw.connect(server.port)
    for i in range(300):  # a `stats` answer of some 30 KB
        grant(await helper.ask("l", f"held-{i}", "0 300"))
    before = fence(grant(await helper.ask("l", "probe-0", "0")))
    rounds = 2000  # each: a big answer, and a grant (a fence) to count it by
    flood = b"".join(b"stats\n_\n_\nl\ntick-%d\n0 1\n" % i for i in range(rounds))
    flooder = Flooder(flooding_socket(server.port), flood)
    flooder.start()
    try:
        assert flooder.wait_dropped()  # after --idle-timeout without reading
    finally:
        flooder.finish()
    lines = [json.loads(line) for line in server.lines() if line.startswith("{")]
    assert any(line["msg"] == "dflockd: answers unread; closing" for line in lines)
    served = fence(grant(await helper.ask("l", "probe-1", "0"))) - before - 1
    assert 0 < served < rounds  # the rest was never served (60 MB of answers)
    assert await helper.ask("ping") == "ok"


#: Keys that are not names tenure can keep: control characters (and a lone surrogate is
#: not even UTF-8, so it is a framing error); each is one request, answered ``error``.
BAD_KEYS = {
    "NUL": "k\x00ey",
    "escape": "k\x1b[31mey",
    "DEL": "k\x7fey",
    "C1": "k\x85ey",
    "bidi and bell": "\u202ek\x07",
}


@pytest.mark.parametrize("command", ["l", "sl", "e", "se"])
async def test_a_key_with_control_characters_is_an_error_line_and_takes_no_key_slot(
    serve: Serve, raw: Raws, command: str
) -> None:
    server = serve("--dflockd-max-locks", "1")
    conn = await raw.connect(server.port)
    argument = "0 1" if command in ("sl", "se") else "0"
    for key in BAD_KEYS.values():
        assert await conn.ask(command, key, argument) == "error"
    assert await conn.ask("ping") == "ok"  # the connection goes on
    # No key slot was used by the refused keys: the one slot is still free.
    assert grant(await conn.ask("l", "good", "0"), "ok")
    log = server.output()
    assert "Traceback" not in log, log[-4000:]
    for level in ("error", "critical"):
        assert f'"level": "{level}"' not in log, log[-4000:]
