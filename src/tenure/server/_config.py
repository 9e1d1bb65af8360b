"""The settings of ``tenure serve``: command-line flags, each also from the environment.

Every setting has a flag ``--name`` and an environment variable ``TENURE_NAME``
(upper case, dashes as underscores); the flag wins over the variable, the variable
over the default. :func:`add_arguments` declares the flags on a parser and
:func:`resolve` turns the parsed flags plus the environment into a
:class:`ServeConfig`, or raises :class:`ConfigError` naming the bad setting.

A config file (TOML), TLS and authentication will be further sources and fields
of :class:`ServeConfig`; :func:`resolve` is the one place that merges sources.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Final

from tenure._protocol import DEFAULT_MAX_FRAME_SIZE, MAX_MAX_FRAME_SIZE, MIN_MAX_FRAME_SIZE
from tenure.server._storage import FsyncMode

ENV_PREFIX: Final = "TENURE_"
DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 6388
DEFAULT_DATA_DIR: Final = "./tenure-data"
DEFAULT_MAX_CONNECTIONS: Final = 1024


class ConfigError(ValueError):
    """A setting has a value that cannot be used (the message names the setting)."""


@dataclass(frozen=True, slots=True)
class ServeConfig:
    """Everything ``tenure serve`` needs to start. ``sources`` says where each came from."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    data_dir: Path = Path(DEFAULT_DATA_DIR)
    fsync: FsyncMode = FsyncMode.ALWAYS
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    sources: Mapping[str, str] = field(default_factory=dict)

    def fields(self) -> dict[str, object]:
        """Every setting as JSON-ready data, and where each came from (for the log)."""
        values = asdict(self)
        values["data_dir"] = str(self.data_dir.resolve())
        values["fsync"] = self.fsync.value
        values["sources"] = dict(self.sources)
        return values


def _port(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise ValueError("must be 0 to 65535 (0: any free port)")
    return value


def _frame_size(text: str) -> int:
    value = int(text)
    if not MIN_MAX_FRAME_SIZE <= value <= MAX_MAX_FRAME_SIZE:
        raise ValueError(f"must be {MIN_MAX_FRAME_SIZE} to {MAX_MAX_FRAME_SIZE}")
    return value


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError("must be at least 1")
    return value


def _fsync(text: str) -> FsyncMode:
    try:
        return FsyncMode(text.lower())
    except ValueError:
        raise ValueError("must be always, batch or off") from None


@dataclass(frozen=True, slots=True)
class _Setting:
    name: str
    parse: Callable[[str], object]
    default: object
    metavar: str
    help: str


_SETTINGS: Final = (
    _Setting("host", str, DEFAULT_HOST, "ADDR", "address to listen on (default: %(default)s)"),
    _Setting(
        "port",
        _port,
        DEFAULT_PORT,
        "N",
        "TCP port to listen on; 0 picks a free one (default: %(default)s)",
    ),
    _Setting(
        "data_dir",
        Path,
        Path(DEFAULT_DATA_DIR),
        "DIR",
        "directory of the write-ahead log, snapshots and instance-id; created if missing "
        "(default: %(default)s)",
    ),
    _Setting(
        "fsync",
        _fsync,
        FsyncMode.ALWAYS,
        "MODE",
        "when the log reaches the disk: 'always' fsyncs before every reply (no acknowledged "
        "change is ever lost), 'batch' fsyncs every 50 ms (a machine crash may lose that "
        "much), 'off' leaves it to the OS (a machine crash may lose more; a server crash "
        "alone loses nothing) (default: always)",
    ),
    _Setting(
        "max_frame_size",
        _frame_size,
        DEFAULT_MAX_FRAME_SIZE,
        "BYTES",
        f"largest frame accepted from a client, {MIN_MAX_FRAME_SIZE} to {MAX_MAX_FRAME_SIZE} "
        "(default: %(default)s)",
    ),
    _Setting(
        "max_connections",
        _positive,
        DEFAULT_MAX_CONNECTIONS,
        "N",
        "client connections served at once; more are refused with LIMIT_EXCEEDED "
        "(default: %(default)s)",
    ),
)


def env_name(name: str) -> str:
    """The environment variable of setting ``name`` (``data_dir`` -> ``TENURE_DATA_DIR``)."""
    return ENV_PREFIX + name.upper()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the flags of ``tenure serve`` on ``parser`` (all default to None: unset)."""
    for setting in _SETTINGS:
        default = setting.default
        if isinstance(default, FsyncMode):
            default = default.value
        elif isinstance(default, Path):
            default = DEFAULT_DATA_DIR
        parser.add_argument(
            "--" + setting.name.replace("_", "-"),
            dest=setting.name,
            metavar=setting.metavar,
            default=None,
            help=setting.help.replace("%(default)s", str(default))
            + f"; env {env_name(setting.name)}",
        )


def resolve(args: argparse.Namespace, environ: Mapping[str, str]) -> ServeConfig:
    """Merge flags (first), environment (second) and defaults into a ServeConfig.

    Raises:
        ConfigError: a flag or variable does not parse; the message names it.
    """
    values: dict[str, object] = {}
    sources: dict[str, str] = {}
    for setting in _SETTINGS:
        flag = getattr(args, setting.name, None)
        env = environ.get(env_name(setting.name))
        if flag is not None:
            text, where = flag, "--" + setting.name.replace("_", "-")
            sources[setting.name] = "flag"
        elif env is not None:
            text, where = env, env_name(setting.name)
            sources[setting.name] = "env"
        else:
            values[setting.name] = setting.default
            sources[setting.name] = "default"
            continue
        try:
            values[setting.name] = setting.parse(text)
        except ValueError as error:
            raise ConfigError(f"{where}={text!r}: {error}") from None
    return ServeConfig(**values, sources=sources)  # type: ignore[arg-type]
