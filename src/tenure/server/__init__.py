"""The tenure server: a thin asyncio shell around the engine (sockets, timers, disk).

* :mod:`tenure.server._storage`: the data directory (a write-ahead log with snapshots);
* :mod:`tenure.server._journal`: the engine made durable over it;
* :mod:`tenure.server._driver`: the journaled engine on the event loop (group commit);
* :mod:`tenure.server._session_table`: which connection owns which session;
* :mod:`tenure.server._serve`: the network server;
* :mod:`tenure.server._gate`: the handshake, tokens, authorization, idle and handshake
  timeouts of each connection; :mod:`tenure.server._auth`: the auth file and the
  policy; :mod:`tenure.server._tls`: TLS and mutual TLS;
* :mod:`tenure.server._startup`, :mod:`tenure.server._config` and
  :mod:`tenure.server._settings`: ``tenure serve``, its settings from flags,
  environment and config file (see docs/operations.md).
"""

from __future__ import annotations

from tenure.server._config import ConfigError, ServeConfig
from tenure.server._driver import JournaledEngine
from tenure.server._journal import Journal
from tenure.server._serve import Server
from tenure.server._startup import serve
from tenure.server._storage import CorruptLogError, DataDir, FsyncMode, Recovered

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
