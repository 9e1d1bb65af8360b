"""The faces of other lock services: their wire protocols, spoken by the tenure server.

A face lets the clients of another lock service use a tenure server as they are: it
speaks their protocol and turns each request into engine commands, journaled and
group-committed like native ones. A face meets the server only through
:mod:`tenure.server.plug` (what the server lends it, and what it must be: start,
stop, serve its clients, take the engine's effects for its sessions; a test holds
every module here to that); the server makes each face its settings turn on through
its face registry. What the protocol means stays in its package here.

* :mod:`tenure.compat.dflockd`: the dflockd line protocol (docs/dflockd.md), on the
  server's main port (and ``--dflockd-port``);
* :mod:`tenure.compat.ydb`: YDB's coordination protocol over gRPC (docs/ydb.md), a
  listener of its own (``--ydb-port``).

Layer (CONTRIBUTING.md): its modules may import each other, tenure._core,
tenure._protocol, tenure._runtime, tenure.server.plug and tenure.errors.
"""
