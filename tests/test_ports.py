"""The test harness's free ports: outside the OS's own range, each worker's apart, and
never the same one twice to one process."""

from __future__ import annotations

import collections
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import ports


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that was handed no port yet, outside xdist."""
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    monkeypatch.setattr(ports, "_handed", collections.deque(maxlen=2))
    monkeypatch.setattr(ports, "_handed_set", set())


def _range_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "ip_local_port_range"
    path.write_text(text)
    return str(path)


def test_ports_are_chosen_below_the_range_the_os_picks_from(tmp_path: Path) -> None:
    assert ports.chosen_ports(_range_file(tmp_path, "32768\t60999\n")) == range(10000, 32768)
    # A range that starts low leaves the ports above it.
    assert ports.chosen_ports(_range_file(tmp_path, "1024 60000")) == range(60001, 65536)
    # No room either side, or nothing to read: bind(0) as before.
    assert ports.chosen_ports(_range_file(tmp_path, "1024 65000")) is None
    assert ports.chosen_ports(_range_file(tmp_path, "lots")) is None
    assert ports.chosen_ports(str(tmp_path / "absent")) is None


@pytest.mark.usefixtures("fresh")
def test_no_port_the_os_would_pick_by_itself_is_handed() -> None:
    # What collided in CI: a proxy listening on port 0 took a member's chosen port.
    low, high = (int(w) for w in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    for _ in range(50):
        port = ports.free_port()
        assert not low <= port <= high, f"{port} is in the OS's own range {low}-{high}"
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))  # and it was free


@pytest.mark.usefixtures("fresh")
def test_a_port_something_listens_on_is_not_handed(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        with socket.socket() as spare:
            spare.bind(("127.0.0.1", 0))
            free = spare.getsockname()[1]
        tries = iter([busy, busy, free])
        monkeypatch.setattr(ports, "chosen_ports", lambda: range(busy, busy + 1))
        monkeypatch.setattr(ports._random, "choice", lambda _: next(tries))
        assert ports.free_port() == free


@pytest.mark.usefixtures("fresh")
def test_one_process_is_never_handed_a_port_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    # A server given `--port P --http-port P` refuses to start: the same port twice
    # to one process failed a cluster start once in a CI run; make it come every time.
    handed: Iterator[int | None] = iter([41001, 41001, 41001, 41003, 41003, 41005])
    monkeypatch.setattr(ports, "_candidate", lambda _: next(handed))
    assert [ports.free_port(), ports.free_port(), ports.free_port()] == [41001, 41003, 41005]
    assert ports._handed_set == {41003, 41005}, "only the last REMEMBERED are kept"


@pytest.mark.usefixtures("fresh")
def test_each_xdist_worker_keeps_to_its_share(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")
    monkeypatch.setattr(ports, "_handed", collections.deque(maxlen=100))
    handed = [ports.free_port() for _ in range(30)]
    assert all((port // 2) % 2 == 1 for port in handed), handed
    assert len(set(handed)) == len(handed)
