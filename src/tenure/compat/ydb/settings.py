"""The YDB face's settings (``--ydb-*``), and their checks before the server starts.

:data:`SETTINGS` is what the face's registry entry (:mod:`.entry`) hands the server:
each row a flag, an environment variable and a config-file key, named ``ydb_<field>``
after a field of :class:`YdbSettings`, which is what the face reads
(``plug.config.face(SETTINGS)``). The server calls :func:`check` through its face
registry when ``--ydb-port`` turns the face on (the ranges are the rows'; that the
port is one of its own, the server's). This module imports neither grpc nor YDB's
messages: the settings are listed without the ``ydb`` extra, and :func:`check` is
what says that it is missing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from tenure.compat.ydb.paths import split_advertised
from tenure.errors import ConfigError
from tenure.server.plug import FaceSettings, Setting, in_range

#: The most resource paths one ListResources answers, unless set (``--ydb-max-listed-resources``).
DEFAULT_MAX_LISTED_RESOURCES: Final = 10_000


@dataclass(frozen=True, slots=True)
class YdbSettings:
    """The ``--ydb-*`` settings (the rows below say what each means)."""

    port: int = 0  # 0: no YDB face
    database: str = "/local"
    advertise: str = ""  # empty: --host, or the machine's name for a wildcard
    ping_interval: float = 1.0
    ticket_ttl: float = 43200.0
    max_message_size: int = 64 * 1024 * 1024
    max_listed_resources: int = DEFAULT_MAX_LISTED_RESOURCES


_DEFAULT: Final = YdbSettings()

#: The face's settings, as ``tenure serve`` reads them (its entry hands them over).
SETTINGS: Final = FaceSettings(
    "ydb",
    YdbSettings,
    (
        Setting(
            "ydb_port",
            int,
            _DEFAULT.port,
            "N",
            "also serve YDB's coordination clients (gRPC) on this port; 0: off "
            "(default: %(default)s; needs pip install 'tenure[ydb]')",
            in_range(0, 65535),
        ),
        Setting(
            "ydb_database",
            str,
            _DEFAULT.database,
            "PATH",
            "YDB: the database the YDB face answers for; node /DB/a/b is tenure node a/b "
            "(default: %(default)s)",
        ),
        Setting(
            "ydb_advertise",
            str,
            _DEFAULT.advertise,
            "HOST",
            "YDB: where discovery sends clients: HOST or HOST:PORT (behind a proxy or a port "
            "mapping); empty: --host, or the machine's name when --host is a wildcard, and "
            "--ydb-port (default: empty)",
        ),
        Setting(
            "ydb_ping_interval",
            float,
            _DEFAULT.ping_interval,
            "S",
            "YDB: the longest time between the server's pings on a session stream (a third "
            "of the session's timeout if shorter); YDB's Python SDK drops a stream silent "
            "for 3 s (default: %(default)s)",
            in_range(0.01, 60),
        ),
        Setting(
            "ydb_ticket_ttl",
            float,
            _DEFAULT.ticket_ttl,
            "S",
            "YDB: how long a ticket from a login (static credentials) is good for, in "
            "seconds (default: %(default)s)",
            in_range(1, 30 * 86400),
        ),
        Setting(
            "ydb_max_message_size",
            int,
            _DEFAULT.max_message_size,
            "BYTES",
            "YDB: the largest gRPC message the YDB face reads or writes, 1 MiB to 1 GiB; at "
            "least what YDB's SDKs send (64 MiB), so that an oversized request gets its own "
            "error on a live session stream (default: %(default)s)",
            in_range(1024 * 1024, 1024 * 1024 * 1024),
        ),
        Setting(
            "ydb_max_listed_resources",
            int,
            _DEFAULT.max_listed_resources,
            "N",
            "YDB: the most resource paths one ListResources answers (YDB's call has no "
            "pages); a listing past it is refused, naming this setting. The listing reads "
            "--step-budget names per turn of the loop (default: %(default)s)",
            in_range(1, 1_000_000),
        ),
    ),
)


def enabled(settings: YdbSettings) -> bool:
    """The face runs with a port of its own (``--ydb-port``)."""
    return settings.port != 0


def check(settings: YdbSettings) -> None:
    """A database path YDB's clients can name, an address to advertise that parses,
    and the YDB SDK's protocol definitions installed.

    Raises:
        ConfigError: naming the setting, or the extra to install.
    """
    database = settings.database
    parts = database.split("/")
    if not database.startswith("/") or len(parts) < 2 or not all(parts[1:]):
        raise ConfigError(
            f"--ydb-database={database!r}: a database is an absolute path such as /local "
            "(no empty parts, no trailing slash)"
        )
    if settings.advertise:
        try:
            split_advertised(settings.advertise)
        except ValueError as error:
            raise ConfigError(f"--ydb-advertise: {error}") from None
    try:
        import grpc  # noqa: F401  (only to find out that they are there)
        import ydb  # noqa: F401
    except ImportError as error:
        raise ConfigError(
            f"--ydb-port={settings.port}: the YDB face needs the ydb extra "
            f"({(error.name or 'a library').split('.')[0]} is missing): "
            "pip install 'tenure[ydb]'"
        ) from None


def member_address(settings: YdbSettings, host: str, address: str) -> str:
    """Where a cluster's member says YDB's clients reach it (the leader's, as every
    member's discovery answers): ``--ydb-advertise`` as given if it names a port, else
    its host (or the member's ``host``) with ``--ydb-port``."""
    given = settings.advertise or host
    if re.match(r"^(\[[^\]]*\]|[^:]+):\d+$", given):
        return given
    bracketed = f"[{given}]" if ":" in given and not given.startswith("[") else given
    return f"{bracketed}:{settings.port}"
