"""The fault suite's framework: real processes, injected faults, whole histories, checked.

A tool the tests call, not tests: its tests are ``tests/faults/`` (short mode), and
``scripts/faults`` runs it for long (``python -m tools.faults``).

Worker processes (:mod:`~tools.faults.worker`) take mutexes and update registers
against a real server while nemeses (:mod:`~tools.faults.nemesis`,
:mod:`~tools.faults.disk`) crash it, break the network, pause clients, move
their clocks and fill or break the disk. Everything is recorded
(:mod:`~tools.faults.history`) and judged at the end (:mod:`~tools.faults.checker`),
by the suite's own rules and by lincheck's models over each model's whole history
(:mod:`~tools.faults.check_lin`, :mod:`~tools.faults.lin_events`).
The backend is reached through :class:`~tools.faults.target.Target` only:
``tenure serve`` (:class:`~tools.faults.target.TenureTarget`), three ``tenure
serve --cluster`` over a three-member etcd cluster
(:class:`~tools.faults.cluster_target.TenureClusterTarget`, whose servers and etcd
members also fail one at a time, and whose leader is cut off from etcd and paused:
:mod:`~tools.faults.failover`, measured by :mod:`~tools.faults.check_failover`), a
three-member etcd cluster (:class:`~tools.faults.etcd_target.EtcdTarget`, whose
members also fail one at a time: :mod:`~tools.faults.members`), a ``redis-server``
or a PostgreSQL (:mod:`~tools.faults.db_targets`). In the ``linearizable``
scenario a cluster's servers, etcd's members and the workers each run in a network
namespace of their own (:mod:`~tools.faults.netns`), and the kernel cuts them
(:mod:`~tools.faults.lin_cuts`). The ``tenant`` scenario's
nemesis is a hostile tenant (:mod:`~tools.faults.tenant`, its abuses
:mod:`~tools.faults.abuses` and :mod:`~tools.faults.abuses_surfaces`, its tokens
:mod:`~tools.faults.tokens`) among honest clients, judged by
:mod:`~tools.faults.check_tenant`.

Short mode is ``pytest tests/faults`` (part of every test run); long mode is
``scripts/faults``, which writes docs/reliability.md.
"""
