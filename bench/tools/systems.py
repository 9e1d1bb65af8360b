"""The systems compared, as server processes on loopback: start, read, stop.

Every server is a child of this process, logs to a file in ``workdir``, and is
stopped by whoever started it (use :func:`running`, or ``try/finally: stop()``).
``tenure-memory`` has no server: the client process is the server, so its
:class:`Server` only carries the ``memory://`` URL. ``tenure-etcd`` is tenure's API
on ``etcd://``: its server is the ``etcd`` peer's, started with the same command
line, and only the URL (so the client) differs; likewise ``tenure-redis`` on the
``redis`` peer's server. ``postgres`` and ``tenure-postgres`` run a PostgreSQL 15
of their own (:class:`tests.postgres.server.PostgresServer`: ``initdb`` and
``postgres`` as the ``postgres`` user, fsync and synchronous_commit on); its
memory and CPU are the postmaster's and its backends'.

``tenure-cluster`` is several processes: :data:`CLUSTER_SIZE` ``tenure serve
--cluster`` members sharing one log in an etcd member of their own, started by the
``etcd`` peer's own code path (so with its command line exactly); the client URL
lists every member (``tenure://h:p1,h:p2,h:p3``: any member is a door, the client
finds the leader). Its :class:`Server` is the leader's, and its memory, CPU,
``pids()`` and stop cover every member and the etcd (:class:`ClusterParts`).
"""

from __future__ import annotations

import contextlib
import os
import platform
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import psutil
from tests.etcd import cluster as etcd

# (Ports apart from other pytest-xdist workers' when a test starts a system: a port
# handed to two workers at once failed a cluster's start with "port in use".)
from tests.ports import free_port as free_port

#: Every system, in the order of the report's tables.
SYSTEMS: tuple[str, ...] = (
    "tenure-always",
    "tenure-off",
    "tenure-memory",
    "redis",
    "tenure-redis",
    "tenure-etcd",
    "etcd",
    "tenure-cluster",
    "tenure-postgres",
    "postgres",
    "dflockd",
)

#: The systems whose server is an etcd member (the same command line for both).
ETCD_SYSTEMS: tuple[str, ...] = ("tenure-etcd", "etcd")
#: The systems whose server is a redis-server (the same command line for both).
REDIS_SYSTEMS: tuple[str, ...] = ("tenure-redis", "redis")
#: The systems whose server is a PostgreSQL of their own (not a Popen of ours).
POSTGRES_SYSTEMS: tuple[str, ...] = ("tenure-postgres", "postgres")
#: The systems that are several ``tenure serve --cluster`` over an etcd member
#: started exactly as the ``etcd`` peer's (a fresh one: every system gets its own).
CLUSTER_SYSTEMS: tuple[str, ...] = ("tenure-cluster",)
#: tenure-cluster's members: three, the size a replicated service is usually run at.
CLUSTER_SIZE = 3
#: tenure-cluster's name, under which its keys live in its etcd.
CLUSTER_NAME = "bench"

#: The longest a server may take to accept connections, or to stop, in seconds.
START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0

HOST = "127.0.0.1"
_REPO = Path(__file__).resolve().parents[2]


@dataclass
class Server:
    """One running server process (or none, for ``tenure-memory``)."""

    system: str
    host: str
    port: int
    data_dir: Path
    url: str
    pid: int | None
    log_path: Path | None = None
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    #: A server started by a test helper (PostgreSQL), stopped through it; or
    #: tenure-cluster's processes (:class:`ClusterParts`).
    handle: Any = field(default=None, repr=False)
    #: A tenure-cluster member's ``--http-port`` (0: none).
    http_port: int = 0

    def pids(self) -> list[int]:
        """The pids of the system's own processes (their children not listed): the
        server's, and for tenure-cluster every member's (the leader first) and its etcd's.
        """
        if isinstance(self.handle, ClusterParts):
            return self.handle.pids()
        return [] if self.pid is None else [self.pid]

    def _processes(self) -> list[psutil.Process]:
        if isinstance(self.handle, ClusterParts):
            return [psutil.Process(pid) for pid in self.handle.pids()]
        if self.pid is None:
            return []
        main = psutil.Process(self.pid)
        # PostgreSQL serves each connection in a backend process of the postmaster's.
        return [main, *main.children(recursive=True)] if self.handle is not None else [main]

    def rss_bytes(self) -> int:
        """Resident memory of the server process(es) now (0 when there is none)."""
        return sum(int(p.memory_info().rss) for p in self._processes())

    def cpu_seconds(self) -> float:
        """User + system CPU seconds the server used so far (0 when there is none).

        (PostgreSQL: the processes alive now; a backend that exited took its CPU along.)
        """
        return sum(float(t.user + t.system) for t in (p.cpu_times() for p in self._processes()))

    def log(self) -> str:
        """What the server wrote to stdout/stderr so far."""
        if isinstance(self.handle, ClusterParts):
            return self.handle.log()
        if self.log_path is None or not self.log_path.exists():
            return ""
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        """SIGTERM, then wait (SIGKILL after STOP_TIMEOUT); does nothing if stopped."""
        self._end(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL and wait: a crash, for recovery measurements."""
        self._end(signal.SIGKILL)

    def _end(self, signum: int) -> None:
        if self.handle is not None:
            self.handle.kill() if signum == signal.SIGKILL else self.handle.close()
            return
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signum)
        try:
            proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=STOP_TIMEOUT)


class ClusterParts:
    """tenure-cluster's processes: its members and their etcd, ended members first.

    ``members[0]`` leads (the one whose ``/readyz`` said so once all listened).
    """

    def __init__(self, members: list[Server], etcd: Server) -> None:
        self.members = members
        self.etcd = etcd

    def pids(self) -> list[int]:
        """Every member's pid (the leader first), then the etcd's."""
        return [pid for s in (*self.members, self.etcd) for pid in s.pids()]

    def log(self) -> str:
        """Each member's log and the etcd's, each headed by its name."""
        return "\n".join(
            f"== {s.system} {s.host}:{s.port}\n{s.log()}" for s in (*self.members, self.etcd)
        )

    def close(self) -> None:
        """SIGTERM the standbys, then the leader (no takeover on the way), then etcd."""
        for server in (*self.members[1:], self.members[0], self.etcd):
            server.stop()

    def kill(self) -> None:
        """SIGKILL every process."""
        for server in (*self.members, self.etcd):
            server.kill()


def _tenure_exe() -> list[str]:
    exe = Path(sys.executable).parent / "tenure"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "tenure"]


def command(system: str, port: int, data_dir: Path) -> tuple[list[str], str]:
    """The server's command line and its client URL."""
    if system in ("tenure-always", "tenure-off"):
        fsync = system.removeprefix("tenure-")
        args = ["serve", "--host", HOST, "--port", str(port), "--data-dir", str(data_dir)]
        return [*_tenure_exe(), *args, "--fsync", fsync], f"tenure://{HOST}:{port}"
    if system in REDIS_SYSTEMS:
        # No persistence at all: the like-for-like peer of non-durable tenure (and
        # tenure-redis on the same server, so it does not declare DURABLE there).
        args = ["--bind", HOST, "--port", str(port), "--dir", str(data_dir)]
        args += ["--save", "", "--appendonly", "no", "--daemonize", "no"]
        return ["redis-server", *args], f"redis://{HOST}:{port}/0"
    if system in ETCD_SYSTEMS:
        # One member as shipped (etcd's own Raft timers), the tests' command line;
        # tenure-etcd reaches the same server through tenure's etcd:// backend.
        binary = etcd.etcd_binary() or "etcd"
        argv = etcd.member_argv(binary, "b", data_dir, port, free_port())
        scheme = "etcd://" if system == "tenure-etcd" else "http://"
        return argv, f"{scheme}{HOST}:{port}"
    if system in CLUSTER_SYSTEMS:
        raise ValueError(f"{system} is several processes: see member_command() and start()")
    if system == "dflockd":
        exe = Path(sys.executable).parent / "dflockd"
        # Its default of 1024 distinct keys would refuse the par workload's 10,000
        # keys (idle keys are only forgotten after a minute): raised, not a limit here.
        args = ["--host", HOST, "--port", str(port), "--max-locks", "10000000"]
        return [str(exe), *args], f"{HOST}:{port}"
    raise ValueError(f"unknown system {system!r}; one of {SYSTEMS}")


def member_command(port: int, http_port: int, data_dir: Path, etcd_port: int) -> list[str]:
    """One member of tenure-cluster: ``tenure serve --cluster etcd://.../NAME``.

    Its own ports and data directory (which holds only its snapshots' scratch: the
    log is etcd's, so ``--fsync`` has nothing to do and is left at its default);
    everything else as shipped (``--cluster-lease-ttl 5``, the batch interval).
    ``--http-port``: ``/readyz`` says which member leads.
    """
    args = ["serve", "--host", HOST, "--port", str(port), "--data-dir", str(data_dir)]
    args += ["--http-port", str(http_port), "--log-format", "json"]
    args += ["--cluster", f"etcd://{HOST}:{etcd_port}/{CLUSTER_NAME}"]
    return [*_tenure_exe(), *args]


def cluster_url(ports: Sequence[int]) -> str:
    """The client URL of tenure-cluster: every member a door."""
    return "tenure://" + ",".join(f"{HOST}:{port}" for port in ports)


def _accepts(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((HOST, port), timeout=1.0):
        return True
    return False


def _ready(server: Server) -> bool:
    if server.system in ETCD_SYSTEMS:
        # The port opens before a leader is elected; /health says when it serves.
        return _accepts(server.port) and etcd.healthy(f"http://{HOST}:{server.port}")
    if server.system in REDIS_SYSTEMS:  # before tenure-*: tenure-redis is a redis-server
        return _accepts(server.port)
    if server.system.startswith("tenure-"):
        # No probe connection for tenure: its log says when it listens.
        return '"msg": "listening"' in server.log()
    return _accepts(server.port)


def start(
    system: str,
    workdir: Path,
    *,
    extra_args: Sequence[str] = (),
    data_dir: Path | None = None,
) -> Server:
    """Start ``system`` on a free port and wait until it serves.

    Reusing a ``data_dir`` (and the same system) restarts on its existing state.
    tenure-cluster waits until one member leads (``extra_args`` go to each member).
    """
    if system == "tenure-memory":
        return Server(system, HOST, 0, workdir, "memory://", None)
    workdir.mkdir(parents=True, exist_ok=True)
    if system in POSTGRES_SYSTEMS:
        return _start_postgres(system, workdir)
    if system in CLUSTER_SYSTEMS:
        return _start_cluster(system, workdir, extra_args)
    port = free_port()
    if data_dir is None:
        data_dir = workdir / f"{system}-{port}"
    argv, url = command(system, port, data_dir)
    server = _spawn(system, [*argv, *extra_args], url, port, data_dir, workdir)
    _wait_ready([server])
    return server


def _spawn(
    system: str, argv: list[str], url: str, port: int, data_dir: Path, workdir: Path
) -> Server:
    """Start one process (not waited for), its output to ``workdir/system-port.log``."""
    data_dir.mkdir(parents=True, exist_ok=True)
    log_path = workdir / f"{system}-{port}.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=data_dir,
        )
    return Server(system, HOST, port, data_dir, url, proc.pid, log_path, proc)


def _wait_ready(servers: list[Server]) -> None:
    """Until every one of ``servers`` serves (bounded); each is killed if one fails."""
    try:
        deadline = time.monotonic() + START_TIMEOUT
        for server in servers:
            assert server.proc is not None
            while not _ready(server):
                if server.proc.poll() is not None:
                    code = server.proc.returncode
                    raise RuntimeError(f"{server.system} exited {code}: {server.log()[-2000:]}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{server.system} not ready in time: {server.log()[-2000:]}")
                time.sleep(0.05)
    except BaseException:
        for server in servers:
            server.kill()
        raise


def _start_cluster(system: str, workdir: Path, extra_args: Sequence[str]) -> Server:
    """tenure-cluster: a fresh etcd member as the etcd peer's, then the members over it."""
    etcd_member = start("etcd", workdir)  # the etcd peer's command line, by its own code
    members: list[Server] = []
    try:
        ports = [free_port() for _ in range(CLUSTER_SIZE)]
        url = cluster_url(ports)
        for port in ports:
            http_port = free_port()
            data_dir = workdir / f"{system}-{port}"
            argv = [*member_command(port, http_port, data_dir, etcd_member.port), *extra_args]
            member = _spawn(system, argv, url, port, data_dir, workdir)
            member.http_port = http_port
            members.append(member)
        _wait_ready(members)
        leader = _leader(members)
    except BaseException:
        for member in members:
            member.kill()
        etcd_member.stop()
        raise
    members.remove(leader)
    members.insert(0, leader)
    parts = ClusterParts(members, etcd_member)
    return Server(system, HOST, leader.port, workdir, url, leader.pid, leader.log_path, None, parts)


def _leader(members: list[Server]) -> Server:
    """The member whose ``/readyz`` answers 200: the one that leads (bounded wait)."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        for member in members:
            if _readyz(member.http_port):
                return member
        time.sleep(0.05)
    logs = "\n".join(member.log()[-1000:] for member in members)
    raise RuntimeError(f"no member of the cluster leads after {START_TIMEOUT:g}s: {logs}")


def _readyz(http_port: int) -> bool:
    """Whether ``/readyz`` on 127.0.0.1:``http_port`` answers 200 (direct: no proxy)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"http://{HOST}:{http_port}/readyz", timeout=2) as reply:
            return bool(reply.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _start_postgres(system: str, workdir: Path) -> Server:
    from tests.postgres.server import PostgresServer

    pg = PostgresServer(Path(tempfile.mkdtemp(prefix=f"{system}-", dir=workdir)))
    pg.open()
    url = pg.url() if system == "tenure-postgres" else pg.dsn
    return Server(system, HOST, pg.port, pg.data_dir, url, pg.pid, pg.log_path, None, pg)


@contextlib.contextmanager
def running(system: str, workdir: Path, *, extra_args: Sequence[str] = ()) -> Iterator[Server]:
    """A started server, stopped (SIGTERM, then SIGKILL) when the block ends."""
    server = start(system, workdir, extra_args=extra_args)
    try:
        yield server
    finally:
        server.stop()


def _run(argv: Sequence[str], cwd: Path | None = None) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=10, cwd=cwd)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unavailable ({exc.__class__.__name__})"
    return (done.stdout or done.stderr).strip()


def _dist(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return f"{line.split(':', 1)[1].strip()} ({os.cpu_count()} CPUs)"
    return f"{platform.processor() or 'unknown'} ({os.cpu_count()} CPUs)"


def _os_name() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip('"')
    return platform.platform()


def _build() -> str:
    """Which build of tenure the servers and clients import: ``compiled`` (mypyc's
    extensions beside the sources: scripts/compile) or ``pure``."""
    return "compiled" if any(_REPO.glob("src/tenure/_core/*.so")) else "pure"


def versions() -> dict[str, str]:
    """Exact versions of everything measured, and of the machine it ran on."""
    redis = _run(["redis-server", "--version"])
    match = re.search(r"v=(\S+)", redis)
    etcd = _run(["etcd", "--version"]).splitlines()
    commit = _run(["git", "describe", "--always", "--dirty", "--tags"], cwd=_REPO)
    return {
        "tenure": f"{_dist('tenure')} (git {commit}, {_build()} build)",
        "redis-server": match.group(1) if match else redis,
        "etcd": etcd[0].removeprefix("etcd Version: ") if etcd else "unavailable",
        "dflockd": _dist("dflockd"),
        "redis-py": _dist("redis"),
        "aetcd": _dist("aetcd"),
        "grpcio": _dist("grpcio"),
        "protobuf": _dist("protobuf"),
        "dflockd-client": _dist("dflockd-client"),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "uvloop": _dist("uvloop"),
        "kernel": f"{platform.system()} {platform.release()}",
        "os": _os_name(),
        "cpu": _cpu_model(),
    }
