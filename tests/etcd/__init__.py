"""Real etcd for the tests: members on loopback ports, started and stopped by PID.

:mod:`tests.etcd.cluster` starts one or three ``etcd`` processes (Debian's
``etcd-server``, installed by ``scripts/bootstrap test``); :mod:`tests.etcd.fixtures`
is the pytest plugin (``etcd_member``, ``etcd_cluster``) that ``tests/conftest.py``
loads; :mod:`tests.etcd.client` is a small gRPC client (aetcd's generated stubs) for
tests that look at etcd itself.
"""
