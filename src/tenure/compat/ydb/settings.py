"""The YDB face's checks of its settings, run by ``tenure serve`` before it starts.

The server calls :func:`check` through its face registry when ``--ydb-port`` turns
the face on (the ranges are the settings table's; that the port is one of its own,
the server's). It imports neither grpc nor YDB's messages: it is what says that
they are missing.
"""

from __future__ import annotations

from tenure.compat.ydb.paths import split_advertised
from tenure.errors import ConfigError
from tenure.server.plug import ServeConfig


def check(config: ServeConfig) -> None:
    """A database path YDB's clients can name, an address to advertise that parses,
    and the YDB SDK's protocol definitions installed.

    Raises:
        ConfigError: naming the setting, or the extra to install.
    """
    database = config.ydb_database
    parts = database.split("/")
    if not database.startswith("/") or len(parts) < 2 or not all(parts[1:]):
        raise ConfigError(
            f"--ydb-database={database!r}: a database is an absolute path such as /local "
            "(no empty parts, no trailing slash)"
        )
    if config.ydb_advertise:
        try:
            split_advertised(config.ydb_advertise)
        except ValueError as error:
            raise ConfigError(f"--ydb-advertise: {error}") from None
    try:
        import grpc  # noqa: F401  (only to find out that they are there)
        import ydb  # noqa: F401
    except ImportError as error:
        raise ConfigError(
            f"--ydb-port={config.ydb_port}: the YDB face needs the ydb extra "
            f"({(error.name or 'a library').split('.')[0]} is missing): "
            "pip install 'tenure[ydb]'"
        ) from None
