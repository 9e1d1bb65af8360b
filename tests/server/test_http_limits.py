"""The HTTP port's bounds, with raw sockets against a real ``tenure serve --http-port``:
idle connections closed after ``--http-idle-timeout``, a half-sent request after
``--http-header-timeout``, connections over ``--http-max-connections`` answered 503
and closed while the others keep working; ``--metrics-auth``; and these settings'
checks at start-up."""

from __future__ import annotations

import argparse
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tenure.server._config.serve_config import ConfigError, ServeConfig, add_arguments, resolve

from .wire import WAIT, ServerProcess, free_port

pytestmark = pytest.mark.timeout(60)

GET = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"


def serve(tmp_path: Path, *extra: str) -> Iterator[tuple[ServerProcess, int]]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    http = free_port()
    with ServerProcess(tmp_path / "data", "--fsync", "off", "--http-port", str(http), *extra) as s:
        yield s, http


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=WAIT)


def closed_within(sock: socket.socket, seconds: float) -> float:
    """How long until the server closed ``sock`` (reads what it sends till then)."""
    started = time.monotonic()
    sock.settimeout(seconds)
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        raise AssertionError(f"still open after {seconds} s") from None
    except ConnectionResetError:
        pass
    return time.monotonic() - started


def answer(sock: socket.socket) -> bytes:
    """One response to ``GET`` (its head and the short body of /healthz)."""
    sock.sendall(GET)
    data = b""
    while not data.endswith(b"ok\n"):
        chunk = sock.recv(65536)
        assert chunk, data
        data += chunk
    return data


def test_idle_and_half_sent_connections_are_closed(tmp_path: Path) -> None:
    for _, http in serve(tmp_path, "--http-idle-timeout", "0.5", "--http-header-timeout", "5"):
        with connect(http) as idle:
            assert answer(idle).startswith(b"HTTP/1.1 200")
            assert closed_within(idle, 4) < 4  # kept alive, then closed once idle
    for _, http in serve(
        tmp_path / "2", "--http-idle-timeout", "30", "--http-header-timeout", "0.5"
    ):
        with connect(http) as half, connect(http) as silent, connect(http) as whole:
            assert answer(whole).startswith(b"HTTP/1.1 200")  # a whole head in time: served
            half.sendall(b"GET /healthz HT")
            assert closed_within(half, 4) < 4
            assert closed_within(silent, 4) < 4
            assert answer(whole).startswith(b"HTTP/1.1 200")  # then idle: kept (30 s)


def test_connections_over_the_limit_are_refused_and_the_others_work(tmp_path: Path) -> None:
    for server, http in serve(tmp_path, "--http-max-connections", "3"):
        held = [connect(http) for _ in range(3)]
        try:
            for sock in held:
                assert answer(sock).startswith(b"HTTP/1.1 200")
            for _ in range(5):  # a burst: refused at once, one log line
                with connect(http) as extra:
                    extra.settimeout(WAIT)
                    assert extra.recv(100).startswith(b"HTTP/1.1 503")
                    assert closed_within(extra, 2) < 2
            for sock in held:  # the admitted ones still work
                assert answer(sock).startswith(b"HTTP/1.1 200")
            assert server.output().count("http connections refused") == 1
            held.pop().close()
            deadline = time.monotonic() + WAIT
            while True:  # (the server notices the close in a moment)
                with connect(http) as again:
                    try:
                        assert answer(again).startswith(b"HTTP/1.1 200")
                        break
                    except (AssertionError, ConnectionError):
                        assert time.monotonic() < deadline
                        time.sleep(0.05)
        finally:
            for sock in held:
                sock.close()


READER = "reader-secret-1"


def test_metrics_may_require_a_token(tmp_path: Path) -> None:
    auth = tmp_path / "auth.toml"
    tmp_path.mkdir(parents=True, exist_ok=True)
    auth.write_text(f'[[token]]\nname = "scraper"\nsecret = "{READER}"\naccess = "read-only"\n')
    request = b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n%s\r\n"
    for _, http in serve(tmp_path / "open", "--auth-file", str(auth)):
        with connect(http) as sock:  # open by default, even with an auth file
            sock.sendall(request % b"")
            assert sock.recv(100).startswith(b"HTTP/1.1 200")
    for _, http in serve(tmp_path / "auth", "--auth-file", str(auth), "--metrics-auth", "true"):
        for header, status in (
            (b"", b"401"),
            (b"Authorization: Bearer wrong\r\n", b"401"),
            (f"Authorization: Bearer {READER}\r\n".encode(), b"200"),
        ):
            with connect(http) as sock:
                sock.sendall(request % header)
                assert sock.recv(100).startswith(b"HTTP/1.1 " + status)


def test_the_http_settings_are_checked_at_start_up(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)

    def parse(*argv: str) -> ServeConfig:
        return resolve(parser.parse_args(["--http-port", "8080", *argv]), {})

    with pytest.raises(ConfigError, match="--http-tls-cert and --http-tls-key go together"):
        parse("--http-tls-cert", str(tmp_path / "cert.pem"))
    (tmp_path / "cert.pem").write_text("not a certificate")
    with pytest.raises(ConfigError, match=r"http_tls_cert .*cert\.pem / http_tls_key"):
        parse(
            "--http-tls-cert",
            str(tmp_path / "cert.pem"),
            "--http-tls-key",
            str(tmp_path / "cert.pem"),
        )
    with pytest.raises(ConfigError, match="--metrics-auth needs --auth-file"):
        parse("--metrics-auth", "true")
    with pytest.raises(ConfigError, match="--http-max-connections"):
        parse("--http-max-connections", "0")
    config = parse("--http-header-timeout", "2.5")
    assert (config.http_header_timeout, config.http_idle_timeout) == (2.5, 60.0)


def test_a_token_limited_to_some_nodes_is_not_shown_the_names_of_every_node(
    tmp_path: Path,
) -> None:
    # The statistics per name (tenure_name_*) label each series with a node and a
    # semaphore's name: with --metrics-auth, a token that may not read every node is
    # shown /metrics without them.
    import tenure.sync

    tmp_path.mkdir(parents=True, exist_ok=True)
    auth = tmp_path / "auth.toml"
    auth.write_text(
        f'[[token]]\nname = "scraper"\nsecret = "{READER}"\naccess = "read-only"\n'
        '[[token]]\nname = "ops"\nsecret = "ops-secret-2"\naccess = "read-write"\n'
        '[[token]]\nname = "shop"\nsecret = "shop-secret-3"\naccess = "read-only"\n'
        'nodes = ["shop"]\n'
    )
    flags = ("--auth-file", str(auth), "--metrics-auth", "true")
    for server, http in serve(tmp_path / "names", *flags):
        with tenure.sync.connect(f"tenure://127.0.0.1:{server.port}", token="ops-secret-2") as c:
            c.create_node("payroll")
            with c.session("payroll") as holder, c.session("payroll") as waiter:
                held = holder.mutex("salaries").lock()
                with pytest.raises(TimeoutError):  # (queued, then timed out: the name is kept)
                    waiter.mutex("salaries").lock(timeout=0.2)
                held.release()
        for secret, shown in ((READER, True), ("shop-secret-3", False)):
            with connect(http) as sock:
                sock.sendall(
                    b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                    + f"Authorization: Bearer {secret}\r\n\r\n".encode()
                )
                text = b""
                while part := sock.recv(65536):
                    text += part
            assert text.startswith(b"HTTP/1.1 200")
            assert (b'name="salaries"' in text) is shown, secret
            assert (b"tenure_name_wait_seconds_total" in text) is shown, secret
            assert b"tenure_state_estimate_bytes" in text  # (the rest, for both)
