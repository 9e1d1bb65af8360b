"""tooz over tenure: groups, a leader, locks with fencing tokens, a partitioner, a timeout.

OpenStack services coordinate through tooz (``[coordination] backend_url = ...``).
With tenure's tooz driver (``pip install 'tenure[tooz]'``) the URL is
``tenure://host:6388?node=NAME&timeout=SECONDS``, and tooz's API is the same:

* two API workers join the group "api" with their address as capabilities, and the
  first sees the second join (``watch_join_group``, ``run_watchers``);
* they run for its leader (``watch_elected_as_leader``): one leads, with a fencing
  token; it stands down and the other leads, with a greater one;
* one holds the lock "volume-7" (its fencing token is ``lock.token``, which no other
  tooz driver gives); the other cannot have it, then can;
* three workers share "volume-1" to "volume-6" through tooz's partitioner: each
  volume has one owner, and every worker agrees on it;
* a worker that stops calling ``heartbeat()`` is out of its groups once its
  ``timeout`` has passed, though its process and connection are still alive.

Run it as it is (it starts a throwaway ``tenure serve`` of its own on a free port)::

    python examples/tooz_groups.py

or against your server::

    TENURE_URL=tenure://127.0.0.1:6388 python examples/tooz_groups.py

It uses the node "tooz-demo".
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator

from tooz import coordination

from tenure.contrib.tooz import TenureDriver

NODE = "tooz-demo"
TIMEOUT = 1.0  # seconds the worker that stops heartbeating stays a member


def coordinator(url: str, member: bytes, timeout: float = 10.0) -> TenureDriver:
    """A started tooz coordinator over tenure, with its heart beating (a TenureDriver:
    its locks' ``token`` and its ``leadership_token()`` are beyond tooz's API)."""
    found = coordination.get_coordinator(f"{url}?node={NODE}&timeout={timeout:g}", member)
    assert isinstance(found, TenureDriver)
    found.start(start_heart=True)
    return found


def groups_and_leaders(url: str) -> None:
    """Membership with capabilities, join events, and a leader that hands over."""
    api1, api2 = coordinator(url, b"api-1"), coordinator(url, b"api-2")
    events: list[coordination.MemberJoinedGroup] = []

    def joined(event: coordination.MemberJoinedGroup) -> None:
        events.append(event)

    api1.join_group_create(b"api", capabilities={"address": "10.0.0.1:8776"})
    api1.watch_join_group(b"api", joined)
    api2.join_group(b"api", capabilities={"address": "10.0.0.2:8776"}).get()
    api1.run_watchers()
    for event in events:
        print(f"api-1 sees {event.member_id.decode()} join {event.group_id.decode()!r}")
    members = api1.get_members_with_capabilities(b"api").get()
    for member, capabilities in sorted(members.items()):
        print(f"member {member.decode()}: {capabilities}")

    for name, coord in (("api-1", api1), ("api-2", api2)):

        def elected(
            event: coordination.LeaderElected, coord: TenureDriver = coord, name: str = name
        ) -> None:
            token = coord.leadership_token(event.group_id)
            print(f"{name} leads {event.group_id.decode()!r} with fencing token {token}")

        coord.watch_elected_as_leader(b"api", elected)
    api1.run_watchers()
    api2.run_watchers()  # api-1 leads: nothing for api-2
    print(f"leader: {api1.get_leader(b'api').get()!r}")
    api1.stand_down_group_leader(b"api")
    api2.run_watchers()
    print(f"leader: {api1.get_leader(b'api').get()!r}")

    lock1, lock2 = api1.get_lock(b"volume-7"), api2.get_lock(b"volume-7")
    with lock1:
        print(f"api-1 holds 'volume-7' with fencing token {lock1.token}")
        print(f"api-2 can take it meanwhile: {lock2.acquire(blocking=False)}")
    with lock2:
        print(f"api-2 holds 'volume-7' with fencing token {lock2.token}")
    api2.stop()
    api1.stop()


def partitioner(url: str) -> None:
    """Three workers share six volumes: one owner each, and they all agree."""
    workers = [coordinator(url, f"worker-{i}".encode()) for i in range(3)]
    parts = [worker.join_partitioned_group(b"volumes") for worker in workers]
    for worker in workers:
        worker.run_watchers()  # each sees the others join
    for volume in (f"volume-{i}" for i in range(1, 7)):
        views = {frozenset(part.members_for_object(volume)) for part in parts}
        [owners] = views  # one view: every worker agrees
        mine = [w for w, part in enumerate(parts) if part.belongs_to_self(volume)]
        print(f"{volume}: owned by {b','.join(owners).decode()}, which alone says mine: {mine}")
    for worker, part in zip(workers, parts, strict=True):
        worker.leave_partitioned_group(part)
        worker.stop()


def timeout(url: str) -> None:
    """A member that stops heartbeating leaves its groups after its timeout."""
    watcher = coordinator(url, b"watcher")
    watcher.join_group_create(b"batch")
    stuck = coordination.get_coordinator(f"{url}?node={NODE}&timeout={TIMEOUT:g}", b"stuck")
    stuck.start()  # no heart, and nobody calls heartbeat(): it looks stuck
    stuck.join_group(b"batch").get()
    left: list[coordination.MemberLeftGroup] = []

    def gone(event: coordination.MemberLeftGroup) -> None:
        left.append(event)

    watcher.watch_leave_group(b"batch", gone)
    watcher.run_watchers()
    print(f"members of 'batch': {sorted(m.decode() for m in watcher.get_members(b'batch').get())}")
    deadline = time.monotonic() + 10 * TIMEOUT
    while not left and time.monotonic() < deadline:
        time.sleep(TIMEOUT / 10)
        watcher.run_watchers()
    for event in left:
        print(
            f"watcher sees {event.member_id.decode()} leave after {TIMEOUT:g} s without a heartbeat"
        )
    print(f"members of 'batch': {sorted(m.decode() for m in watcher.get_members(b'batch').get())}")
    stuck.stop()
    watcher.stop()


@contextlib.contextmanager
def throwaway_server() -> Iterator[str]:
    """A ``tenure serve`` of this run on a free loopback port, stopped at the end."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        args = ["--port", str(port), "--data-dir", tmp, "--fsync", "off"]
        command = [sys.executable, "-m", "tenure", "serve", *args]
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 10
            while True:
                with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port)):
                    break
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("tenure serve did not start")
                time.sleep(0.05)
            yield f"tenure://127.0.0.1:{port}"
        finally:
            process.terminate()
            process.wait(timeout=10)


def run(url: str) -> None:
    groups_and_leaders(url)
    partitioner(url)
    timeout(url)


async def main() -> None:
    url = os.environ.get("TENURE_URL")
    if url is None:
        with throwaway_server() as url:
            await asyncio.to_thread(run, url)
    else:
        await asyncio.to_thread(run, url.partition("?")[0])


if __name__ == "__main__":
    asyncio.run(main())
