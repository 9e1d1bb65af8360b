"""The configuration of ``tenure serve`` (docs/operations.md).

* :mod:`~tenure.server._config.settings`: the table of settings (name, type,
  default, range, help text);
* :mod:`~tenure.server._config.serve_config`: ``ServeConfig``, merged from flags,
  environment variables and the config file.
"""
