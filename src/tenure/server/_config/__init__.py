"""The configuration of ``tenure serve`` (docs/operations.md).

* :mod:`~tenure.server._config.settings`: the table of the server's own settings
  (name, type, default, range, help text), of :mod:`~tenure.server._config.setting`
  rows; :mod:`~tenure.server._config.face_settings`: a face's, declared in its folder;
* :mod:`~tenure.server._config.serve_config`: ``ServeConfig``, merged from flags,
  environment variables and the config file.
"""
