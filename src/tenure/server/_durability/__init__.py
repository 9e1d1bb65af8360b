"""What the server keeps on disk, and how it gets it back.

* :mod:`~tenure.server._durability.storage`: the data directory (a write-ahead log
  with snapshots);
* :mod:`~tenure.server._durability.writer`: the thread that writes and syncs the
  log for ``--fsync always`` (group commit off the event loop, preallocation);
* :mod:`~tenure.server._durability.journal`: the engine made durable over it
  (recovery at start-up, compaction in a child process);
* :mod:`~tenure.server._durability.identity`: the data directory's lock and the
  instance id of its state.

Layer (CONTRIBUTING.md): its modules may import each other, tenure._core,
tenure._protocol and tenure.errors.
"""
