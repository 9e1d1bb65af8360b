"""The configuration of ``tenure serve`` (docs/operations.md).

* :mod:`~tenure.server._config.settings`: the table of the server's own settings
  (name, type, default, range, help text), of :mod:`~tenure.server._config.setting`
  rows; :mod:`~tenure.server._config.face_settings`: a face's, declared in its folder;
* :mod:`~tenure.server._config.serve_config`: ``ServeConfig``, merged from flags,
  environment variables and the config file.

Layer (CONTRIBUTING.md): its modules may import each other, tenure._core,
tenure._protocol, tenure._runtime.collector, tenure.server._durability.storage,
tenure.server._net.auth, tenure.server._net.tls, tenure.server._net.throttle,
tenure.server._durability.fsync_modes, tenure.server._logs,
tenure.server._session_table, tenure.server._http.listener (lazily), tenure._etcd.url
(lazily), tenure._etcd.client (types) and tenure.errors.
"""
