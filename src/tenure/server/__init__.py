"""The tenure server: a thin asyncio shell around the engine (sockets, timers, disk).

The runtime, here:

* :mod:`tenure.server._serve`: the network server, which runs the rest;
* :mod:`tenure.server._driver`: the journaled engine on the event loop (group commit);
* :mod:`tenure.server._session_table`: which connection owns which session;
* :mod:`tenure.server._front_end`: the hook that runs a front end for another lock
  service's protocol (:mod:`tenure.compat`: dflockd's);
* :mod:`tenure.server._startup`: ``tenure serve`` from start to exit.

Grouped by concern:

* :mod:`tenure.server._net`: connections: accepting them, the native protocol, the
  handshake, tokens and timeouts, the auth file, TLS, and the outboxes;
* :mod:`tenure.server._durability`: the data directory (a write-ahead log with
  snapshots), the engine made durable over it, the directory's lock and instance id;
* :mod:`tenure.server._config`: the settings of ``tenure serve`` from flags,
  environment and config file (see docs/operations.md);
* :mod:`tenure.server._http`: the HTTP endpoint of ``--http-port`` (``/metrics``,
  ``/healthz``, ``/readyz``; the ``server`` extra), fed through the hooks of
  :mod:`tenure.server._observe`; :mod:`tenure.server._logs`: the log's formats.
"""

from __future__ import annotations

from tenure.server._config.serve_config import ConfigError, ServeConfig
from tenure.server._driver import JournaledEngine
from tenure.server._durability.journal import Journal
from tenure.server._durability.storage import CorruptLogError, DataDir, FsyncMode, Recovered
from tenure.server._serve import Server
from tenure.server._startup import serve

__all__ = [
    "ConfigError",
    "CorruptLogError",
    "DataDir",
    "FsyncMode",
    "Journal",
    "JournaledEngine",
    "Recovered",
    "ServeConfig",
    "Server",
    "serve",
]
