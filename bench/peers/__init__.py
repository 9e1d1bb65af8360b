"""tenure against its peers, on the same machine, through tenure's public API only.

What a user of tenure would write (``tenure``, ``tenure.client``, ``tenure.errors``,
``tenure.backends``, ``tenure.sync``, ``tenure.fencing``), against what a user of
the peer would write: redis-py's ``Lock``, etcd's v3 lock API, ``pg_advisory_lock``,
dflockd-client, YDB's asyncio SDK. No module here (nor any bench module one
imports) may use a private tenure module: a number reached through internals is
not one a user gets (``tests/bench/test_peers_public.py`` reads the imports).
:mod:`bench.peers.run` is the orchestrator (``python -m bench``);
:mod:`bench.peers.targets` what it is judged against.
"""
