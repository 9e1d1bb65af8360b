"""The servers' auth token of a command: where it comes from, where it never goes.

A ``tenure://`` server with an auth file wants a token's secret. On the command
line it would be visible to every user of the machine (``ps``, ``/proc``), so the
commands also take it from

* ``--token-file FILE``: the file's text, its surrounding whitespace left out
  (the first choice: a file readable by its owner only);
* ``TENURE_AUTH_TOKEN``: the environment (``TENURE_TOKEN`` is taken: it is the
  fencing token a held command is given, see docs/operations.md);
* the URL's ``?token=`` (as before; ``--url`` and ``TENURE_URL``).

``--token-file`` wins over the URL's ``?token=``, which wins over
``TENURE_AUTH_TOKEN``. A command that runs another (``lock``, ``elect``, ``claim``
...) does not hand the secret down: its child gets no ``TENURE_AUTH_TOKEN`` and a
``TENURE_URL`` without ``?token=``, unless ``--pass-token`` (then it gets
``TENURE_AUTH_TOKEN`` set to the token the command used, and ``TENURE_URL`` as is).

A secret read here is never printed: :func:`redact` replaces it, and every URL's
secrets, by ``***`` in each error line.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final, TypeVar
from urllib.parse import parse_qsl, urlsplit

import click

__all__ = [
    "AUTH_TOKEN_ENV",
    "auth_token",
    "child_environ",
    "connect_token",
    "pass_token_option",
    "redact",
    "token_file_option",
]

#: The environment variable the auth token may come from.
AUTH_TOKEN_ENV: Final = "TENURE_AUTH_TOKEN"
#: The environment variable of the backend URL (``--url``'s default).
URL_ENV: Final = "TENURE_URL"
#: The largest token file read (a token is short; a wrong path to a big file is a mistake).
MAX_TOKEN_FILE_BYTES: Final = 4096
#: The schemes whose URLs take a token.
TOKEN_SCHEMES: Final = ("tenure", "tenures")

_TOKEN_META: Final = "tenure.auth_token"
_PASS_META: Final = "tenure.pass_token"
_USED_META: Final = "tenure.used_token"
#: A URL's secrets, whatever the URL (the query's token/password/secret, a user's password).
_URL_SECRETS: Final = (
    (re.compile(r"([?&](?:token|password|secret)=)[^&#\s'\"]*", re.IGNORECASE), r"\1***"),
    (re.compile(r"(://[^/?#@\s'\"]*?:)[^/?#@\s'\"]*@"), r"\1***@"),
)
#: Secrets read by this process (from a file or the environment): redacted verbatim.
_known: set[str] = set()

F = TypeVar("F", bound=Callable[..., Any])


def _remember(secret: str) -> str:
    _known.add(secret)
    return secret


def _read_token_file(ctx: click.Context, param: click.Parameter, value: Path | None) -> None:
    if value is None:
        return
    try:
        with value.open("rb") as file:
            raw = file.read(MAX_TOKEN_FILE_BYTES + 1)
    except OSError as error:
        raise click.BadParameter(f"cannot read {str(value)!r}: {error.strerror}") from None
    if len(raw) > MAX_TOKEN_FILE_BYTES:
        raise click.BadParameter(
            f"{str(value)!r} is larger than a token ({MAX_TOKEN_FILE_BYTES} bytes at most)"
        )
    try:
        token = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise click.BadParameter(f"{str(value)!r} is not UTF-8 text") from None
    if not token:
        raise click.BadParameter(f"{str(value)!r} is empty")
    ctx.meta[_TOKEN_META] = _remember(token)


def token_file_option(function: F) -> F:
    """``--token-file FILE``: the servers' auth token, read from FILE (module docstring)."""
    return click.option(
        "--token-file",
        type=click.Path(dir_okay=False, path_type=Path),
        expose_value=False,
        is_eager=True,  # (read before --url's check, so a bad URL's error is redacted)
        callback=_read_token_file,
        metavar="FILE",
        help=f"read the tenure:// servers' auth token from FILE (or env {AUTH_TOKEN_ENV}); "
        "never put it in argv",
    )(function)


def _store_pass(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    ctx.meta[_PASS_META] = value


def pass_token_option(function: F) -> F:
    """``--pass-token``: the child command gets the auth token too (module docstring)."""
    return click.option(
        "--pass-token",
        is_flag=True,
        expose_value=False,
        callback=_store_pass,
        help=f"give the command the auth token ({AUTH_TOKEN_ENV}, and TENURE_URL's ?token=); "
        "by default it gets neither",
    )(function)


def _meta() -> dict[str, Any]:
    ctx = click.get_current_context(silent=True)
    return {} if ctx is None else ctx.meta


def _url_token(url: str) -> str | None:
    try:
        query = urlsplit(url).query
    except ValueError:
        return None
    found = [value for key, value in parse_qsl(query, keep_blank_values=True) if key == "token"]
    return _remember(found[-1]) if found and found[-1] else None


def auth_token(url: str) -> str | None:
    """The auth token a command of ``url`` uses (module docstring), or None."""
    from_file = _meta().get(_TOKEN_META)
    if isinstance(from_file, str):
        return from_file
    in_url = _url_token(url)
    if in_url is not None:
        return in_url
    from_env = os.environ.get(AUTH_TOKEN_ENV, "").strip()
    return _remember(from_env) if from_env else None


def connect_token(url: str) -> str | None:
    """The ``token=`` a command passes to :func:`tenure.connect` for ``url`` (None: none).

    Raises:
        click.BadParameter: ``--token-file`` given for a URL that takes no token.
    """
    try:
        scheme = urlsplit(url).scheme.lower()
    except ValueError:
        return None  # (tenure.connect refuses the URL, redacted)
    if scheme not in TOKEN_SCHEMES:
        if _TOKEN_META in _meta():
            raise click.BadParameter(
                f"only tenure:// URLs take a token, not {scheme}://", param_hint="--token-file"
            )
        return None  # (TENURE_AUTH_TOKEN is left for the tenure:// commands)
    token = auth_token(url)
    if token is not None:
        _meta()[_USED_META] = token  # (what --pass-token hands down)
    return token


def _without_token(url: str) -> str:
    base, mark, query = url.partition("?")
    if not mark:
        return url
    kept = [part for part in query.split("&") if part.split("=", 1)[0] != "token"]
    return f"{base}?{'&'.join(kept)}" if kept else base


def child_environ(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` as a child command gets it: without the auth token unless
    ``--pass-token`` (then with the token this command used in ``TENURE_AUTH_TOKEN``)."""
    child = dict(environ)
    url = child.get(URL_ENV)
    meta = _meta()
    if meta.get(_PASS_META):
        token = meta.get(_USED_META)
        if isinstance(token, str):
            child[AUTH_TOKEN_ENV] = token
        return child
    child.pop(AUTH_TOKEN_ENV, None)
    if url is not None:
        child[URL_ENV] = _without_token(url)
    return child


def redact(text: str) -> str:
    """``text`` with every secret this process read, and every URL's secrets, as ``***``."""
    for secret in sorted(_known, key=len, reverse=True):
        text = text.replace(secret, "***")
    for pattern, replacement in _URL_SECRETS:
        text = pattern.sub(replacement, text)
    return text
