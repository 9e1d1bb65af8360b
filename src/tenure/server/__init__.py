"""The tenure server: a thin asyncio shell around the engine (sockets, timers, disk).

So far: the data directory (:mod:`tenure.server._storage`: a write-ahead log with
snapshots) and the journal that makes the engine durable over it
(:mod:`tenure.server._journal`). The network server (``tenure serve``) builds on them.
"""

from __future__ import annotations

from tenure.server._journal import Journal
from tenure.server._storage import CorruptLogError, DataDir, FsyncMode, Recovered

__all__ = ["CorruptLogError", "DataDir", "FsyncMode", "Journal", "Recovered"]
