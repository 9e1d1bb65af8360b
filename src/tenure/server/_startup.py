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
import gc
import json
import logging
import signal
import sys
from collections.abc import Callable
from typing import TextIO

from tenure.server._config.serve_config import ConfigError, ServeConfig
from tenure.server._durability.identity import has_state, instance_id, lock_data_dir
from tenure.server._durability.journal import Journal
from tenure.server._durability.storage import CorruptLogError, DataDir
from tenure.server._net.tls import describe
from tenure.server._serve import Server

log = logging.getLogger("tenure.server")


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
        fresh = not has_state(config.data_dir)
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
