"""The etcd client both etcd users share (``src/tenure/_etcd``), tested on its own.

Most of it runs in every etcd test (the ``etcd://`` backend's in ``tests/backends/etcd``,
a cluster's in ``tests/cluster``); here are the parts tested without etcd (the
streams' writers, URLs) and on one etcd member (failover, the requests' shapes).
"""
