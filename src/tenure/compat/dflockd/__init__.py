"""dflockd compatibility: dflockd clients served by a tenure server (docs/dflockd.md).

* :mod:`~tenure.compat.dflockd.codec`: the sans-I/O codec of the line protocol
  (pure: importing it loads no I/O, thread or clock module, a test checks);
* :mod:`~tenure.compat.dflockd.face`: the face, each request answered from the
  server's host;
* :mod:`~tenure.compat.dflockd.loop`: one connection's reading, the ``auth``
  handshake and its fair share;
* :mod:`~tenure.compat.dflockd.holds`: what the face keeps besides the engine
  (holds, keys, tokens);
* :mod:`~tenure.compat.dflockd.keeper`: its housekeeping: its nodes, the key limits,
  the idle-key collector, the sessions an earlier run left, ``stats``;
* :mod:`~tenure.compat.dflockd.entry`: what the server's face registry reads of it:
  its settings (:mod:`~tenure.compat.dflockd.settings`, ``--dflockd-*``), its counts
  (:mod:`~tenure.compat.dflockd.metrics`), its address in a cluster member's record,
  and its maker.

Nothing is imported here, so that the codec stays importable on its own.
"""
