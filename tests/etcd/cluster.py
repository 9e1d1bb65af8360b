"""Real ``etcd`` members on loopback: one, or a static cluster of three.

:class:`EtcdCluster` starts ``etcd`` processes (Debian's ``etcd-server``; the
binary is ``$TENURE_ETCD``, else ``etcd`` on PATH) on free ports of 127.0.0.1 (or
each member on an address of its own, run in a network namespace: ``hosts`` and
``prefixes``), each with its data directory in a temporary directory, and waits until each serves
(``/health`` on its client URL: a leader, and a quorum read answered). Members are
stopped by PID: SIGTERM, then SIGKILL when the process outlives a bounded wait.
Every process started here is tracked in one registry (:func:`live_pids`) and
killed at :meth:`EtcdCluster.close`, or at the interpreter's exit if a test left it.

Every wait is bounded (:data:`WAIT`, :data:`STOP_WAIT`). Raft runs on short timers
(:data:`HEARTBEAT_MS`, :data:`ELECTION_MS`) so that an election after a leader's
death takes about a second; everything else is etcd's default (fsync on every
commit, no auto-compaction).

The waiting methods are synchronous; each has an ``a``-prefixed twin that runs it
in a worker thread, for async tests whose event loop must keep running (a client's
keepalives) while a member starts or stops.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import http.client
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Final

from tests.server.wire import free_port

__all__ = [
    "ELECTION_MS",
    "HEARTBEAT_MS",
    "HOST",
    "STOP_WAIT",
    "WAIT",
    "EtcdCluster",
    "EtcdError",
    "EtcdMember",
    "close_shared_member",
    "etcd_binary",
    "etcd_unavailable",
    "healthy",
    "kill_all",
    "live_pids",
    "member_argv",
    "shared_member",
    "status",
]

HOST: Final = "127.0.0.1"
#: Bound of a member's (or a cluster's) start, and of waiting for a leader, in seconds.
WAIT: Final = 20.0
#: How long a member may take to exit after SIGTERM before it is SIGKILLed, in seconds.
STOP_WAIT: Final = 10.0
#: Raft timers for tests (etcd's defaults are 100 and 1000 ms).
HEARTBEAT_MS: Final = 50
ELECTION_MS: Final = 500
#: How many times a first start picks new ports when one was taken meanwhile.
_PORT_ATTEMPTS: Final = 3
_POLL: Final = 0.05

# Straight to loopback: an http_proxy in the environment must not see this traffic.
_OPENER: Final = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class EtcdError(AssertionError):
    """A member did not start, serve, elect or stop in time (its log is in the message)."""


def etcd_binary() -> str | None:
    """The etcd server to run: ``$TENURE_ETCD``, else ``etcd`` on PATH (or /usr/bin)."""
    override = os.environ.get("TENURE_ETCD", "").strip()
    if override:
        return override if os.access(override, os.X_OK) else None
    return shutil.which("etcd") or shutil.which("etcd", path="/usr/bin:/usr/sbin")


def etcd_unavailable() -> str | None:
    """Why no etcd can be started here (to skip, or fail in CI), or None."""
    if etcd_binary() is None:
        return "etcd is not installed (scripts/bootstrap test installs Debian's etcd-server)"
    return None


def member_argv(
    binary: str,
    name: str,
    data_dir: Path,
    client_port: int,
    peer_port: int,
    *,
    initial_cluster: str | None = None,
    cluster_token: str | None = None,
    heartbeat_ms: int | None = None,
    election_ms: int | None = None,
    extra: Sequence[str] = (),
    host: str = HOST,
) -> list[str]:
    """The command line of one member listening on ``host`` only (``HOST`` by default).

    ``initial_cluster`` (``name=peer_url,...``) defaults to this member alone; the
    Raft timers to etcd's defaults (the benchmarks run etcd as shipped).
    """
    client = f"http://{host}:{client_port}"
    peer = f"http://{host}:{peer_port}"
    argv = [binary, "--name", name, "--data-dir", str(data_dir), "--logger", "zap"]
    argv += ["--listen-client-urls", client, "--advertise-client-urls", client]
    argv += ["--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer]
    argv += ["--initial-cluster", initial_cluster or f"{name}={peer}"]
    argv += ["--initial-cluster-state", "new"]
    if cluster_token is not None:
        argv += ["--initial-cluster-token", cluster_token]
    if heartbeat_ms is not None:
        argv += ["--heartbeat-interval", str(heartbeat_ms)]
    if election_ms is not None:
        argv += ["--election-timeout", str(election_ms)]
    return [*argv, *extra]


def _http(url: str, body: bytes | None, timeout: float) -> bytes | None:
    # URLError and HTTPError (a 503 from /health) are OSErrors; a garbled answer not.
    with (
        contextlib.suppress(OSError, http.client.HTTPException),
        _OPENER.open(url, data=body, timeout=timeout) as reply,
    ):
        return bytes(reply.read())
    return None


def healthy(client_url: str, timeout: float = 2.0) -> bool:
    """Whether the member at ``client_url`` (``http://host:port``) says it serves.

    etcd's ``/health`` is true once the member knows a leader and a quorum read
    through it succeeds; the port alone opens before that.
    """
    reply = _http(f"{client_url}/health", None, timeout)
    return reply is not None and b'"true"' in reply


def status(client_url: str, timeout: float = 2.0) -> dict[str, Any] | None:
    """The member's Maintenance Status RPC (through etcd's JSON gateway), or None.

    ``header.member_id`` is the member's id, ``leader`` the leader's id as it
    knows it (both uint64 as decimal strings in the JSON).
    """
    reply = _http(f"{client_url}/v3/maintenance/status", b"{}", timeout)
    if reply is None:
        return None
    with contextlib.suppress(ValueError):
        answer = json.loads(reply)
        if isinstance(answer, dict):
            return answer
    return None


# -- the registry of every process started here ----------------------------------------

_LIVE: dict[int, subprocess.Popen[bytes]] = {}
_LIVE_LOCK = threading.Lock()


def live_pids() -> set[int]:
    """PIDs of the etcd processes started here and not yet reaped."""
    with _LIVE_LOCK:
        return set(_LIVE)


def _end(proc: subprocess.Popen[bytes], signum: int) -> None:
    """Send ``signum`` and reap, SIGKILL after STOP_WAIT; no-op on a reaped process."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signum)
    _reap(proc)


def _reap(proc: subprocess.Popen[bytes]) -> None:
    """Wait for the exit (SIGKILL after STOP_WAIT) and forget the process."""
    if proc.poll() is None:
        try:
            proc.wait(timeout=STOP_WAIT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=STOP_WAIT)
    with _LIVE_LOCK:
        _LIVE.pop(proc.pid, None)


@atexit.register
def kill_all() -> set[int]:
    """SIGKILL and reap every etcd process started here; their PIDs.

    Also run at the interpreter's exit: a member a test (or an interrupted run)
    left behind dies with it.
    """
    with _LIVE_LOCK:
        procs = list(_LIVE.values())
    for proc in procs:
        _end(proc, signal.SIGKILL)
    return {proc.pid for proc in procs}


def _child_env() -> dict[str, str]:
    # etcd reads ETCD_<FLAG> variables as flags: only our command line configures it.
    return {key: value for key, value in os.environ.items() if not key.startswith("ETCD")}


class EtcdMember:
    """One member: its ports and data directory, and its process while it runs.

    ``host``: the address it listens on; ``prefix``: what its command line runs
    under (``ip netns exec NAME``: tools/faults/netns.py), exec'ing it in place.
    """

    def __init__(
        self,
        name: str,
        data_dir: Path,
        log_path: Path,
        host: str = HOST,
        prefix: Sequence[str] = (),
    ) -> None:
        self.name = name
        self.host = host
        self.prefix = list(prefix)
        self.data_dir = data_dir
        self.log_path = log_path
        self.client_port = 0
        self.peer_port = 0
        self.argv: list[str] = []
        #: The member's id (from its Status), known once it has served.
        self.id: int | None = None
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        """``host:port`` of its client URL (what ``etcd://`` URLs list)."""
        return f"{self.host}:{self.client_port}"

    @property
    def client_url(self) -> str:
        """``http://host:port``."""
        return f"http://{self.endpoint}"

    @property
    def peer_url(self) -> str:
        """``http://host:port`` where the other members reach it."""
        return f"http://{self.host}:{self.peer_port}"

    @property
    def pid(self) -> int | None:
        """The running process's id, or None when stopped."""
        return self.proc.pid if self.running and self.proc is not None else None

    @property
    def running(self) -> bool:
        """Whether its process is alive (it may not serve yet)."""
        return self.proc is not None and self.proc.poll() is None

    def output(self) -> str:
        """What the member logged so far, over all its runs."""
        with contextlib.suppress(OSError):
            return self.log_path.read_text(errors="replace")
        return ""

    def healthy(self) -> bool:
        """Whether it serves now (see :func:`healthy`)."""
        return self.running and healthy(self.client_url)

    def status(self) -> dict[str, Any] | None:
        """Its Maintenance Status (see :func:`status`), None when it does not answer."""
        return status(self.client_url) if self.running else None

    def _spawn(self) -> None:
        assert not self.running, f"{self.name} is already running"
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            log.write(f"== {' '.join(self.argv)}\n".encode())
            log.flush()
            proc = subprocess.Popen(
                [*self.prefix, *self.argv],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=_child_env(),
                cwd=self.data_dir.parent,
            )
        with _LIVE_LOCK:
            _LIVE[proc.pid] = proc
        self.proc = proc

    def _end(self, signum: int) -> None:
        if self.proc is not None:
            _end(self.proc, signum)

    def __repr__(self) -> str:
        state = f"pid {self.pid}" if self.running else "stopped"
        return f"<EtcdMember {self.name} {self.endpoint} {state}>"


class EtcdCluster:
    """``size`` members (1 or 3) of one static cluster on loopback; see the module.

    Use it as a context (``with EtcdCluster(3) as cluster:``) or call :meth:`open`
    and, always, :meth:`close`. ``root`` holds the data directories and logs (a
    temporary directory, removed at close, when not given).
    """

    def __init__(
        self,
        size: int = 1,
        *,
        root: Path | None = None,
        heartbeat_ms: int = HEARTBEAT_MS,
        election_ms: int = ELECTION_MS,
        extra: Sequence[str] = (),
        hosts: Sequence[str] = (),
        prefixes: Sequence[Sequence[str]] = (),
    ) -> None:
        """``extra``: more command-line flags of every member; ``hosts`` and
        ``prefixes``: each member's (by index; :data:`HOST` and none when not given)."""
        if size < 1:
            raise ValueError(f"a cluster has at least one member, not {size}")
        binary = etcd_binary()
        if binary is None:
            raise EtcdError(etcd_unavailable())
        self._binary = binary
        self._own_root = root is None
        self.root = Path(tempfile.mkdtemp(prefix="tenure-etcd-")) if root is None else root
        self._timers = (heartbeat_ms, election_ms)
        self._extra = tuple(extra)
        self.members = [
            EtcdMember(
                f"m{i}",
                self.root / f"m{i}",
                self.root / f"m{i}.log",
                hosts[i] if i < len(hosts) else HOST,
                prefixes[i] if i < len(prefixes) else (),
            )
            for i in range(size)
        ]
        self._closed = False
        self._configure()

    def _configure(self) -> None:
        """Fresh ports and a fresh cluster token for every member (before the first start)."""
        ports: set[int] = set()
        while len(ports) < 2 * len(self.members):
            ports.add(free_port())
        chosen = iter(sorted(ports))
        for member in self.members:
            member.client_port, member.peer_port = next(chosen), next(chosen)
        initial = ",".join(f"{m.name}={m.peer_url}" for m in self.members)
        # A token of its own: a member of another test's cluster never joins this one.
        token = f"tenure-test-{uuid.uuid4().hex[:12]}"
        heartbeat, election = self._timers
        for member in self.members:
            member.argv = member_argv(
                self._binary,
                member.name,
                member.data_dir,
                member.client_port,
                member.peer_port,
                initial_cluster=initial,
                cluster_token=token,
                heartbeat_ms=heartbeat,
                election_ms=election,
                extra=self._extra,
                host=member.host,
            )

    # -- what clients see -------------------------------------------------------------

    @property
    def endpoints(self) -> list[str]:
        """``host:port`` of every member, in member order."""
        return [member.endpoint for member in self.members]

    def url(self, *, prefix: str | None = None, scheme: str = "etcd") -> str:
        """``etcd://h1:p1,h2:p2,...`` (with ``?prefix=...`` when given)."""
        query = "" if prefix is None else f"?prefix={prefix}"
        return f"{scheme}://{','.join(self.endpoints)}{query}"

    @property
    def pids(self) -> set[int]:
        """PIDs of the members running now."""
        return {member.pid for member in self.members if member.pid is not None}

    # -- lifecycle --------------------------------------------------------------------

    def open(self) -> EtcdCluster:
        """Start every member on fresh data and wait until each serves.

        A port taken by someone else between choosing it and etcd binding it gives
        new ports and a new try (a few at most).
        """
        for attempt in range(_PORT_ATTEMPTS):
            try:
                self.start_all()
                return self
            except EtcdError as error:
                if "address already in use" not in str(error) or attempt == _PORT_ATTEMPTS - 1:
                    self.close()
                    raise
                self._end_all(signal.SIGKILL)
                for member in self.members:
                    shutil.rmtree(member.data_dir, ignore_errors=True)
                self._configure()
        raise AssertionError("unreachable")

    def __enter__(self) -> EtcdCluster:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self, member: EtcdMember, *, wait: bool = True) -> None:
        """Start a stopped member again, on its data directory and ports.

        ``wait``: until it serves, which needs a quorum of the cluster running.
        """
        self._check_open()
        member._spawn()
        if wait:
            self._wait_serving([member])

    def stop(self, member: EtcdMember) -> None:
        """SIGTERM (SIGKILL after STOP_WAIT) and reap: an orderly shutdown."""
        member._end(signal.SIGTERM)

    def kill(self, member: EtcdMember) -> None:
        """SIGKILL and reap: a crash."""
        member._end(signal.SIGKILL)

    def start_all(self) -> None:
        """Start every stopped member, then wait until every member serves."""
        self._check_open()
        for member in self.members:
            if not member.running:
                member._spawn()
        self._wait_serving(self.members)

    def stop_all(self) -> None:
        """Stop every member by SIGTERM, the leader last (SIGKILL fallback); the data stays."""
        self._end_all(signal.SIGTERM)

    def close(self) -> None:
        """Stop every member (SIGKILL fallback) and remove the temporary directory.

        In a ``root`` the caller gave, only the data directories go (etcd
        preallocates 64 MB of log per member); the members' logs stay, to be read.
        """
        if self._closed:
            return
        self._closed = True
        self._end_all(signal.SIGTERM)
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)
        else:
            for member in self.members:
                shutil.rmtree(member.data_dir, ignore_errors=True)

    def _end_all(self, signum: int) -> None:
        running = [member for member in self.members if member.running]
        if signum == signal.SIGTERM and len(running) > 1:
            # A leader that stops hands its leadership to a follower first, and when
            # that follower is stopping too it waits seconds for the handover (5 s and
            # more). So the followers go first; the leader, left without a quorum,
            # steps down within an election timeout, and then exits at once.
            leader: EtcdMember | None = None
            with contextlib.suppress(EtcdError):  # none (no quorum): all at once, bounded
                leader = self.leader(timeout=4 * self._timers[1] / 1000)
            if leader is not None:
                self._signal_and_reap([m for m in running if m is not leader], signum)
                self._until_not_leader(leader)
                running = [leader]
        self._signal_and_reap(running, signum)
        for member in self.members:  # exited by themselves: reaped, and forgotten
            if member.proc is not None:
                _reap(member.proc)

    def _until_not_leader(self, member: EtcdMember) -> None:
        """Wait (a few election timeouts at most) until ``member`` no longer leads."""
        deadline = time.monotonic() + 4 * self._timers[1] / 1000
        while member.running and time.monotonic() < deadline:
            answer = member.status()
            if answer is None or int(answer.get("leader", 0)) != member.id:
                return
            time.sleep(_POLL)

    @staticmethod
    def _signal_and_reap(members: Sequence[EtcdMember], signum: int) -> None:
        procs = [member.proc for member in members if member.proc is not None]
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signum)
        for proc in procs:
            _reap(proc)  # a second signal could cut etcd's orderly shutdown short

    def _check_open(self) -> None:
        if self._closed:
            raise EtcdError("the cluster was closed")

    def _wait_serving(self, members: Sequence[EtcdMember], timeout: float = WAIT) -> None:
        deadline = time.monotonic() + timeout
        waiting = list(members)
        while waiting:
            for member in list(waiting):
                if not member.running:
                    raise EtcdError(f"{member.name} exited: {self._log_tail(member)}")
                if member.healthy():
                    answer = member.status()
                    if answer is not None:
                        member.id = int(answer["header"]["member_id"])
                        waiting.remove(member)
            if waiting and time.monotonic() > deadline:
                logs = "\n".join(self._log_tail(member) for member in waiting)
                raise EtcdError(f"not serving within {timeout}s: {waiting}\n{logs}")
            if waiting:
                time.sleep(_POLL)

    @staticmethod
    def _log_tail(member: EtcdMember) -> str:
        return f"--- {member.name} ---\n{member.output()[-3000:]}"

    # -- leadership -------------------------------------------------------------------

    def leader(self, timeout: float = WAIT, *, excluding: Iterable[EtcdMember] = ()) -> EtcdMember:
        """The leader, once the running members agree on one (waits up to ``timeout``).

        Agreement: every running member answers Status naming the same leader, a
        running member that names itself. ``excluding``: a leader to wait past (one
        just killed, or stopped, is not running anyway).
        """
        excluded = {id(member) for member in excluding}
        deadline = time.monotonic() + timeout
        seen: dict[str, Any] = {}
        while True:
            running = [member for member in self.members if member.running]
            seen = {member.name: member.status() for member in running}
            chosen = self._agreed_leader(running, seen)
            if chosen is not None and id(chosen) not in excluded:
                return chosen
            if time.monotonic() > deadline:
                raise EtcdError(f"no agreed leader within {timeout}s; statuses: {seen}")
            time.sleep(_POLL)

    @staticmethod
    def _agreed_leader(running: list[EtcdMember], seen: dict[str, Any]) -> EtcdMember | None:
        leaders: set[int] = set()
        for member in running:
            answer = seen.get(member.name)
            if answer is None:
                return None
            member.id = int(answer["header"]["member_id"])
            leaders.add(int(answer.get("leader", 0)))
        if len(leaders) != 1:
            return None
        (leader_id,) = leaders
        return next((m for m in running if m.id == leader_id and leader_id != 0), None)

    # -- for async tests: the same, in a worker thread --------------------------------

    async def aopen(self) -> EtcdCluster:
        """:meth:`open` without blocking the event loop."""
        return await asyncio.to_thread(self.open)

    async def astart(self, member: EtcdMember, *, wait: bool = True) -> None:
        """:meth:`start` without blocking the event loop."""
        await asyncio.to_thread(self.start, member, wait=wait)

    async def astop(self, member: EtcdMember) -> None:
        """:meth:`stop` without blocking the event loop."""
        await asyncio.to_thread(self.stop, member)

    async def astart_all(self) -> None:
        """:meth:`start_all` without blocking the event loop."""
        await asyncio.to_thread(self.start_all)

    async def astop_all(self) -> None:
        """:meth:`stop_all` without blocking the event loop."""
        await asyncio.to_thread(self.stop_all)

    async def aleader(
        self, timeout: float = WAIT, *, excluding: Iterable[EtcdMember] = ()
    ) -> EtcdMember:
        """:meth:`leader` without blocking the event loop."""
        return await asyncio.to_thread(self.leader, timeout, excluding=excluding)

    def __repr__(self) -> str:
        return f"<EtcdCluster {self.members}>"


# -- the run's shared single member ----------------------------------------------------

_SHARED: EtcdCluster | None = None
_SHARED_LOCK = threading.Lock()


def shared_member() -> EtcdCluster:
    """The one-member cluster this test run shares (the conformance kit's, ``etcd_member``).

    Started on first use; a member that died meanwhile is started again on its data.
    Closed by :func:`close_shared_member` (the plugin does it when the run ends).
    """
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None:
            _SHARED = EtcdCluster(1).open()
        elif not _SHARED.members[0].running:
            _SHARED.start_all()
        return _SHARED


def close_shared_member() -> None:
    """Stop the shared member and remove its directory (it starts afresh if used again)."""
    global _SHARED
    with _SHARED_LOCK:
        shared, _SHARED = _SHARED, None
    if shared is not None:
        shared.close()
