"""YDB compatibility: YDB's coordination clients served by a tenure server (docs/ydb.md).

* :mod:`~tenure.compat.ydb.service`: the gRPC services of ``--ydb-port``, and the
  face as the server sees it;
* :mod:`~tenure.compat.ydb.sessions`: Session streams: start and re-attach, pings,
  stop, the end of a stream;
* :mod:`~tenure.compat.ydb.semaphores`: the semaphore requests and the engine
  effects that answer them;
* :mod:`~tenure.compat.ydb.nodes`: CreateNode, AlterNode, DropNode, DescribeNode;
* :mod:`~tenure.compat.ydb.directory`: discovery and logins;
* :mod:`~tenure.compat.ydb.access`: tickets, logins, and the auth file's tokens;
* :mod:`~tenure.compat.ydb.paths`: YDB paths and tenure node names;
* :mod:`~tenure.compat.ydb.stream` and :mod:`~tenure.compat.ydb.pipe`: one stream's
  state, and how the server's outboxes write to it.

Nothing is imported here: the face needs the ``ydb`` extra (``pip install
'tenure[ydb]'``), and only a server with ``--ydb-port`` loads it.
"""
