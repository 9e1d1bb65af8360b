"""The tenure server: a thin asyncio shell around the engine (sockets, timers, disk).

So far: the data directory (:mod:`tenure.server._storage`), a write-ahead log with
snapshots. The network server (``tenure serve``) builds on it.
"""

from __future__ import annotations

from tenure.server._storage import CorruptLogError, DataDir, FsyncMode, Recovered

__all__ = ["CorruptLogError", "DataDir", "FsyncMode", "Recovered"]
