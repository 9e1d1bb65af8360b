"""The table of ``tenure serve`` settings: name, type, default, range and help text.

Each :class:`Setting` knows how to read its value from text (a flag or an
environment variable) and from a TOML value (the config file), and checks the
range either way; :mod:`tenure.server._config.serve_config` merges the sources. A value that
cannot be used raises ValueError (the caller names the flag, variable or file key).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from tenure._protocol import DEFAULT_MAX_FRAME_SIZE, MAX_MAX_FRAME_SIZE, MIN_MAX_FRAME_SIZE
from tenure.errors import ConfigError as ConfigError  # re-exported: it lives in tenure.errors
from tenure.server._driver import BATCH_INTERVAL
from tenure.server._durability.storage import FsyncMode
from tenure.server._session_table import DEFAULT_MAX_QUEUED

DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 6388
DEFAULT_DATA_DIR: Final = "./tenure-data"
DEFAULT_MAX_CONNECTIONS: Final = 1024
#: ``--fsync batch``: how often what was committed is made durable, in seconds.
DEFAULT_BATCH_INTERVAL: Final = BATCH_INTERVAL
#: How long a shutdown waits for clients to hang up after GoingAway, in seconds.
DEFAULT_SHUTDOWN_GRACE: Final = 1.0
#: A client that lets this many bytes pile up unread is disconnected.
DEFAULT_MAX_UNREAD: Final = 64 * 1024 * 1024
#: Effects kept for one detached session before it is ended instead.
DEFAULT_MAX_QUEUED_PUSHES: Final = DEFAULT_MAX_QUEUED
#: Messages one connection has served in a row before every other gets its turn.
DEFAULT_MAX_REQUESTS_PER_TURN: Final = 64
#: A client with this many bytes of answers unsent is not read until it reads them.
DEFAULT_PAUSE_UNREAD: Final = 64 * 1024
#: An OPEN connection silent for longer than this is closed (0: never), in seconds.
DEFAULT_IDLE_TIMEOUT: Final = 15.0
#: A connection must complete its handshake (TLS, then Hello) within this, in seconds.
DEFAULT_HANDSHAKE_TIMEOUT: Final = 10.0


def _range(
    low: float | None = None, high: float | None = None, *, above: bool = False
) -> Callable[[float], None]:
    """A check that a number is ``>= low`` (``> low`` if ``above``) and ``<= high``."""

    def check(value: float) -> None:
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError("must be a finite number")
        if low is not None and (value <= low if above else value < low):
            raise ValueError(f"must be {'more than' if above else 'at least'} {low:g}")
        if high is not None and value > high:
            raise ValueError(f"must be at most {high:g}")

    return check


def _no_check(value: object) -> None:
    pass


@dataclass(frozen=True, slots=True)
class Setting:
    """One setting: ``kind`` is str, int, float, Path (optional unless it has a default) or
    FsyncMode; ``check`` raises ValueError for a value out of range."""

    name: str
    kind: type
    default: object
    metavar: str
    help: str
    check: Callable[[Any], None] = _no_check

    @property
    def flag(self) -> str:
        """``--data-dir`` for ``data_dir``."""
        return "--" + self.name.replace("_", "-")

    def from_text(self, text: str) -> object:
        """The value of a flag or environment variable (an empty path means none)."""
        value: object
        if self.kind is bool:
            words = {"true": True, "1": True, "yes": True, "on": True}
            words |= {"false": False, "0": False, "no": False, "off": False}
            if text.lower() not in words:
                raise ValueError("must be true or false (also 1/0, yes/no, on/off)")
            return words[text.lower()]
        if self.kind is int:
            try:
                value = int(text)
            except ValueError:
                raise ValueError("must be an integer") from None
        elif self.kind is float:
            try:
                value = float(text)
            except ValueError:
                raise ValueError("must be a number of seconds") from None
        elif self.kind is FsyncMode:
            try:
                value = FsyncMode(text.lower())
            except ValueError:
                raise ValueError("must be always, batch or off") from None
        elif self.kind is Path:
            if not text:
                if self.default is not None:
                    raise ValueError("must not be empty")
                return None
            value = Path(text)
        else:
            value = text
        self.check(value)
        return value

    def from_toml(self, value: object, base: Path) -> object:
        """The value of a config-file key; relative paths are relative to ``base``.

        Raises:
            ValueError: wrong type or out of range.
        """
        if self.kind is bool:
            if type(value) is not bool:
                raise ValueError(f"must be true or false, not {_toml_type(value)}")
            return value
        if self.kind is int:
            if type(value) is not int:
                raise ValueError(f"must be an integer, not {_toml_type(value)}")
            self.check(value)
            return value
        if self.kind is float:
            if type(value) not in (int, float):
                raise ValueError(f"must be a number of seconds, not {_toml_type(value)}")
            number = float(value)  # type: ignore[arg-type]
            self.check(number)
            return number
        if not isinstance(value, str):
            raise ValueError(f"must be a string, not {_toml_type(value)}")
        if self.kind is Path and value and not Path(value).expanduser().is_absolute():
            value = str(base / value)
        return self.from_text(value)


def _toml_type(value: object) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}
    for kind, name in names.items():
        if type(value) is kind:
            return name
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    return "a date or time"


#: ``--event-loop`` choices; ``auto`` takes uvloop when it is installed.
EVENT_LOOPS: Final = ("auto", "asyncio", "uvloop")


def _one_of(*choices: str) -> Callable[[str], None]:
    def check(value: str) -> None:
        if value not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}")

    return check


SETTINGS: Final = (
    Setting("host", str, DEFAULT_HOST, "ADDR", "address to listen on (default: %(default)s)"),
    Setting(
        "port",
        int,
        DEFAULT_PORT,
        "N",
        "TCP port to listen on; 0 picks a free one (default: %(default)s)",
        _range(0, 65535),
    ),
    Setting(
        "data_dir",
        Path,
        Path(DEFAULT_DATA_DIR),
        "DIR",
        "directory of the write-ahead log, snapshots and instance-id; created if missing "
        "(default: %(default)s)",
    ),
    Setting(
        "fsync",
        FsyncMode,
        FsyncMode.ALWAYS,
        "MODE",
        "when the log reaches the disk: 'always' fsyncs before every reply (no acknowledged "
        "change is ever lost), 'batch' fsyncs every --batch-interval (a machine crash may "
        "lose that much), 'off' leaves it to the OS (a machine crash may lose more; a server "
        "crash alone loses nothing) (default: always)",
    ),
    Setting(
        "batch_interval",
        float,
        DEFAULT_BATCH_INTERVAL,
        "SECONDS",
        "with --fsync batch: how often committed changes are fsynced, more than 0 and at "
        "most 60 (default: %(default)s)",
        _range(0, 60, above=True),
    ),
    Setting(
        "max_frame_size",
        int,
        DEFAULT_MAX_FRAME_SIZE,
        "BYTES",
        f"largest frame accepted from a client, {MIN_MAX_FRAME_SIZE} to {MAX_MAX_FRAME_SIZE} "
        "(default: %(default)s)",
        _range(MIN_MAX_FRAME_SIZE, MAX_MAX_FRAME_SIZE),
    ),
    Setting(
        "max_connections",
        int,
        DEFAULT_MAX_CONNECTIONS,
        "N",
        "client connections served at once; more are refused with LIMIT_EXCEEDED "
        "(default: %(default)s)",
        _range(1),
    ),
    Setting(
        "max_unread",
        int,
        DEFAULT_MAX_UNREAD,
        "BYTES",
        f"a client that leaves this many bytes of replies and pushes unread is disconnected "
        f"(its sessions are detached), at least {MIN_MAX_FRAME_SIZE} (default: %(default)s)",
        _range(MIN_MAX_FRAME_SIZE),
    ),
    Setting(
        "pause_unread",
        int,
        DEFAULT_PAUSE_UNREAD,
        "BYTES",
        "stop reading a client's requests while this many bytes of answers to it wait to be "
        "sent, until they are down to a quarter: a client that does not read is throttled, "
        "not buffered (one that reaches --max-unread first is dropped); at least 4096 "
        "(default: %(default)s)",
        _range(4096),
    ),
    Setting(
        "max_requests_per_turn",
        int,
        DEFAULT_MAX_REQUESTS_PER_TURN,
        "N",
        "requests (native messages, dflockd requests) one connection has served in a row "
        "before every other connection gets its turn; the rest wait unread, so a client "
        "that floods the server slows only itself, 1 to 1000000 (default: %(default)s)",
        _range(1, 1_000_000),
    ),
    Setting(
        "max_queued_pushes",
        int,
        DEFAULT_MAX_QUEUED_PUSHES,
        "N",
        "pushes kept for one detached session until it is re-attached; one more closes the "
        "session (default: %(default)s)",
        _range(1),
    ),
    Setting(
        "idle_timeout",
        float,
        DEFAULT_IDLE_TIMEOUT,
        "SECONDS",
        "close a connection that sent no frame for this long (announced in Welcome; clients "
        "ping within it); its sessions are detached; 0 = never (default: %(default)s)",
        _range(0),
    ),
    Setting(
        "handshake_timeout",
        float,
        DEFAULT_HANDSHAKE_TIMEOUT,
        "SECONDS",
        "close a connection that has not completed the TLS handshake, or the tenure "
        "handshake (Hello), within this (default: %(default)s)",
        _range(0, above=True),
    ),
    Setting(
        "shutdown_grace",
        float,
        DEFAULT_SHUTDOWN_GRACE,
        "SECONDS",
        "on SIGTERM/SIGINT, how long to wait for clients to hang up after GoingAway; also how "
        "long a closed connection may take to read its last words (default: %(default)s)",
        _range(0, 3600),
    ),
    Setting(
        "tls_cert",
        Path,
        None,
        "PEM",
        "serve TLS (1.2 or later) with this certificate chain (PEM); needs --tls-key",
    ),
    Setting("tls_key", Path, None, "PEM", "the private key of --tls-cert (PEM, unencrypted)"),
    Setting(
        "tls_client_ca",
        Path,
        None,
        "PEM",
        "require client certificates signed by these CA certificates (PEM): mutual TLS; "
        "needs --tls-cert",
    ),
    Setting(
        "auth_file",
        Path,
        None,
        "TOML",
        "require a token in every Hello, from this file of [[token]] tables (name, secret or "
        "secret_sha256, access, nodes); without it tokens are ignored",
    ),
    Setting(
        "dflockd_port",
        int,
        0,
        "N",
        "also listen here for dflockd clients only (the main port serves both protocols, "
        "told apart by the first byte); 0: no extra listener (default: %(default)s)",
        _range(0, 65535),
    ),
    Setting(
        "dflockd_default_lease",
        int,
        33,
        "S",
        "dflockd: lease of a grant that names none, and of a renew without one, in whole "
        "seconds (default: %(default)s)",
        _range(1, 9_223_372_036),
    ),
    Setting(
        "dflockd_max_locks",
        int,
        1024,
        "N",
        "dflockd: distinct keys (locks and semaphores; idle ones count until collected) "
        "before new keys get error_max_locks (default: %(default)s)",
        _range(1, 10_000_000),
    ),
    Setting(
        "dflockd_max_waiters",
        int,
        0,
        "N",
        "dflockd: queued requests per key before error_max_waiters; 0: no limit "
        "(default: %(default)s)",
        _range(0, 1_000_000),
    ),
    Setting(
        "dflockd_auto_release",
        bool,
        True,
        "BOOL",
        "dflockd: release what a connection holds when it closes; false keeps each grant "
        "until its lease ends (also across a restart) (default: %(default)s)",
    ),
    Setting(
        "dflockd_gc_interval",
        float,
        5.0,
        "S",
        "dflockd: how often idle keys are collected, in seconds (default: %(default)s)",
        _range(0, 3600, above=True),
    ),
    Setting(
        "dflockd_gc_max_idle",
        float,
        60.0,
        "S",
        "dflockd: a key idle this long is forgotten (and a semaphore's limit may change) "
        "(default: %(default)s)",
        _range(0, 86400),
    ),
    Setting(
        "event_loop",
        str,
        "auto",
        "LOOP",
        "the event loop: 'uvloop' (faster), 'asyncio', or 'auto' for uvloop when it is "
        "installed (default: %(default)s)",
        _one_of(*EVENT_LOOPS),
    ),
)

#: The settings by name (also the keys a config file may have).
BY_NAME: Final = {setting.name: setting for setting in SETTINGS}
