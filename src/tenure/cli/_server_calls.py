"""``tenure backup`` and ``tenure reload``: the server asked to act on itself, at either door.

``--url`` is the URL every command takes (``tenure://HOST:PORT``, ``TENURE_URL``,
the token as every command takes it: ``--token-file``, ``TENURE_AUTH_TOKEN``,
``?token=``), and the request goes over the native protocol (ReadBackup,
ReloadFiles: protocol version 8) on a connection of its own
(:mod:`tenure.backends._remote_admin`, through :mod:`tenure.backends.remote`,
imported when the command runs); or, as before, the server's HTTP endpoint
(``http(s)://HOST:HTTP_PORT``, its ``--http-port``), asked ``POST /admin/backup`` or
``/admin/reload`` with the token as ``Authorization: Bearer``. Either way an admin
token, or, of a server without an auth file, the server's own host (native only:
docs/operations.md, "Backup and restore", says why).

Layer (CONTRIBUTING.md): this module may also import tenure.backends.remote (lazily).
"""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

import click

from tenure.cli._auth_token import auth_token, redact, token_file_option
from tenure.cli._common import (
    CLIENT_NAME,
    DEFAULT_URL,
    URL_ENV,
    CommandFailedError,
    F,
    run,
)
from tenure.cli._status import Status
from tenure.errors import UnsupportedError

if TYPE_CHECKING:
    from collections.abc import Callable

    from tenure.backends.remote import DoorReload

__all__ = [
    "HTTP_SCHEMES",
    "NATIVE_SCHEMES",
    "ca_option",
    "server_url_option",
    "http_context",
    "native_backup",
    "native_reload",
    "scheme_of",
]

#: The URLs of the native protocol, and of the HTTP endpoint.
NATIVE_SCHEMES: Final = ("tenure", "tenures")
HTTP_SCHEMES: Final = ("http", "https")


def server_url_option(function: F) -> F:
    """``--url`` of ``tenure backup``: the server's ``tenure://`` URL (``TENURE_URL``, as
    every command's), or its HTTP endpoint; and ``--token-file``."""
    return token_file_option(
        click.option(
            "--url",
            envvar=URL_ENV,
            default=DEFAULT_URL,
            show_default=True,
            metavar="URL",
            help="the server's tenure://HOST:PORT (a cluster's: any members), or its HTTP "
            f"endpoint, http(s)://HOST:HTTP_PORT; env {URL_ENV}",
        )(function)
    )


def ca_option(function: F) -> F:
    """``--ca FILE``: CA certificates to trust, for a ``tenures://`` (or ``tenure://``:
    it implies TLS, as the URL's ``?ca=``) or an ``https://`` URL."""
    return click.option(
        "--ca",
        type=click.Path(dir_okay=False, exists=True, path_type=Path),
        default=None,
        help="trust these CA certificates (PEM): for a tenure:// URL (implies TLS, as "
        "?ca=) or an https:// one",
    )(function)


def scheme_of(url: str, command: str) -> str:
    """``url``'s scheme, one of :data:`NATIVE_SCHEMES` or :data:`HTTP_SCHEMES`; else a
    usage error naming both forms."""
    try:
        parts = urlsplit(url)
    except ValueError as error:
        raise click.BadParameter(
            f"malformed URL {redact(repr(url))}: {error}", param_hint="--url"
        ) from None
    scheme = parts.scheme.lower()
    if scheme in NATIVE_SCHEMES + HTTP_SCHEMES and parts.netloc:
        return scheme
    raise click.BadParameter(
        f"{command} asks a tenure server: its tenure://HOST:PORT (as every command), or its "
        f"HTTP endpoint, http(s)://HOST:HTTP_PORT; got {redact(repr(url))}",
        param_hint="--url",
    )


def http_context(ca: Path | None) -> ssl.SSLContext | None:
    """The TLS context of an ``https://`` request: trusting ``ca`` if given."""
    return ssl.create_default_context(cafile=str(ca)) if ca is not None else None


def _options(url: str, ca: Path | None) -> dict[str, object]:
    """The ``tenure://`` options of a call: the token as every command takes it, ``ca``."""
    token = auth_token(url)
    return {
        "client_name": CLIENT_NAME,
        **({} if token is None else {"token": token}),
        **({} if ca is None else {"ca": str(ca)}),
    }


def native_backup(url: str, ca: Path | None, write: Callable[[bytes], object]) -> str:
    """Read a backup of ``url``'s service over the native protocol into ``write``; the
    server that took it. An older server's refusal says what to do instead."""

    async def main() -> str:
        from tenure.backends.remote import read_backup  # (see the module docstring)

        where, _ = await read_backup(url, _options(url, ca), write)
        return where

    try:
        return run(main())
    except UnsupportedError as error:
        raise CommandFailedError(_older(str(error), "backup"), Status.FAILED) from None


def native_reload(url: str, ca: Path | None) -> list[DoorReload]:
    """Have each door of ``url`` reload its files over the native protocol; each's answer."""

    async def main() -> list[DoorReload]:
        from tenure.backends.remote import reload_servers  # (see the module docstring)

        return await reload_servers(url, _options(url, ca))

    return run(main())


def _older(said: str, command: str) -> str:
    """What an older server's UnsupportedError means for ``command``: the HTTP endpoint."""
    return (
        f"{said}; or ask its HTTP endpoint, which every version has: "
        f"tenure {command} --url http://HOST:HTTP_PORT"
    )


def older_server(error: BaseException, command: str) -> str | None:
    """The words for ``error`` if it is an older server's (no ReadBackup, ReloadFiles)."""
    if isinstance(error, UnsupportedError) and "protocol version" in str(error):
        return _older(str(error), command)
    return None
