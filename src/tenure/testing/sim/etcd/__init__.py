"""A model of the etcd that tenure uses, for the simulation (:mod:`tenure.testing.sim`):
one etcd cluster's state as etcd applies requests (:class:`SimEtcdStore`, sans-I/O:
KV, Txn, leases, watches, compaction), served on the simulated loop through
grpc.aio-shaped channels and calls (:class:`SimEtcd`: latency, members down, answers
lost after the write applied, leader changes), so that tenure's own etcd client
(:mod:`tenure._etcd`, given ``EtcdClientOptions.channel_factory``) runs unchanged
over it.

It needs the ``etcd`` extra (aetcd's protocol definitions and grpc's status codes).
"""

from tenure.testing.sim.etcd._keyspace import EtcdRpcError
from tenure.testing.sim.etcd._store import SimEtcdStore
from tenure.testing.sim.etcd._stubs import SimEtcd

__all__ = ["EtcdRpcError", "SimEtcd", "SimEtcdStore"]
