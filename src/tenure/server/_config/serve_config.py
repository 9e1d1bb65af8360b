"""The settings of ``tenure serve`` read: flags, environment variables and a TOML config
file, merged into a :class:`ServeConfig` (:mod:`tenure.server._config.config`, re-exported
here), and checked.

Every setting (the server's table is :data:`tenure.server._config.settings.SETTINGS`;
each face's, in its own folder, is a :class:`~.face_settings.FaceSettings` the face
registry lists; the operator's list is docs/operations.md) has

* a flag ``--name`` (dashes for underscores),
* an environment variable ``TENURE_NAME`` (upper case),
* a key ``name`` in the config file named by ``--config`` or ``TENURE_CONFIG``.

The first of these that is given wins, in that order; otherwise the default
applies. :attr:`ServeConfig.sources` records which one each value came from
(``flag``, ``env``, ``file`` or ``default``). Relative paths in the config file are
relative to the file's directory; an empty path (``tls_cert = ""``) means none.

:func:`resolve` is the one place that merges the sources. It raises
:class:`ConfigError` naming the flag, variable, or file and key of a value that
cannot be used: an unknown key, a wrong type, a value out of range, and also a
TLS or auth file that cannot be loaded (it loads them once to find out, so that a
bad file stops ``tenure serve`` at once, with exit code 2). Secrets live only in
the auth file; :meth:`ServeConfig.fields` (what the server logs) holds paths only.

The faces of other lock services are given to :func:`resolve` and :func:`add_arguments`
by their caller, as are their checks run (:func:`tenure.server._faces.check`, after
:func:`resolve`: :func:`tenure.server._startup.configure`), all through the face
registry: the registry reads the faces, which build on the plug, which holds a
:class:`ServeConfig`, so this module imports none of them (``tests/test_import_graph.py``
fails on an import circle). Each face's values are kept in :attr:`ServeConfig.faces`,
by face name, as the typed object its settings make (:meth:`ServeConfig.face`).
"""

from __future__ import annotations

import argparse
import difflib
import tomllib
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from tenure.server._config.cluster_settings import ENTRY_OVERHEAD
from tenure.server._config.cluster_url import without_secrets
from tenure.server._config.config import ServeConfig
from tenure.server._config.face_settings import FaceSettings
from tenure.server._config.setting import Setting
from tenure.server._config.settings import DEFAULT_DATA_DIR, SETTINGS, ConfigError
from tenure.server._durability.storage import FsyncMode
from tenure.server._net.auth import load_tokens
from tenure.server._net.tls import server_context

__all__ = [
    "ConfigError",
    "ServeConfig",
    "add_arguments",
    "check_files",
    "check_http",
    "check_ports",
    "env_name",
    "every_row",
    "resolve",
]

ENV_PREFIX: Final = "TENURE_"
CONFIG_ENV: Final = "TENURE_CONFIG"


def env_name(name: str) -> str:
    """The environment variable of setting ``name`` (``data_dir`` -> ``TENURE_DATA_DIR``)."""
    return ENV_PREFIX + name.upper()


def add_arguments(parser: argparse.ArgumentParser, faces: Sequence[FaceSettings[Any]] = ()) -> None:
    """Declare the flags of ``tenure serve`` on ``parser`` (all default to None: unset):
    the server's settings, then those of ``faces`` (the face registry's:
    :func:`tenure.server._faces.settings`)."""
    parser.add_argument(
        "--config",
        dest="config",
        metavar="PATH",
        default=None,
        help="read settings from this TOML file: one key per setting, named as the flag "
        'with underscores (max_connections = 10, fsync = "batch"); flags and environment '
        f"variables win over it; env {CONFIG_ENV}",
    )
    for setting in every_row(faces):
        default = setting.default
        if isinstance(default, FsyncMode):
            default = default.value
        elif isinstance(default, Path):
            default = DEFAULT_DATA_DIR
        parser.add_argument(
            setting.flag,
            dest=setting.name,
            metavar=setting.metavar,
            default=None,
            help=setting.help.replace("%(default)s", str(default))
            + f"; env {env_name(setting.name)}",
        )
    parser.epilog = (
        "Every setting is a flag, an environment variable TENURE_<NAME>, or a key of the "
        "--config file; the first given wins, in that order, then the default. "
        "docs/operations.md describes each one."
    )


def every_row(faces: Sequence[FaceSettings[Any]] = ()) -> tuple[Setting, ...]:
    """The server's settings, then those of ``faces``, in order.

    Raises:
        ValueError: two rows have one name.
    """
    rows = (*SETTINGS, *(row for face in faces for row in face.rows))
    names = [row.name for row in rows]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ValueError(f"settings named twice: {', '.join(twice)}")
    return rows


def resolve(
    args: argparse.Namespace,
    environ: Mapping[str, str],
    faces: Sequence[FaceSettings[Any]] = (),
) -> ServeConfig:
    """Merge flags (first), environment (second), config file (third) and defaults,
    for the server's settings and those of ``faces`` (the face registry's:
    :func:`tenure.server._faces.settings`; each face's kept typed in
    :attr:`ServeConfig.faces`).

    Raises:
        ConfigError: a flag, variable or file key does not parse or is out of range,
            or a TLS or auth file cannot be loaded; the message names it.
    """
    rows = every_row(faces)
    config_file, config_source = _config_path(args, environ)
    in_file = _load_file(config_file, {row.name for row in rows}) if config_file else {}
    values: dict[str, object] = {}
    sources: dict[str, str] = {"config_file": config_source}
    for setting in rows:
        flag = getattr(args, setting.name, None)
        env = environ.get(env_name(setting.name))
        try:
            if flag is not None:
                where = f"{setting.flag}={flag!r}"
                sources[setting.name] = "flag"
                values[setting.name] = setting.from_text(flag)
            elif env is not None:
                where = f"{env_name(setting.name)}={env!r}"
                sources[setting.name] = "env"
                values[setting.name] = setting.from_text(env)
            elif setting.name in in_file:
                value = in_file[setting.name]
                where = f"config file {config_file}: {setting.name} = {value!r}"
                sources[setting.name] = "file"
                assert config_file is not None
                values[setting.name] = setting.from_toml(value, config_file.parent)
            else:
                values[setting.name] = setting.default
                sources[setting.name] = "default"
        except ValueError as error:
            raise ConfigError(f"{where}: {error}") from None
    kept = {face.face: face.make(values) for face in faces}
    own = {setting.name: values[setting.name] for setting in SETTINGS}
    config = ServeConfig(**own, faces=kept, config_file=config_file, sources=sources)  # type: ignore[arg-type]
    check_files(config)
    check_ports(config)
    check_http(config)
    check_cluster(config)
    return config


def check_cluster(config: ServeConfig) -> None:
    """With ``--cluster``: a URL the cluster can use, an address to advertise, and
    entries that hold any frame a client may send.

    Raises:
        ConfigError: naming the setting.
    """
    if not config.cluster:
        return
    from tenure.server._config.cluster_url import (  # etcd's stubs: only here
        check_cell,
        parse_cell_etcd,
        parse_cluster_url,
    )

    try:
        url = parse_cluster_url(config.cluster)
    except ValueError as error:
        raise ConfigError(f"--cluster={without_secrets(config.cluster)!r}: {error}") from None
    try:
        check_cell(config.cell)
    except ValueError as error:
        raise ConfigError(f"--cell={config.cell!r}: {error}") from None
    if config.cell_etcd:
        try:
            parse_cell_etcd(config.cell_etcd, url)
        except ValueError as error:
            shown = without_secrets(config.cell_etcd)
            raise ConfigError(f"--cell-etcd={shown!r}: {error}") from None
    if config.max_frame_size + ENTRY_OVERHEAD > config.cluster_max_entry:
        raise ConfigError(
            f"--cluster-max-entry={config.cluster_max_entry}: a log entry must hold the "
            f"largest frame a client may send, --max-frame-size={config.max_frame_size} "
            f"plus {ENTRY_OVERHEAD} bytes"
        )
    if config.advertise:
        host, _, port = config.advertise.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(f"--advertise={config.advertise!r}: expected HOST:PORT")
    elif config.host in ("", "0.0.0.0", "::"):
        raise ConfigError(
            f"--cluster with --host={config.host!r} (every address) needs --advertise "
            "HOST:PORT: the address clients reach this server at"
        )


def check_ports(config: ServeConfig, faces: Iterable[tuple[str, int]] = ()) -> None:
    """No two listeners of the server on one port: the main one, the HTTP endpoint's,
    and ``faces``, each enabled face's own as (flag, port), which the face registry
    lists (0, picked by the OS or none, is never a clash).

    Raises:
        ConfigError: naming both settings.
    """
    listeners = [("--port", config.port), ("--http-port", config.http_port), *faces]
    taken: dict[int, str] = {}
    for flag, port in listeners:
        if port and port in taken:
            raise ConfigError(
                f"{flag}={port}: {taken[port]} is that port too; "
                "each listener needs a port of its own"
            )
        taken.setdefault(port, flag)


def check_http(config: ServeConfig) -> None:
    """With ``--http-port``: the libraries of the server extra installed.

    Raises:
        ConfigError: naming the extra to install.
    """
    if not config.http_port:
        return
    try:
        import aiohttp.web  # noqa: F401  (only to find out that it is there)
        import prometheus_client  # noqa: F401
    except ImportError as error:
        raise ConfigError(
            f"--http-port={config.http_port}: the HTTP endpoint needs the server extra "
            f"({(error.name or 'a library').split('.')[0]} is missing): "
            "pip install 'tenure[server]'"
        ) from None
    if config.metrics_auth and config.auth_file is None:
        raise ConfigError("--metrics-auth needs --auth-file: its tokens are what /metrics wants")
    from tenure.server._http.listener import http_tls_context  # the server extra: only here

    http_tls_context(config.http_tls_cert, config.http_tls_key)


def check_files(config: ServeConfig) -> None:
    """Load the TLS files and the auth file once, so that a bad one is reported now.

    Raises:
        ConfigError: naming the file (and what is wrong with it).
    """
    server_context(config.tls_cert, config.tls_key, config.tls_client_ca)
    if config.auth_file is not None:
        load_tokens(config.auth_file)


def _config_path(args: argparse.Namespace, environ: Mapping[str, str]) -> tuple[Path | None, str]:
    flag = getattr(args, "config", None)
    if flag:
        return Path(flag), "flag"
    env = environ.get(CONFIG_ENV)
    if env:
        return Path(env), "env"
    return None, "default"


def _load_file(path: Path, known: Collection[str]) -> dict[str, object]:
    """The settings in config file ``path``; a key not ``known`` is an error."""
    try:
        with path.open("rb") as file:
            data = tomllib.load(file)
    except OSError as error:
        raise ConfigError(f"config file {path}: cannot read it: {error.strerror}") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"config file {path}: not valid TOML: {error}") from None
    for key in data:
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"config file {path}: unknown setting {key!r}{hint}")
    return data
