"""YDB compatibility: YDB's coordination clients served by a tenure server (docs/ydb.md).

* :mod:`~tenure.compat.ydb.face`: the face as the server sees it, listening on
  ``--ydb-port``; :mod:`~tenure.compat.ydb.services`: its gRPC services, which method
  is which call; :mod:`~tenure.compat.ydb.session_calls`: a Session stream from its
  start to its end;
* :mod:`~tenure.compat.ydb.entry`: what the server's face registry reads of it: its
  settings and their checks (:mod:`~tenure.compat.ydb.settings`, ``--ydb-*``), its
  counts (:mod:`~tenure.compat.ydb.metrics`), its address in a cluster member's
  record, and its maker (none of them imports grpc);
* :mod:`~tenure.compat.ydb.sessions`: Session streams: start and re-attach, pings,
  stop, the end of a stream;
* :mod:`~tenure.compat.ydb.semaphores`: the semaphore requests and the engine
  effects that answer them;
* :mod:`~tenure.compat.ydb.nodes`: CreateNode, AlterNode, DropNode, DescribeNode;
* :mod:`~tenure.compat.ydb.rate_limiter`: YDB's rate limiter service, over tenure's
  rate limiters (:mod:`~tenure.compat.ydb.resources`: resources and their buckets;
  :mod:`~tenure.compat.ydb.steps`: a call's writes, all or none);
* :mod:`~tenure.compat.ydb.directory`: discovery and logins;
* :mod:`~tenure.compat.ydb.tickets`: tickets, logins, and the auth file's tokens;
* :mod:`~tenure.compat.ydb.paths`: YDB paths and tenure node names;
* :mod:`~tenure.compat.ydb.stream` and :mod:`~tenure.compat.ydb.pipe`: one stream's
  state, and how the server's outboxes write to it.

Nothing of the face is imported here: it needs the ``ydb`` extra (``pip install
'tenure[ydb]'``), and only a server with ``--ydb-port`` loads it (its entry, settings
and counts load without it).
"""

import os

# gRPC's C core writes lines of its own to stderr, in a format of its own (a port it
# cannot bind is an "E1123 11:29:13.950333 ... add_port.cc:83] ..." line besides the
# exception the server turns into its own line): they would break the server's log of
# one event per line. The core reads GRPC_VERBOSITY once, when grpc is first imported,
# which in tenure happens only under this package; an operator who sets it gets them.
os.environ.setdefault("GRPC_VERBOSITY", "NONE")
