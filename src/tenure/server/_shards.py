"""``tenure serve --shards N``: N independent servers on one host, one command.

One tenure server is one event loop, so it uses one core; a host with more cores
serves more by running more servers, and clients spread their nodes over them with
the sharded URL (``tenure://h:P,h:P+1,...?sharded=true``: each node lives on one
server, by a stable hash of its name; docs/cluster.md, "Sharding"). This module is
the process that starts them and stands for them:

* shard K runs ``tenure serve`` with the same settings (the same flags, variables and
  config file) but ``--port PORT+K`` and ``--data-dir DIR/shard-K``, and every other
  listener's port offset by K too (``--http-port``, each face's own port);
* SIGTERM and SIGINT are passed on to every shard (each stops gracefully), SIGHUP
  too (each reloads its files);
* when a shard exits on its own, the others are stopped and the command exits with
  that shard's status: a shard down is its nodes down, so a supervisor (systemd,
  Kubernetes) must see it and restart the set, not leave it half up.

Sharding is not replication (docs/guarantees.md): ``--shards`` with ``--cluster``
is refused.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from types import FrameType

from tenure.server import _faces
from tenure.server._config.serve_config import ConfigError, ServeConfig

__all__ = ["check_shards", "run_shards", "shard_arguments", "sharded_url"]

log = logging.getLogger("tenure.server")

#: prctl's option that signals a process when its parent dies (linux/prctl.h).
PR_SET_PDEATHSIG = 1
#: Seconds between two looks at the shards.
POLL = 0.05
#: Seconds a shard gets past its own shutdown grace before it is killed.
STOP_MARGIN = 10.0


def _listeners(config: ServeConfig) -> list[tuple[str, int]]:
    """Every listener's flag and port in ``config`` (0: none), the main one first."""
    found = [("--port", config.port), ("--http-port", config.http_port)]
    found += [(face.flag, face.port(config)) for face in _faces.enabled(config)]
    return found


def check_shards(config: ServeConfig) -> None:
    """With ``--shards`` above 1: ports that can be offset, and no ``--cluster``.

    Raises:
        ConfigError: naming the setting.
    """
    if config.shards <= 1:
        return
    if config.cluster:
        raise ConfigError(
            f"--shards={config.shards} with --cluster: a cluster replicates one server's "
            "state; shards are independent servers (run several clusters to shard them)"
        )
    taken: dict[int, str] = {}
    for flag, port in _listeners(config):
        if flag == "--port" and not port:
            raise ConfigError(
                f"--shards={config.shards} needs a --port (shard K listens on PORT+K), not 0"
            )
        if not port:
            continue
        for k in range(config.shards):
            if port + k > 65535:
                raise ConfigError(f"--shards={config.shards}: {flag}={port} + {k} is past 65535")
            if port + k in taken:
                raise ConfigError(
                    f"--shards={config.shards}: {flag}={port} + {k} is {taken[port + k]}'s "
                    "port too; each shard's listeners need ports of their own"
                )
            taken[port + k] = f"{flag} of shard {k}"


def shard_arguments(config: ServeConfig, argv: Sequence[str], k: int) -> list[str]:
    """``tenure serve``'s arguments for shard ``k``: ``argv`` with its own ports and data
    directory (flags given last win over the same flag given earlier, over the
    variables and over the config file)."""
    args = [*argv, "--shards", "1", "--data-dir", str(config.data_dir / f"shard-{k}")]
    for flag, port in _listeners(config):
        if port:
            args += [flag, str(port + k)]
    return args


def sharded_url(config: ServeConfig) -> str:
    """The URL that reaches every shard: ``tenure://HOST:PORT,...?sharded=true``."""
    host = config.host if config.host not in ("", "0.0.0.0", "::") else "127.0.0.1"
    host = f"[{host}]" if ":" in host else host
    scheme = "tenures" if config.tls_cert is not None else "tenure"
    doors = ",".join(f"{host}:{config.port + k}" for k in range(config.shards))
    return f"{scheme}://{doors}?sharded=true"


def _stop_with_parent() -> None:
    """In a shard, before it runs: SIGTERM when this command dies, even by SIGKILL
    (Linux's parent-death signal), so that no shard outlives the command standing for
    it. Elsewhere nothing: the signals passed on still stop them."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def run_shards(config: ServeConfig, argv: Sequence[str]) -> int:
    """Start ``config.shards`` servers, stand for them until they stop; the exit status."""
    shards = [
        subprocess.Popen(
            [sys.executable, "-m", "tenure", "serve", *shard_arguments(config, argv, k)],
            stdin=subprocess.DEVNULL,
            # (A preexec_fn is unsafe beside threads: this process starts none.)
            preexec_fn=_stop_with_parent if sys.platform == "linux" else None,
        )
        for k in range(config.shards)
    ]
    pids = [shard.pid for shard in shards]
    fields = {"shards": config.shards, "url": sharded_url(config), "pids": pids}
    log.info("serving shards", extra={"event": "shards_started", "fields": fields})
    stopping = False
    deadline = 0.0  # once stopping: when the shards still up are killed

    def pass_on(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping, deadline
        if signum != signal.SIGHUP and not stopping:
            stopping = True
            deadline = time.monotonic() + config.shutdown_grace + STOP_MARGIN
        for shard in shards:
            if shard.poll() is None:
                shard.send_signal(signal.SIGTERM if signum == signal.SIGINT else signum)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, pass_on)
    # SIGHUP was held from the command's first instruction (_tenure_console), and the
    # shards inherited the hold (each releases its own once its handler is set): one
    # sent meanwhile is passed on now.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGHUP})
    status = 0
    ended: set[int] = set()
    # Polled (Popen's own waits only: a wait of the process's that reaped a shard
    # would hide its end from Popen), every POLL s: a supervisor's pace.
    while len(ended) < len(shards):
        for k, shard in enumerate(shards):
            if k in ended or shard.poll() is None:
                continue
            ended.add(k)
            code = shard.returncode
            if not stopping:  # on its own: the set is not whole, so it ends, not 0
                fields = {"shard": k, "pid": shard.pid, "exit_code": code}
                event = {"event": "shard_exited", "fields": fields}
                log.error("a shard exited: stopping the others", extra=event)
                pass_on(signal.SIGTERM, None)
                status = code or 1
            elif code and not status:
                status = code
        if stopping and time.monotonic() > deadline:  # past its grace: killed
            for shard in shards:
                if shard.poll() is None:
                    shard.kill()
        time.sleep(POLL)
    return status
