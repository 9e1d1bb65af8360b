"""What the fault suite runs against: a backend URL and a way to start, kill and restart it.

:class:`Target` is the whole interface between the suite and a backend. The
scenarios, nemeses and checkers know nothing else about the backend, so the etcd,
Redis and PostgreSQL backends run the same suite by implementing it (their
servers started on loopback by the harness, as ``scripts/bench`` does). A target
that cannot do something a nemesis needs says so with a capability, and scenarios
needing it are not run against it (:func:`tools.faults.scenarios.applies`).

:class:`TenureTarget` is ``tenure serve`` (or a mutant of it, started through a
wrapper module) on a fixed port and data directory: restarting it after
``kill -9`` finds its state and its clients at the same address.
:class:`~tools.faults.etcd_target.EtcdTarget` is a three-member etcd cluster;
for it "the server" is the whole cluster (``kill`` kills every member), and its
members can also fail one at a time (:class:`Cluster`, capability ``members``).
:class:`~tools.faults.cluster_target.TenureClusterTarget` is three ``tenure serve
--cluster`` servers over a three-member etcd cluster; "the server" is all of them,
etcd included, and its servers and etcd members also fail one at a time
(:class:`Replicated`, capability ``replicated``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final, Protocol, cast

from tests.server.wire import free_port

#: The repository root: wrappers under tests/ are importable from there.
REPO: Final = Path(__file__).resolve().parents[2]
#: Bound of a start (the server replays its log) and of a graceful stop, in seconds.
START_WAIT: Final = 30.0

#: Capabilities a target may have (see :attr:`Target.capabilities`).
DATA_DIR = "data-dir"  # its state lives in ``data_dir``, which may be a mount point
PRELOAD = "preload"  # its server is a dynamically linked process that honours LD_PRELOAD
IDLE_TIMEOUT = "idle-timeout"  # it closes idle connections after ``idle_timeout``
MEMBERS = "members"  # a cluster whose members fail one at a time (:class:`Cluster`)
REPLICATED = "replicated"  # servers of one service, one leading, over etcd (:class:`Replicated`)
TOKENS = "tokens"  # it takes an auth file of tokens, and serves /metrics (:class:`TenureTarget`)
DFLOCKD = "dflockd"  # it speaks dflockd's protocol on its port too (the face, by the first byte)
YDB = "ydb"  # it serves YDB's face on a port of its own when asked (TenureTarget.serve_ydb)
NETNS = "netns"  # it can run each of its processes in a network namespace (tools/faults/netns.py)

#: A host and port.
Address = tuple[str, int]


class Target(Protocol):
    """A backend under test and the server(s) behind it."""

    name: str
    #: Where the state lives (for a disk nemesis); must exist before :meth:`start`.
    data_dir: Path
    #: Extra environment of the next (re)start of the server (e.g. ``LD_PRELOAD``).
    env: dict[str, str]
    #: What the target supports beyond start/kill/restart/stop (module constants).
    capabilities: frozenset[str]

    @property
    def address(self) -> Address:
        """Host and port clients connect to (a fault proxy forwards there)."""

    @property
    def addresses(self) -> list[Address]:
        """Every address clients may connect to (a cluster's members), :attr:`address` first.

        A proxied worker gets a fault proxy per address, and a URL listing them all.
        """

    def url(self, addresses: Sequence[Address] | None = None) -> str:
        """The backend URL, reaching the server at ``addresses`` (default: :attr:`addresses`)."""

    def liveness_margin(self, window: float) -> float:
        """Seconds a recovery may take on this backend beyond the suite's own terms.

        :func:`tools.faults.scenarios.liveness_bound` adds it to the bound; each
        target says why (0 for ``tenure serve``, whose terms the bound is made of).
        """

    def start(self) -> None:
        """Start the server and return once it serves (bounded; raises if it cannot)."""

    def kill(self) -> None:
        """``kill -9`` the server (no goodbye, nothing flushed); waits until it is gone."""

    def restart(self) -> None:
        """Start the server again on the same state and address (after kill or exit)."""

    def stop(self) -> int | None:
        """Stop gracefully; the exit code (None if it had to be killed)."""

    def exit_code(self) -> int | None:
        """The server's exit code, or None while it runs."""

    @property
    def pid(self) -> int | None:
        """The running server's process id."""

    def close(self) -> None:
        """Kill whatever still runs; the logs stay (bounded; idempotent)."""


class Cluster(Target, Protocol):
    """A target of several members that fail one at a time (capability ``members``).

    Members are named; "the server" of :class:`Target` is all of them at once.
    """

    @property
    def members(self) -> list[str]:
        """Every member's name."""

    def running_members(self) -> list[str]:
        """The members whose process runs now (serving or not)."""

    def leader(self) -> str | None:
        """The member the running members agree leads (None if there is none now)."""

    def kill_member(self, name: str) -> None:
        """``kill -9`` one member; waits until it is gone."""

    def start_members(self, names: Sequence[str]) -> None:
        """Start stopped members again on their data; waits until each serves (bounded)."""


class Replicated(Target, Protocol):
    """Servers of one service, one of which leads, whose log lives in an etcd cluster
    (capability ``replicated``).

    Its servers and etcd's members are named; "the server" of :class:`Target` is all
    of them at once. Times given and returned are the histories'
    (:func:`~tools.faults.history.now`).
    """

    #: The leader's lease in etcd, in seconds: a leader that cannot renew it stops
    #: serving before it ends, and a dead leader is replaced about this long after.
    lease_ttl: int

    @property
    def servers(self) -> list[str]:
        """Every server's name."""

    def running_servers(self) -> list[str]:
        """The servers whose process runs now (serving, standing by, or stopped by a signal)."""

    def leader(self, *, excluding: Sequence[str] = (), timeout: float = 0.0) -> str | None:
        """The server that says it leads, not one of ``excluding`` (waits up to ``timeout``)."""

    def led_since(self, name: str, since: float) -> float | None:
        """When server ``name`` began to lead, the first time at or after ``since``."""

    def stepped_down_since(self, name: str, since: float) -> float | None:
        """When server ``name`` said it stepped down, the first time at or after ``since``."""

    def died_by_itself(self, name: str) -> str | None:
        """Why server ``name`` exited, if its process ended by itself (not by SIGKILL)."""

    def kill_server(self, name: str) -> None:
        """``kill -9`` one server; waits until it is gone."""

    def start_servers(self, names: Sequence[str]) -> None:
        """Start stopped servers again on their data; waits until each listens (bounded)."""

    def pause_server(self, name: str, paused: bool = True) -> None:
        """SIGSTOP (``paused``) or SIGCONT one server."""

    def cut_from_etcd(self, name: str, cut: bool = True) -> None:
        """Stall (``cut``) or resume every link of one server to etcd (nothing is lost)."""

    @property
    def etcd_members(self) -> list[str]:
        """Every etcd member's name."""

    def running_etcd_members(self) -> list[str]:
        """The etcd members whose process runs now."""

    def etcd_leader(self) -> str | None:
        """The etcd member the running members agree leads (None: none now)."""

    def kill_etcd_member(self, name: str) -> None:
        """``kill -9`` one etcd member; waits until it is gone."""

    def start_etcd_members(self, names: Sequence[str]) -> None:
        """Start stopped etcd members again on their data; waits until each serves (bounded)."""


def with_token(url: str, token: str | None) -> str:
    """``url`` (``tenure://host:port``, no query) with ``?token=`` (unchanged for None)."""
    return url if token is None else f"{url}?token={token}"


def as_replicated(target: Target) -> Replicated:
    """``target`` as a :class:`Replicated`; raises if it lacks the ``replicated`` capability."""
    if REPLICATED not in target.capabilities:
        raise TypeError(f"target {target.name} has no servers over etcd to fail one at a time")
    return cast(Replicated, target)


def as_cluster(target: Target) -> Cluster:
    """``target`` as a :class:`Cluster`; raises if it lacks the ``members`` capability."""
    if MEMBERS not in target.capabilities:
        raise TypeError(f"target {target.name} has no members to fail one at a time")
    return cast(Cluster, target)


class TenureTarget:
    """``tenure serve`` as a :class:`Target` (see the module docstring).

    ``launcher`` is what runs after the Python interpreter: ``["-m", "tenure"]``, or
    a mutant wrapper such as ``["-m", "tools.faults.mutant", "token-reset"]``.

    With :meth:`use_tokens` (before :meth:`start`) it serves with an auth file, its
    :meth:`url` carries a token, and it serves HTTP (``/metrics``) on :attr:`http_port`.
    """

    capabilities: frozenset[str] = frozenset(
        {DATA_DIR, PRELOAD, IDLE_TIMEOUT, TOKENS, DFLOCKD, YDB}
    )

    def __init__(
        self,
        data_dir: Path,
        *,
        fsync: str = "always",
        idle_timeout: float = 15.0,
        launcher: Sequence[str] = ("-m", "tenure"),
        env: Mapping[str, str] | None = None,
        extra_args: Sequence[str] = (),
    ) -> None:
        self.name = "tenure"
        #: More flags of ``tenure serve`` (more faces, say).
        self.extra_args = list(extra_args)
        self.data_dir = data_dir
        self.fsync = fsync
        self.idle_timeout = idle_timeout
        self.launcher = list(launcher)
        self.env = dict(env or {})
        self.port = free_port()
        self.log_path = data_dir.parent / f"{data_dir.name}-server.log"
        self.starts = 0
        self._proc: subprocess.Popen[bytes] | None = None
        #: The auth file and the token of :meth:`url` (:meth:`use_tokens`).
        self.auth_file: Path | None = None
        self.token: str | None = None
        #: The HTTP endpoint's port (/metrics), with an auth file.
        self.http_port: int | None = None

    def use_tokens(self, auth_file: Path, token: str) -> None:
        """Serve with ``auth_file`` (and /metrics on :attr:`http_port`); :meth:`url`
        carries ``token``. Takes effect at the next (re)start."""
        self.auth_file = auth_file
        self.token = token
        self.http_port = self.http_port or free_port()

    def serve_ydb(self, advertise: Address) -> int:
        """Serve YDB's face from the next (re)start on: ``--ydb-port`` (a free port,
        returned), with discovery sending clients to ``advertise`` (``--ydb-advertise``:
        a proxy in front of that port)."""
        port = free_port()
        host, through = advertise
        self.extra_args += ["--ydb-port", str(port), "--ydb-advertise", f"{host}:{through}"]
        return port

    @property
    def address(self) -> Address:
        """See :class:`Target`."""
        return ("127.0.0.1", self.port)

    @property
    def addresses(self) -> list[Address]:
        """See :class:`Target`: the one server."""
        return [self.address]

    def url(self, addresses: Sequence[Address] | None = None) -> str:
        """See :class:`Target` (one address: the first given)."""
        host, port = addresses[0] if addresses else self.address
        return with_token(f"tenure://{host}:{port}", self.token)

    def liveness_margin(self, window: float) -> float:
        """See :class:`Target`: none; the bound's terms are this server's."""
        return 0.0

    @property
    def pid(self) -> int | None:
        """See :class:`Target`."""
        return None if self._proc is None or self._proc.poll() is not None else self._proc.pid

    def start(self) -> None:
        """See :class:`Target`."""
        if self.pid is not None:
            raise RuntimeError("the server is already running")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        args = [
            *("--port", str(self.port), "--data-dir", str(self.data_dir)),
            *("--fsync", self.fsync, "--idle-timeout", str(self.idle_timeout)),
            *self.extra_args,
        ]
        if self.auth_file is not None:
            args += ["--auth-file", str(self.auth_file), "--http-port", str(self.http_port)]
        with self.log_path.open("ab") as log:
            self._proc = subprocess.Popen(
                [sys.executable, *self.launcher, "serve", *args],
                cwd=REPO,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **self.env},
            )
        self.starts += 1
        deadline = time.monotonic() + START_WAIT
        while '"msg": "listening"' not in self.output(offset):
            code = self._proc.poll()
            if code is not None:
                raise RuntimeError(f"the server exited {code}: {self.output(offset)[-2000:]}")
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"the server did not listen within {START_WAIT}s")
            time.sleep(0.02)

    def kill(self) -> None:
        """See :class:`Target`."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGCONT)  # a stopped process dies only once resumed
            proc.kill()
            proc.wait(timeout=START_WAIT)

    def restart(self) -> None:
        """See :class:`Target`."""
        self.kill()
        self.start()

    def stop(self) -> int | None:
        """See :class:`Target`."""
        proc = self._proc
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=START_WAIT)
            except subprocess.TimeoutExpired:
                self.kill()
                return None
        return proc.returncode

    def exit_code(self) -> int | None:
        """See :class:`Target`."""
        return None if self._proc is None else self._proc.poll()

    def close(self) -> None:
        """See :class:`Target`."""
        self.kill()

    def output(self, offset: int = 0) -> str:
        """The server's log from byte ``offset`` on (every start appends to one file)."""
        if not self.log_path.exists():
            return ""
        with self.log_path.open("rb") as file:
            file.seek(offset)
            return file.read().decode(errors="replace")
