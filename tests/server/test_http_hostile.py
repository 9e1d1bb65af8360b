"""Malformed and hostile HTTP requests, unauthenticated, against a real ``tenure serve
--http-port``: each is answered 4xx, the ones aiohttp cannot parse are logged as one
``info`` line (``http_bad_request``: the peer, the status, the error's kind, never its
text), and nothing is ever logged as an error or with a traceback; a JSON body nested
deeper than Python's reader goes (4,000 ``[``) is a 400, not a 500."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest

from .wire import WAIT, ServerProcess, free_port

pytestmark = pytest.mark.timeout(60)

SECRET = "hostile-http-secret-1"


def post_json(body: str | bytes) -> bytes:
    raw = body.encode() if isinstance(body, str) else body
    return (
        "POST /dashboard/api/login HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(raw)}\r\n\r\n"
    ).encode() + raw


#: Requests aiohttp's parser refuses: each must be one info line.
UNPARSABLE = {
    "garbage request line": b"GARBAGE\r\n\r\n",
    "control character in the method": b"G\x01T / HTTP/1.1\r\nHost: x\r\n\r\n",
    "space in a header name": b"GET / HTTP/1.1\r\nHo st: x\r\n\r\n",
    "content-length not a number": b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
    "negative content-length": b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
    "bad chunk size": b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    "NUL in the path": b"GET /\x00 HTTP/1.1\r\nHost: x\r\n\r\n",
    "DEL in a cookie": b"GET / HTTP/1.1\r\nHost: x\r\nCookie: t=\x7f\r\n\r\n",
    "a secret in a broken header": (
        f"GET / HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {SECRET}\x00\r\n\r\n".encode()
    ),
    "HTTP/2 preface": b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
    "HTTP/9.9": b"GET / HTTP/9.9\r\nHost: x\r\n\r\n",
    "20,000-byte URL": b"GET /" + b"a" * 20_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
    "20,000-byte header": b"GET / HTTP/1.1\r\nX: " + b"a" * 20_000 + b"\r\n\r\n",
}

#: Requests that parse, but whose body or target is hostile: answered by our handlers.
HOSTILE = {
    "4,000 [ as a login body": post_json("[" * 4000),
    "2,000-deep array as a secret": post_json('{"secret": ' + "[" * 2000 + "]" * 2000 + "}"),
    "invalid UTF-8 as a login body": post_json(b'{"secret": "\xff\xfe"}'),
    "a number as the secret": post_json('{"secret": 5}'),
    "NaN as the secret": post_json('{"secret": NaN}'),
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, int]]:
    base = tmp_path_factory.mktemp("hostile-http")
    auth = base / "auth.toml"
    auth.write_text(f'[[token]]\nname = "ops"\nsecret = "{SECRET}"\naccess = "read-write"\n')
    http = free_port()
    flags = ("--fsync", "off", "--http-port", str(http), "--auth-file", str(auth))
    with ServerProcess(base / "data", *flags) as process:
        process.wait_listening()
        yield process, http


def status_of(http: int, request: bytes) -> int:
    """The status the server answers ``request`` with (read until it closes)."""
    with socket.create_connection(("127.0.0.1", http), timeout=WAIT) as sock:
        sock.sendall(request)
        data = b""
        with_end = True
        while with_end:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            with_end = bool(chunk)
            data += chunk
    assert data.startswith(b"HTTP/1."), data[:200]
    return int(data.split(b" ", 2)[1])


def new_lines(server: ServerProcess, before: int) -> list[dict[str, object]]:
    return [json.loads(line) for line in server.output()[before:].splitlines()]


def assert_no_error_logged(server: ServerProcess) -> None:
    log = server.output()
    assert "Traceback" not in log, log[-4000:]
    for level in ("error", "critical"):
        assert f'"level": "{level}"' not in log, log[-4000:]
    assert SECRET not in log


@pytest.mark.parametrize("request_bytes", list(UNPARSABLE.values()), ids=list(UNPARSABLE))
def test_an_unparsable_request_is_a_400_and_one_info_line(
    server: tuple[ServerProcess, int], request_bytes: bytes
) -> None:
    process, http = server
    before = len(process.output())
    assert status_of(http, request_bytes) == 400
    # The line is written before the answer is sent: no wait needed.
    [line] = new_lines(process, before)
    assert (line["level"], line["event"], line["status"]) == ("info", "http_bad_request", 400)
    assert line["peer"] == "127.0.0.1"
    assert isinstance(line["error"], str)
    assert line["error"].isidentifier()  # the error's kind (a class name), not its text
    assert_no_error_logged(process)


@pytest.mark.parametrize("request_bytes", list(HOSTILE.values()), ids=list(HOSTILE))
def test_a_hostile_body_is_a_4xx_never_a_500(
    server: tuple[ServerProcess, int], request_bytes: bytes
) -> None:
    process, http = server
    assert 400 <= status_of(http, request_bytes) < 500
    assert_no_error_logged(process)
