"""The dflockd face's settings (``--dflockd-*``): its rows of ``tenure serve``'s table.

:data:`SETTINGS` is what the face's registry entry (:mod:`.entry`) hands the server:
each row a flag, an environment variable and a config-file key, named
``dflockd_<field>`` after a field of :class:`DflockdSettings`, which is what the face
reads (``plug.config.face(SETTINGS)``). The server's own settings the face also obeys
(``--idle-timeout``, ``--max-requests-per-turn``, ``--pause-unread``) are its
:class:`~tenure.compat.dflockd.loop.Pace`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from tenure.server.plug import FaceSettings, Setting, in_range


@dataclass(frozen=True, slots=True)
class DflockdSettings:
    """The ``--dflockd-*`` settings (the rows below say what each means)."""

    port: int = 0  # a listener for dflockd clients only (0: the main port only)
    default_lease: int = 33
    max_locks: int = 1024
    max_locks_per_token: int = 0  # 0: no share of one token's (only max_locks)
    max_waiters: int = 0  # 0: no limit of dflockd's own (the node's max_waiters still holds)
    auto_release: bool = True
    gc_interval: float = 5.0
    gc_max_idle: float = 60.0


_DEFAULT: Final = DflockdSettings()

#: The face's settings, as ``tenure serve`` reads them (its entry hands them over).
SETTINGS: Final = FaceSettings(
    "dflockd",
    DflockdSettings,
    (
        Setting(
            "dflockd_port",
            int,
            _DEFAULT.port,
            "N",
            "also listen here for dflockd clients only (the main port serves both protocols, "
            "told apart by the first byte); 0: no extra listener (default: %(default)s)",
            in_range(0, 65535),
        ),
        Setting(
            "dflockd_default_lease",
            int,
            _DEFAULT.default_lease,
            "S",
            "dflockd: lease of a grant that names none, and of a renew without one, in whole "
            "seconds (default: %(default)s)",
            in_range(1, 9_223_372_036),
        ),
        Setting(
            "dflockd_max_locks",
            int,
            _DEFAULT.max_locks,
            "N",
            "dflockd: distinct keys (locks and semaphores; idle ones count until collected) "
            "before new keys get error_max_locks (default: %(default)s)",
            in_range(1, 10_000_000),
        ),
        Setting(
            "dflockd_max_locks_per_token",
            int,
            _DEFAULT.max_locks_per_token,
            "N",
            "dflockd: distinct keys one token's clients may have registered (idle ones count "
            "until collected; every client is one token without --auth-file) before its new "
            "keys get error_max_locks, so that one token cannot take --dflockd-max-locks "
            "from the others; 0: no limit of its own (default: %(default)s)",
            in_range(0, 10_000_000),
        ),
        Setting(
            "dflockd_max_waiters",
            int,
            _DEFAULT.max_waiters,
            "N",
            "dflockd: queued requests per key before error_max_waiters; 0: no limit "
            "(default: %(default)s)",
            in_range(0, 1_000_000),
        ),
        Setting(
            "dflockd_auto_release",
            bool,
            _DEFAULT.auto_release,
            "BOOL",
            "dflockd: release what a connection holds when it closes; false keeps each grant "
            "until its lease ends (also across a restart) (default: %(default)s)",
        ),
        Setting(
            "dflockd_gc_interval",
            float,
            _DEFAULT.gc_interval,
            "S",
            "dflockd: how often idle keys are collected, in seconds (default: %(default)s)",
            in_range(0, 3600, above=True),
        ),
        Setting(
            "dflockd_gc_max_idle",
            float,
            _DEFAULT.gc_max_idle,
            "S",
            "dflockd: a key idle this long is forgotten (and a semaphore's limit may change) "
            "(default: %(default)s)",
            in_range(0, 86400),
        ),
    ),
)


def member_address(settings: DflockdSettings, host: str, address: str) -> str:
    """Where a cluster's member says dflockd's clients reach it: its own port on the
    member's ``host``, else the main ``address`` (which serves dflockd too)."""
    return f"{host}:{settings.port}" if settings.port else address
