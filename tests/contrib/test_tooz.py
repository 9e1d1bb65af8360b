"""The tooz driver beyond tooz's suite: fencing tokens, forks, crashes, URLs, TLS, the example.

tooz's own suite (test_tooz_suite.py) holds the driver to tooz's API. These hold
it to what it promises besides: locks and leaderships with fencing tokens, a
forked child on its own connection, a killed member out within its timeout, a
previous incarnation booted out of one group without losing its locks, the URL's
options, ``tenures://``, and examples/tooz_groups.py. One ``tenure serve`` for the
module (each test on a node of its own).
"""

from __future__ import annotations

import datetime
import multiprocessing
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tooz
import trustme
from tooz import coordination

import tenure.sync
from tenure.contrib.tooz import TenureDriver, TenureLock
from tests.server.wire import ServerProcess
from tests.test_examples import run_example

#: Bound of every wait on the server's state here.
PATIENCE = 15.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with ServerProcess(tmp_path_factory.mktemp("tooz") / "data", "--fsync", "off") as server:
        yield server


@pytest.fixture
def url(server: ServerProcess) -> str:
    """The server, on a node of this test's own."""
    return f"tenure://127.0.0.1:{server.port}?node=t{uuid.uuid4().hex[:12]}"


def started(url: str, member: bytes, **options: Any) -> TenureDriver:
    coord = coordination.get_coordinator(url, member, **options)
    assert isinstance(coord, TenureDriver)
    coord.start()
    return coord


def until(check: object, what: str) -> None:
    deadline = time.monotonic() + PATIENCE
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.05)


def test_locks_and_leaderships_carry_fencing_tokens_that_grow(url: str) -> None:
    one, two = started(url, b"one"), started(url, b"two")
    lock1, lock2 = one.get_lock(b"disk"), two.get_lock(b"disk")
    assert isinstance(lock1, TenureLock)
    assert lock1.token is None

    assert lock1.acquire()
    first = lock1.token
    assert first is not None
    assert lock1.is_still_owner()
    assert not lock2.acquire(blocking=False)
    assert lock1.release()
    assert lock1.token is None
    assert not lock1.is_still_owner()
    assert lock2.acquire(blocking=False)
    assert lock2.token is not None
    assert lock2.token > first

    # Shared holds have a token each; break_ ends them all, and the owners know.
    assert lock2.release()
    assert lock1.acquire(shared=True)
    assert lock2.acquire(shared=True)
    assert lock1.token != lock2.token
    assert lock2.break_()
    assert not lock1.is_still_owner()
    assert lock1.token is None
    assert not lock1.release()

    one.create_group(b"g").get()
    one.watch_elected_as_leader(b"g", lambda event: None)
    two.watch_elected_as_leader(b"g", lambda event: None)
    one.run_watchers()
    led = one.leadership_token(b"g")
    assert led is not None
    assert two.leadership_token(b"g") is None
    assert one.stand_down_group_leader(b"g")
    two.run_watchers()
    after = two.leadership_token(b"g")
    assert after is not None
    assert after > led
    assert two.get_leader(b"g").get() == b"two"

    one.join_group(b"g", {"zone": "a"}).get()
    info = two.get_member_info(b"g", b"one").get()
    assert info["capabilities"] == {"zone": "a"}
    assert isinstance(info["created_at"], datetime.datetime)
    assert info["token"] > after
    one.stop()
    two.stop()


def _in_a_forked_child(coord: TenureDriver, queue: multiprocessing.Queue[object]) -> None:
    try:
        held_by_parent = coord.get_lock(b"parent's").acquire(blocking=False)
        own = coord.get_lock(b"child's")
        taken = own.acquire(blocking=False)
        session = coord.run(coord.coordinator.main).id
        queue.put((held_by_parent, taken, own.token, coord.get_members(b"g").get(), session))
        coord.stop()
    except BaseException as error:
        queue.put(repr(error))


def test_a_forked_child_opens_its_own_connection_and_leaves_the_parents_alone(url: str) -> None:
    coord = started(url, b"forking")
    coord.create_group(b"g").get()
    coord.join_group(b"g").get()
    parents = coord.get_lock(b"parent's")
    assert parents.acquire()
    context = multiprocessing.get_context("fork")
    queue: multiprocessing.Queue[object] = context.Queue()
    child = context.Process(target=_in_a_forked_child, args=(coord, queue))
    child.start()
    try:
        found = queue.get(timeout=PATIENCE)
    finally:
        child.join(timeout=PATIENCE)
        if child.is_alive():  # stuck: never left running
            child.kill()
            child.join(timeout=PATIENCE)
    # The child: a session of its own (the parent's lock is not its), the parent's
    # membership still in the group (it stopped without touching it).
    assert isinstance(found, tuple), found
    held_by_parent, taken, token, members, session = found
    assert session != coord.run(coord.coordinator.main).id
    assert (held_by_parent, taken) == (False, True)
    assert isinstance(token, int)
    assert members == {b"forking"}
    assert child.exitcode == 0
    # The parent: its lock, its membership, its connection, all as they were; the
    # child's lock went with the child's stop.
    assert parents.is_still_owner()
    assert coord.get_members(b"g").get() == {b"forking"}
    assert coord.get_lock(b"child's").acquire(blocking=False)
    coord.stop()


CRASHING = """
import sys, time
from tooz import coordination
coord = coordination.get_coordinator(sys.argv[1], b"doomed")
coord.start()
coord.join_group(b"g").get()
assert coord.get_lock(b"volume").acquire()
print("joined", flush=True)
time.sleep(600)
"""


def test_a_killed_member_is_out_within_its_timeout(url: str) -> None:
    watcher = started(url, b"watcher")
    watcher.create_group(b"g").get()
    with subprocess.Popen(
        [sys.executable, "-c", CRASHING, f"{url}&timeout=2"], stdout=subprocess.PIPE, text=True
    ) as child:
        try:
            assert child.stdout is not None
            assert child.stdout.readline() == "joined\n"
            assert watcher.get_members(b"g").get() == {b"doomed"}
            assert not watcher.get_lock(b"volume").acquire(blocking=False)
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=PATIENCE)
    until(lambda: watcher.get_members(b"g").get() == set(), "the killed member leaves")
    assert watcher.get_lock(b"volume").acquire(timeout=PATIENCE)
    watcher.stop()


def test_an_incarnation_booted_out_of_a_group_keeps_its_locks(url: str) -> None:
    old = started(url, b"cinder-volume")
    for group in (b"volumes", b"backups"):
        old.create_group(group).get()
        old.join_group(group).get()
    lock = old.get_lock(b"volume-1")
    assert lock.acquire()
    new = started(url, b"cinder-volume")  # the same member id: a restarted service
    join = new.join_group(b"volumes")
    with pytest.raises(coordination.MemberAlreadyExist):
        join.get()

    new.leave_group(b"volumes").get()  # boots the old one out of this group only
    new.join_group(b"volumes").get()

    assert lock.is_still_owner()
    assert new.get_members(b"backups").get() == {b"cinder-volume"}
    old.run_watchers()
    old.stop()
    assert new.get_members(b"volumes").get() == {b"cinder-volume"}
    new.stop()


def test_the_url_chooses_the_node_and_the_group_limit_and_bad_options_are_refused(
    server: ServerProcess,
) -> None:
    node = f"t{uuid.uuid4().hex[:12]}"
    base = f"tenure://127.0.0.1:{server.port}"
    url = f"{base}?node={node}&max_members=2"
    coords = [started(url, f"m{i}".encode()) for i in range(3)]
    coords[0].create_group(b"small group").get()
    coords[0].join_group(b"small group", {"n": 0}).get()
    coords[1].join_group(b"small group").get()
    with pytest.raises(tooz.ToozError, match="max_members"):
        coords[2].join_group(b"small group").get()

    # What tooz made is tenure's own group, in that node, under a readable name.
    with tenure.sync.connect(base) as client, client.session(node) as session:
        members = session.group("tooz/group/small%20group").members()
    assert set(members) == {"m0", "m1"}
    for coord in coords:
        coord.stop()

    for bad, why in (
        ("?nodes=x", "unknown option"),
        ("?timeout=soon", "timeout must be a number"),
        ("?timeout=0", "timeout must be a positive number"),
        ("?max_members=2.5", "max_members must be a positive number"),
    ):
        with pytest.raises(tooz.ToozError, match=why):
            coordination.get_coordinator(base + bad, b"m")
    with pytest.raises(coordination.ToozConnectionError):
        coordination.get_coordinator("tenure://127.0.0.1:1", b"m").start()


def test_tenures_reaches_a_tls_server(tmp_path: Path) -> None:
    ca = trustme.CA()
    issued = ca.issue_cert("127.0.0.1")
    cert, key, ca_file = tmp_path / "server.pem", tmp_path / "server.key", tmp_path / "ca.pem"
    for blob in issued.cert_chain_pems:
        blob.write_to_path(str(cert), append=True)
    issued.private_key_pem.write_to_path(str(key))
    ca.cert_pem.write_to_path(str(ca_file))
    tls = ("--tls-cert", str(cert), "--tls-key", str(key))
    with ServerProcess(tmp_path / "data", "--fsync", "off", *tls) as server:
        coord = started(f"tenures://127.0.0.1:{server.port}?ca={ca_file}", b"over-tls")
        coord.create_group(b"g").get()
        assert coord.get_groups().get() == [b"g"]
        coord.stop()
        plain = coordination.get_coordinator(f"tenure://127.0.0.1:{server.port}", b"plain")
        with pytest.raises(tooz.ToozError):
            plain.start()


def test_the_example_runs_groups_leaders_locks_a_partitioner_and_a_timeout() -> None:
    lines = run_example("tooz_groups.py")
    assert lines[:3] == [
        "api-1 sees api-2 join 'api'",
        "member api-1: {'address': '10.0.0.1:8776'}",
        "member api-2: {'address': '10.0.0.2:8776'}",
    ]
    led = [re.match(r"(api-\d) leads 'api' with fencing token (\d+)$", line) for line in lines]
    terms = [(m[1], int(m[2])) for m in led if m]
    assert [name for name, _ in terms] == ["api-1", "api-2"]
    assert terms[0][1] < terms[1][1]
    assert [line for line in lines if line.startswith("leader: ")] == [
        "leader: b'api-1'",
        "leader: b'api-2'",
    ]
    holds = [
        re.match(r"(api-\d) holds 'volume-7' with fencing token (\d+)$", line) for line in lines
    ]
    tokens = [int(m[2]) for m in holds if m]
    assert len(tokens) == 2
    assert tokens[0] < tokens[1]
    assert "api-2 can take it meanwhile: False" in lines
    owned = [
        re.match(r"volume-\d: owned by worker-(\d), which alone says mine: \[(\d)\]$", line)
        for line in lines
    ]
    assert len([m for m in owned if m and m[1] == m[2]]) == 6
    assert lines[-3:] == [
        "members of 'batch': ['stuck', 'watcher']",
        "watcher sees stuck leave after 1 s without a heartbeat",
        "members of 'batch': ['watcher']",
    ]
