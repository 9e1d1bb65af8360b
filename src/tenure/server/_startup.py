"""``tenure serve`` from start to exit: logging, the data directory, signals.

:func:`run` is what the command line calls. It logs the settings (one JSON line on
stderr), rebuilds the engine from the data directory, listens, and serves until
SIGTERM or SIGINT (exit 0) or a fatal disk error (exit 1). Start-up failures (a
corrupt log, an unusable directory, a port in use) are logged and exit 1; a TLS or
auth file that stopped loading since the settings were checked exits 2. The log
names the auth file and its tokens' names, never a secret.
"""

from __future__ import annotations

import asyncio
import fcntl
import gc
import json
import logging
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO, Final, TextIO

from tenure.server._config import ConfigError, ServeConfig
from tenure.server._journal import Journal
from tenure.server._serve import Server
from tenure.server._storage import CorruptLogError, DataDir
from tenure.server._tls import describe

log = logging.getLogger("tenure.server")

INSTANCE_ID_FILE: Final = "instance-id"
INSTANCE_ID_BYTES: Final = 16
LOCK_FILE: Final = "lock"


class JsonFormatter(logging.Formatter):
    """One JSON object per log line: time, level, logger, message and any ``fields``."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON."""
        out: dict[str, object] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            out.update(fields)
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def setup_logging(stream: TextIO = sys.stderr) -> None:
    """Send the ``tenure`` loggers to ``stream`` as JSON lines, at INFO and above."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger("tenure")
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    root.propagate = False


def _has_state(path: Path) -> bool:
    if not path.is_dir():
        return False
    return any(entry.name.startswith(("wal-", "snapshot-")) for entry in os.scandir(path))


def instance_id(path: Path, *, fresh: bool) -> bytes:
    """The data directory's instance id, created (16 random bytes) when the state is new.

    ``fresh``: the directory held no state before this start, so any old id names a
    state that is gone and is replaced (docs/protocol.md section 11).
    """
    file = path / INSTANCE_ID_FILE
    if not fresh:
        try:
            data = file.read_bytes()
        except FileNotFoundError:
            log.warning("%s is missing: the state gets a new instance id", file)
        else:
            if len(data) == INSTANCE_ID_BYTES:
                return data
            log.warning("%s is not %d bytes: replaced", file, INSTANCE_ID_BYTES)
    data = os.urandom(INSTANCE_ID_BYTES)
    temp = file.with_suffix(".tmp")
    with temp.open("wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(temp, file)
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return data


def lock_data_dir(path: Path) -> BinaryIO:
    """Hold ``<path>/lock`` exclusively (released when the file is closed, or at exit).

    Raises:
        OSError: another process holds it (BlockingIOError), or the directory is unusable.
    """
    path.mkdir(parents=True, exist_ok=True)
    file = (path / LOCK_FILE).open("ab")
    try:
        fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        file.close()
        if isinstance(error, BlockingIOError):
            raise BlockingIOError(f"{path} is in use by another tenure server") from None
        raise
    return file


async def serve(config: ServeConfig) -> int:
    """Start, serve until told to stop, and return the exit code."""
    loop = asyncio.get_running_loop()
    journal = Journal(DataDir(config.data_dir, config.fsync))
    try:
        lock = lock_data_dir(config.data_dir)
    except OSError:
        log.critical("cannot lock the data directory %s", config.data_dir, exc_info=True)
        return 1
    try:
        return await _serve_locked(config, journal, loop)
    finally:
        lock.close()


async def _serve_locked(
    config: ServeConfig, journal: Journal, loop: asyncio.AbstractEventLoop
) -> int:
    try:
        fresh = not _has_state(config.data_dir)
        engine = journal.open(loop.time())
        # The recovered state lives as long as the server: the cyclic collector need
        # not walk its (possibly millions of) objects in every full collection.
        gc.freeze()
        ident = instance_id(config.data_dir, fresh=fresh)
    except (CorruptLogError, OSError):
        log.critical("cannot open the data directory %s", config.data_dir, exc_info=True)
        journal.abort()
        return 1
    try:
        server = Server(config, journal, engine, ident)
    except ConfigError as error:
        log.critical("%s", error)
        journal.close()
        return 2
    try:
        host, port = await server.start()
    except OSError:
        log.critical("cannot listen on %s:%d", config.host, config.port, exc_info=True)
        journal.close()
        return 1
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, server.stop)
    fields = {
        "host": host,
        "port": port,
        "instance_id": ident.hex(),
        "sessions": len(engine.sessions),
        "nodes": len(engine.nodes),
        "tls": describe(server.gate.tls),
        "auth_file": str(config.auth_file) if config.auth_file is not None else None,
        "auth_tokens": server.gate.tokens.names if server.gate.tokens is not None else None,
        "event_loop": "uvloop" if type(loop).__module__.startswith("uvloop") else "asyncio",
    }
    log.info("listening", extra={"fields": fields})
    try:
        return await server.wait()
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)


def loop_factory(choice: str) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The event loop ``--event-loop`` asks for (None: asyncio's own).

    Raises:
        ConfigError: ``uvloop`` was asked for and is not installed.
    """
    if choice == "asyncio":
        return None
    try:
        import uvloop  # optional: imported only when it may be used
    except ImportError:
        if choice == "uvloop":
            raise ConfigError("--event-loop uvloop: uvloop is not installed") from None
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def run(config: ServeConfig) -> int:
    """The ``tenure serve`` command: log the settings, serve, return the exit code."""
    setup_logging()
    log.info("config", extra={"fields": config.fields()})
    try:
        factory = loop_factory(config.event_loop)
    except ConfigError as error:
        log.critical("%s", error)
        return 2
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(serve(config))
