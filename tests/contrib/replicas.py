"""Replicas of an example program, each a process of its own, and the election they share.

What ``tests/contrib/test_schedulers_and_web_apps.py`` starts and reads:
:class:`ReplicaProcess` runs ``python examples/NAME`` with ``REPLICA`` set (and a free
``PORT``, a short ``RECOVERY_WINDOW``), reads its output lines as they come, kills it
with SIGKILL or stops it with SIGTERM, and asks a web replica's ``GET /status``;
:class:`Election` reads the election through a client of the test's own (who leads,
with which token, who waits in line) and kills a session as an operator would.
Every wait is bounded by :data:`PATIENCE`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import IO, TypeVar

import tenure.sync
from tenure import OwnerInfo
from tenure.errors import NotFoundError
from tests.ports import free_port
from tests.test_examples import EXAMPLES, ROOT

__all__ = [
    "PATIENCE",
    "WINDOW",
    "Election",
    "ReplicaProcess",
    "election",
    "leader_and_other",
    "replicas",
    "until",
]

#: Bound of every wait on a replica or the election, in seconds.
PATIENCE = 30.0
#: The replicas' recovery window (``RECOVERY_WINDOW``), in seconds.
WINDOW = 1.0
_POLL = 0.05
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))

T = TypeVar("T")


def until(what: str, found: Callable[[], T | None]) -> T:
    """Poll ``found()`` until it returns something, at most :data:`PATIENCE` seconds."""
    deadline = time.monotonic() + PATIENCE
    while (value := found()) is None:
        assert time.monotonic() < deadline, f"still not: {what}"
        time.sleep(_POLL)
    return value


class ReplicaProcess:
    """``python examples/NAME`` as the replica ``name`` (``REPLICA``), its lines read as they come.

    Its ``PORT`` is free, for a web replica; its ``RECOVERY_WINDOW`` is :data:`WINDOW`.
    """

    def __init__(self, example: str, name: str, env: dict[str, str]) -> None:
        self.name = name
        self.port = free_port()  # where a web replica serves
        full = {**os.environ, **env, "REPLICA": name, "PORT": str(self.port)}
        full["RECOVERY_WINDOW"] = str(WINDOW)
        full["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(ROOT / "src"), full.get("PYTHONPATH")])
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-W", "error", str(EXAMPLES / example)],
            cwd=ROOT,
            env=full,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._out: list[str] = []
        self._err: list[str] = []
        self._readers = [
            threading.Thread(target=self._read, args=(stream, into), daemon=True)
            for stream, into in ((self.proc.stdout, self._out), (self.proc.stderr, self._err))
        ]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _read(stream: IO[str] | None, into: list[str]) -> None:
        assert stream is not None
        with stream:
            for line in stream:
                into.append(line.rstrip("\n"))  # (list.append is atomic: no lock needed)

    def lines(self) -> list[str]:
        """What it printed so far, line by line."""
        return list(self._out)

    def stderr(self) -> str:
        """What it wrote to stderr so far."""
        return "\n".join(self._err)

    def alive(self) -> None:
        """Fail if the process has ended."""
        code = self.proc.poll()
        assert code is None, f"{self.name} ended ({code}): {self.lines()} {self.stderr()}"

    def _ended(self) -> int:
        code = self.proc.wait(timeout=PATIENCE)
        for reader in self._readers:
            reader.join(PATIENCE)
        return code

    def kill(self) -> None:
        """``kill -9``: nothing is resigned, nothing closed; reaped, its output all read."""
        self.proc.send_signal(signal.SIGKILL)
        assert self._ended() == -signal.SIGKILL

    def stop(self) -> int:
        """SIGTERM (the replica stops: it resigns); its exit status once it ended."""
        self.proc.send_signal(signal.SIGTERM)
        return self._ended()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self._ended()

    def status(self) -> dict[str, object] | None:
        """A web replica's ``GET /status``, or None while it does not answer yet."""
        try:
            with _OPENER.open(f"http://127.0.0.1:{self.port}/status", timeout=5) as answer:
                found: dict[str, object] = json.loads(answer.read())
                return found
        except (urllib.error.URLError, ConnectionError):
            self.alive()
            return None


@contextmanager
def replicas(example: str, names: list[str], env: dict[str, str]) -> Iterator[list[ReplicaProcess]]:
    """Start a replica process per name; kill whichever is left at the end."""
    with ExitStack() as stack:
        started: list[ReplicaProcess] = []
        for name in names:
            replica = ReplicaProcess(example, name, env)
            stack.callback(replica.close)
            started.append(replica)
        yield started


class Election:
    """An election as the store holds it, read (and its leader's session killed, as an
    operator would) through a client of the test's own."""

    def __init__(self, client: tenure.sync.Client, session: tenure.sync.Session, name: str) -> None:
        self.client = client
        self.node = session.node
        self.semaphore = session.semaphore(name)

    def kill_session(self, grant: OwnerInfo) -> None:
        """End the session that holds ``grant`` (``tenure kill-session``)."""
        self.client.kill_session(self.node, grant.session_id)

    def holders(self) -> tuple[list[OwnerInfo], list[bytes]]:
        """Its leader's grant (none or one) and its waiters' data, in line."""
        try:
            found = self.semaphore.describe(owners=True, waiters=True)
        except NotFoundError:  # nobody campaigned yet, or the last one left
            return [], []
        return list(found.owners), [waiter.data for waiter in found.waiters]

    def line(self) -> tuple[list[tuple[bytes, int]], list[bytes]]:
        """Who leads (its data, its token) and who waits (their data), in order."""
        owners, waiters = self.holders()
        return [(owner.data, owner.token) for owner in owners], waiters

    def leader_with(self, waiting: int) -> OwnerInfo:
        """Until one leads with ``waiting`` replicas in line behind it: the leader's grant."""

        def found() -> OwnerInfo | None:
            owners, waiters = self.holders()
            return owners[0] if len(owners) == 1 and len(waiters) == waiting else None

        return until(f"a leader and {waiting} waiting: {self.holders()}", found)

    def free(self) -> None:
        """Until nobody leads and nobody waits."""
        until(f"a free election: {self.holders()}", lambda: self.holders() == ([], []) or None)


@contextmanager
def election(url: str, node: str, name: str) -> Iterator[Election]:
    """A view of the election ``name`` of ``node`` (created here if the replicas did not yet)."""
    with tenure.sync.connect(url) as client:
        client.create_node(node, exist_ok=True)
        with client.session(node, description="test: the election's view") as session:
            yield Election(client, session, name)


def leader_and_other(
    started: list[ReplicaProcess], leader: OwnerInfo
) -> tuple[ReplicaProcess, ReplicaProcess]:
    """The replica whose name the leader's grant carries, and the other one."""
    first, second = started
    return (first, second) if leader.data == first.name.encode() else (second, first)
