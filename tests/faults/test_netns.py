"""tools/faults/netns.py for real: two namespaces, the kernel's cuts, resets and teardown.

Sockets are made inside a namespace by a thread of this process that enters it
(``setns``: a socket stays in the namespace it was made in), so that a datagram or a
connection across each way is seen from both ends without a process per probe. Skips
without root or iproute2, and fails under ``CI=true``.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

from tests.faults.conftest import require_netns
from tools.faults.netns import Net
from tools.faults.netns_slots import link_names, namespace_names, sweep

#: How long a probe waits for what a cut should stop, in seconds.
QUIET: Final = 0.6
#: How long a datagram that must cross may take: a bound against a hang (it is met as
#: the datagram comes). 0.6 s, what a quiet check waits, was missed beside a CI run
#: under a CPU hog.
ARRIVAL: Final = 15.0
_CLONE_NEWNET: Final = 0x40000000
#: A fixed port: each namespace is the test's own, no other process binds there.
_PORT: Final = 9300


@pytest.fixture
def net() -> Iterator[Net]:
    require_netns("the netns test")
    with Net() as made:
        made.add("a")
        made.add("b")
        yield made


def _socket_in(net: Net, name: str, kind: int) -> socket.socket:
    """A socket of ``kind`` made inside member ``name``'s namespace."""
    made: list[socket.socket] = []
    failed: list[int] = []

    def enter_and_make() -> None:
        # This thread enters the namespace and ends there: the caller's is untouched.
        fd = os.open(f"/run/netns/{net.namespace(name)}", os.O_RDONLY | os.O_CLOEXEC)
        try:
            if ctypes.CDLL(None, use_errno=True).setns(fd, _CLONE_NEWNET) != 0:
                failed.append(ctypes.get_errno())
                return
        finally:
            os.close(fd)
        made.append(socket.socket(socket.AF_INET, kind))

    thread = threading.Thread(target=enter_and_make)
    thread.start()
    thread.join(timeout=10.0)
    assert made, f"setns into {name}: errno {failed}"
    return made[0]


def _datagram_crosses(net: Net, src: str, dst: str, *, wait: float = ARRIVAL) -> bool:
    """Whether a datagram from ``src`` reaches ``dst`` within ``wait`` seconds (sent
    again every :data:`QUIET` / 4: the first may wait on the neighbour's address). A
    datagram that must cross is waited for up to :data:`ARRIVAL`, returning as it
    comes; one that must not, for :data:`QUIET`."""
    with (
        _socket_in(net, dst, socket.SOCK_DGRAM) as inbox,
        _socket_in(net, src, socket.SOCK_DGRAM) as outbox,
    ):
        inbox.bind((net.address(dst), _PORT))
        inbox.settimeout(QUIET / 4)
        deadline = time.monotonic() + wait
        while True:
            outbox.sendto(f"{src}>{dst}".encode(), (net.address(dst), _PORT))
            try:
                data, peer = inbox.recvfrom(64)
            except TimeoutError:
                if time.monotonic() >= deadline:
                    return False
                continue
            assert (data.decode(), peer[0]) == (f"{src}>{dst}", net.address(src))
            return True


@contextlib.contextmanager
def _connection(net: Net, client: str, server: str) -> Iterator[tuple[socket.socket, ...]]:
    """An established TCP connection from ``client`` to ``server``: both ends."""
    with _socket_in(net, server, socket.SOCK_STREAM) as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((net.address(server), _PORT))
        listener.listen()
        with _socket_in(net, client, socket.SOCK_STREAM) as near:
            near.settimeout(ARRIVAL)
            near.connect((net.address(server), _PORT))
            far, _ = listener.accept()
            with far:
                far.settimeout(QUIET)
                near.settimeout(QUIET)
                yield near, far


def test_a_one_way_cut_drops_that_way_only_and_heals(net: Net) -> None:
    assert _datagram_crosses(net, "a", "b")
    assert _datagram_crosses(net, "b", "a")
    net.cut([("a", "b")])
    assert net.cuts == {("a", "b")}
    assert not _datagram_crosses(net, "a", "b", wait=QUIET)
    assert _datagram_crosses(net, "b", "a")
    # A's SYN is dropped: the connect hangs (no reset, no ICMP error), as behind a
    # real partition.
    with _socket_in(net, "a", socket.SOCK_STREAM) as probe:
        probe.settimeout(QUIET)
        with pytest.raises(TimeoutError):
            probe.connect((net.address("b"), _PORT))
    net.heal()
    assert net.cuts == frozenset()
    assert _datagram_crosses(net, "a", "b")
    # The host (the harness's side) reaches both; nothing else is routed.
    host = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    with host, _socket_in(net, "a", socket.SOCK_DGRAM) as inbox:
        inbox.bind((net.address("a"), _PORT))
        inbox.settimeout(ARRIVAL)
        host.sendto(b"host", (net.address("a"), _PORT))
        assert inbox.recvfrom(64)[0] == b"host"
    with (
        _socket_in(net, "a", socket.SOCK_DGRAM) as outside,
        pytest.raises(OSError, match="unreachable"),
    ):
        outside.sendto(b"out", ("192.0.2.1", _PORT))  # TEST-NET-1: no route


def test_a_cut_leaves_a_connection_half_open_and_delivers_once_healed(net: Net) -> None:
    with _connection(net, "a", "b") as (near, far):
        net.cut_between(["a"], ["b"])
        near.sendall(b"into the cut")
        # Neither end hears anything: no data, no reset, no end of stream.
        with pytest.raises(TimeoutError):
            far.recv(64)
        with pytest.raises(TimeoutError):
            near.recv(64)
        net.heal()
        far.settimeout(ARRIVAL)  # the next retransmission, after the backoff
        assert far.recv(64) == b"into the cut"


def test_answers_lost_then_a_reset_both_ends_see(net: Net) -> None:
    """The ``answers-lost`` fault: b's packets to a dropped, a's connection destroyed."""
    with _connection(net, "a", "b") as (near, far):
        net.cut([("b", "a")])
        near.sendall(b"request")
        far.settimeout(ARRIVAL)
        assert far.recv(64) == b"request"  # a's way is open: the request arrives
        far.settimeout(QUIET)
        far.sendall(b"answer")
        with pytest.raises(TimeoutError):
            near.recv(64)  # the answer is lost
        assert net.reset("a", ["b"]) == 1
        with pytest.raises(ConnectionAbortedError):
            near.recv(64)  # the client's end is gone at once
        far.settimeout(ARRIVAL)
        with pytest.raises(ConnectionResetError):
            far.recv(64)  # and its reset reached b
        assert net.reset("a", ["b"]) == 0


def test_teardown_leaves_nothing_and_a_killed_runs_net_is_swept(tmp_path: Path) -> None:
    require_netns("the netns test")
    with Net() as net:
        net.add("a")
        slot = net.slot
        assert net.namespace("a") in namespace_names(_ip("netns", "list"))
    assert not [n for n in namespace_names(_ip("netns", "list")) if n.startswith(f"tnr{slot}-")]
    assert f"tnr{slot}" not in link_names(_ip("-o", "link", "show"))
    # A run killed with a process left in its namespace: the next sweep kills that
    # process and removes the namespaces and the host's link.
    script = (
        "import subprocess, sys, time\n"
        "from tools.faults.netns import Net\n"
        "net = Net().open(); net.add('a')\n"
        "child = subprocess.Popen(net.command('a', ['sleep', '60']))\n"
        "print(net.slot, child.pid, flush=True); time.sleep(60)\n"
    )
    owner = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=_repo()
    )
    assert owner.stdout is not None
    with owner.stdout:
        try:
            slot, left = (int(word) for word in owner.stdout.readline().split())
        finally:
            owner.send_signal(signal.SIGKILL)
            owner.wait(timeout=10.0)
    assert f"tnr{slot}-a" in namespace_names(_ip("netns", "list"))
    removed = sweep()
    assert {f"tnr{slot}", f"tnr{slot}-hub", f"tnr{slot}-a"} <= set(removed), removed
    assert not [n for n in namespace_names(_ip("netns", "list")) if n.startswith(f"tnr{slot}-")]
    assert f"tnr{slot}" not in link_names(_ip("-o", "link", "show"))
    assert _gone(left), f"the process left in the namespace runs on: {left}"


def _gone(pid: int) -> bool:
    """Whether ``pid`` ended within a few seconds (a zombie nobody reaps counts)."""
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0]
        except (FileNotFoundError, IndexError):
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


def _ip(*args: str) -> str:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=15.0).stdout


def _repo() -> Path:
    return Path(__file__).resolve().parents[2]
