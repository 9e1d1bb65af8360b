"""``tenure serve --shards N``: N servers on one host behind the sharded URL.

Real processes: the command starts its shards, the client spreads nodes over them,
SIGTERM stops them all, and a shard that dies stops the rest with a failing status.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import tenure
from tenure.server._config.serve_config import add_arguments
from tenure.server._faces import own_port, settings
from tenure.server._shards import shard_arguments, sharded_url
from tenure.server._startup import configure
from tests.ports import free_port

WAIT = 30.0


def two_ports() -> int:
    """A free port P with P + 1 free too: P even, so that both are in this xdist
    worker's share (tests/ports.py keeps ``p // 2``; Linux hands odd ports first)."""
    for _ in range(100):
        port = free_port()
        other = port - 1 if port % 2 else port + 1
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", other))
            except OSError:
                continue
        return min(port, other)
    raise RuntimeError("no two free ports in a row")


class Shards:
    """``tenure serve --shards 2`` in a temp dir; killed (with its shards) at the end."""

    def __init__(self, tmp_path: Path, *extra: str) -> None:
        self.port = two_ports()
        self.data_dir = tmp_path / "data"
        self.log_path = tmp_path / "shards.log"
        args = ["--shards", "2", "--port", str(self.port), "--data-dir", str(self.data_dir)]
        args += ["--fsync", "off", "--log-format", "json", *extra]
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tenure", "serve", *args],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.pids: list[int] = []

    def events(self, name: str) -> list[dict[str, object]]:
        found = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            if line.startswith("{") and f'"event": "{name}"' in line:
                found.append(json.loads(line))
        return found

    def wait_serving(self) -> None:
        deadline = time.monotonic() + WAIT
        while len(self.events("listening")) < 2:
            assert self.proc.poll() is None, self.log_path.read_text()
            assert time.monotonic() < deadline, self.log_path.read_text()
            time.sleep(0.05)
        (started,) = self.events("shards_started")
        self.pids = list(started["pids"])  # type: ignore[call-overload]

    def alive(self, pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        # A zombie is not reaped by us: its parent (the command) reaps it.
        stat = Path(f"/proc/{pid}/stat").read_text() if Path(f"/proc/{pid}").exists() else ""
        return bool(stat) and stat.split()[2] != "Z"

    def kill_all(self) -> None:
        for pid in self.pids:
            if self.alive(pid):
                os.kill(pid, signal.SIGKILL)
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(WAIT)


@pytest.fixture
def shards(tmp_path: Path) -> Iterator[Shards]:
    """The command, killed with its shards at the end."""
    running = Shards(tmp_path)
    yield running
    running.kill_all()


async def test_nodes_spread_over_the_shards_and_sigterm_stops_them_all(shards: Shards) -> None:
    shards.wait_serving()
    (started,) = shards.events("shards_started")
    url = f"tenure://127.0.0.1:{shards.port},127.0.0.1:{shards.port + 1}?sharded=true"
    assert started["url"] == url
    names = [f"node-{i}" for i in range(12)]
    async with tenure.connect(url) as client:
        for name in names:
            await client.create_node(name)
        async with client.session("node-3") as session, session.mutex("m") as lock:
            assert lock.token > 0
        # A node's long_hold goes to its shard, which tells of its long holds.
        assert tenure.Capability.LONG_HOLDS in client.capabilities
        await client.create_node("elections", long_hold=0.0)
        await client.alter_node("node-5", long_hold=30.0)
        assert (await client.describe_node("elections")).config.long_hold == 0.0
        assert (await client.describe_node("node-5")).config.long_hold == 30.0
    held: list[set[str]] = []
    for port in (shards.port, shards.port + 1):
        async with tenure.connect(f"tenure://127.0.0.1:{port}") as one:
            held.append({name for name in names if await _has(one, name)})
    assert held[0], "shard 0 holds some of the nodes"
    assert held[1], "shard 1 holds some of the nodes"
    assert held[0] | held[1] == set(names)
    assert not held[0] & held[1]
    assert (shards.data_dir / "shard-0").is_dir()
    assert (shards.data_dir / "shard-1").is_dir()
    shards.proc.send_signal(signal.SIGTERM)
    assert shards.proc.wait(WAIT) == 0
    assert not any(shards.alive(pid) for pid in shards.pids)
    assert len(shards.events("stopped")) == 2


async def _has(client: tenure.Client, name: str) -> bool:
    try:
        await client.describe_node(name)
    except tenure.errors.NotFoundError:
        return False
    return True


def test_a_shard_that_dies_stops_the_others_and_fails_the_command(shards: Shards) -> None:
    shards.wait_serving()
    os.kill(shards.pids[1], signal.SIGKILL)
    assert shards.proc.wait(WAIT) != 0
    assert not shards.alive(shards.pids[0])
    (exited,) = shards.events("shard_exited")
    assert exited["shard"] == 1
    assert exited["exit_code"] == -signal.SIGKILL


def test_no_shard_outlives_the_command_even_killed(shards: Shards) -> None:
    shards.wait_serving()
    shards.proc.kill()  # SIGKILL: no signal passed on; the kernel tells the shards
    shards.proc.wait(WAIT)
    deadline = time.monotonic() + WAIT
    while any(shards.alive(pid) for pid in shards.pids):
        assert time.monotonic() < deadline, "a shard outlived the command"
        time.sleep(0.05)


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--port", "0"], "--shards=2 needs a --port"),
        (["--cluster", "etcd://127.0.0.1:2379/x"], "--shards=2 with --cluster"),
        (["--port", "65535"], "is past 65535"),
        (["--port", "7000", "--http-port", "7001"], "--http-port=7001 + 0 is --port of shard 1"),
    ],
)
def test_shards_refuse_settings_they_cannot_offset(
    tmp_path: Path, extra: list[str], said: str
) -> None:
    argv = ["--shards", "2", "--data-dir", str(tmp_path), *extra]
    done = subprocess.run(
        [sys.executable, "-m", "tenure", "serve", *argv],
        capture_output=True,
        text=True,
        timeout=WAIT,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2
    assert said in done.stderr


def test_each_shard_gets_its_own_ports_and_data_directory(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser, settings())
    argv = ["--shards", "3", "--port", "7100", "--http-port", "7200"]
    argv += ["--dflockd-port", "7300", "--data-dir", str(tmp_path)]
    config = configure(parser.parse_args(argv), {})
    second = configure(parser.parse_args(shard_arguments(config, argv, 2)), {})
    assert (second.shards, second.port, second.http_port) == (1, 7102, 7202)
    assert own_port(second, "dflockd")[1] == 7302
    assert second.data_dir == tmp_path / "shard-2"
    assert sharded_url(config) == (
        "tenure://127.0.0.1:7100,127.0.0.1:7101,127.0.0.1:7102?sharded=true"
    )
