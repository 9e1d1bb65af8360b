"""The etcd client: what the ``etcd://`` backend and a cluster's servers use of etcd.

One client below both users (neither imports the other): :mod:`~tenure._etcd.client`
(:class:`~tenure._etcd.client.EtcdClient`: one gRPC channel to an etcd cluster,
failing over between its endpoints, with auth), :mod:`~tenure._etcd.streams` (one
keepalive stream and one watch stream over it), :mod:`~tenure._etcd.requests` (etcd's
requests, built: Txn compares and ops, ranges) and :mod:`~tenure._etcd.url` (an etcd
URL read into the client's options and a key prefix). What the keys mean is each
user's: the backend's layout is :mod:`tenure.backends.etcd._keys`, a cluster's
:mod:`tenure.server._cluster.keys`.

It needs the ``etcd`` extra (aetcd's generated stubs, grpc); nothing imports it unless
it uses etcd.

Layer (CONTRIBUTING.md): its modules may import each other, tenure._url_options and
tenure.errors.
"""
