"""One local etcd member for the etcd:// backend's own tests (a minimal fixture).

Started on free loopback ports with its data in a temp dir, stopped by PID (SIGKILL
if it does not stop). Replaceable by the shared fixtures of ``tests/etcd/`` once they
exist. Skips when ``etcd`` is not installed, but fails under ``CI=true``.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def etcd_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``127.0.0.1:PORT`` of a running single-member etcd."""
    binary = shutil.which("etcd")
    if binary is None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("etcd is not installed (CI=true: a missing etcd is a failure)")
        pytest.skip("etcd is not installed (apt-get install etcd-server)")
    data: Path = tmp_path_factory.mktemp("etcd")
    client, peer = _free_port(), _free_port()
    log = (data / "log").open("wb")
    process = subprocess.Popen(
        [
            binary,
            "--name=t",
            f"--data-dir={data / 'data'}",
            f"--listen-client-urls=http://127.0.0.1:{client}",
            f"--advertise-client-urls=http://127.0.0.1:{client}",
            f"--listen-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-cluster=t=http://127.0.0.1:{peer}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", client)) == 0:
                    break
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"etcd did not start: {(data / 'log').read_text()[-2000:]}")
            time.sleep(0.05)
        yield f"127.0.0.1:{client}"
    finally:
        os.kill(process.pid, signal.SIGTERM)
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait()
        log.close()


@pytest.fixture
def etcd_url(etcd_endpoint: str) -> str:
    """A URL with a prefix of its own (tests do not meet)."""
    return f"etcd://{etcd_endpoint}?prefix=/test/{uuid.uuid4().hex[:12]}/"
