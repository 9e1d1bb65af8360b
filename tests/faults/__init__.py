"""The fault suite: real processes, injected faults, whole histories, checked.

Worker processes (:mod:`~tests.faults.worker`) take mutexes and update registers
against a real server while nemeses (:mod:`~tests.faults.nemesis`,
:mod:`~tests.faults.disk`) crash it, break the network, pause clients, move
their clocks and fill or break the disk. Everything is recorded
(:mod:`~tests.faults.history`) and judged at the end (:mod:`~tests.faults.checker`).
The backend is reached through :class:`~tests.faults.target.Target` only:
``tenure serve`` (:class:`~tests.faults.target.TenureTarget`) or a three-member
etcd cluster (:class:`~tests.faults.etcd_target.EtcdTarget`, whose members also
fail one at a time: :mod:`~tests.faults.members`).

Short mode is ``pytest tests/faults`` (part of every test run); long mode is
``scripts/faults``, which writes docs/reliability.md.
"""
