"""Front ends for other lock services' wire protocols, plugged into the tenure server.

A front end lets the clients of another lock service use a tenure server as they
are: it speaks their protocol on the server's connections and turns each request
into engine commands, journaled and group-committed like native ones. The server
knows a front end only through :class:`tenure.server._front_end.FrontEnd` (start,
stop, serve a connection, take the engine's effects for its sessions); what the
protocol means stays in its package here.

* :mod:`tenure.compat.dflockd`: the dflockd line protocol (docs/dflockd.md);
* :mod:`tenure.compat.ydb`: YDB's coordination protocol over gRPC (docs/ydb.md), a
  listener of its own (``--ydb-port``).
"""
