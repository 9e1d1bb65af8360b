"""``tenure reload``: running servers read their TLS files and auth file again.

``--url`` is the URL every command takes (``tenure://``, ``TENURE_URL``): each door it
lists is asked on a connection of its own (ReloadFiles, protocol version 8), so
``tenure reload --url tenure://t1:6388,t2:6388,t3:6388`` reloads every member of a
cluster (each answers for its own files), standbys included. Or, as before, the
server's HTTP endpoint (``http(s)://HOST:HTTP_PORT``, ``TENURE_HTTP_URL``): ``POST
/admin/reload`` (:mod:`tenure.cli._server_calls`). Either way an admin token (a
read-write token of the auth file for every node), from ``--token-file`` or
``TENURE_AUTH_TOKEN``, never argv; a server without an auth file reloads for a
client on its own host (over ``tenure://``), or on SIGHUP.

Layer (CONTRIBUTING.md): this module may also import tenure.backends.remote (lazily).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit, urlunsplit

import click

from tenure.cli._auth_token import auth_token, token_file_option
from tenure.cli._common import (
    DEFAULT_URL,
    URL_ENV,
    CommandFailedError,
    json_option,
    permission_words,
    print_json,
)
from tenure.cli._server_calls import (
    HTTP_SCHEMES,
    ca_option,
    http_context,
    native_reload,
    older_server,
    scheme_of,
)
from tenure.cli._status import Status

if TYPE_CHECKING:
    from tenure.backends.remote import DoorReload, FilesReloaded

#: How long the server may take to answer, in seconds (it loads a few small files).
TIMEOUT: Final = 30.0
#: The largest answer read (a list of token names).
MAX_ANSWER: Final = 1 << 20
#: The variable an HTTP endpoint's URL was given in before ``--url`` took
#: ``tenure://``: still read first, so a setting made for ``tenure reload`` holds.
HTTP_URL_ENV: Final = "TENURE_HTTP_URL"


@click.command()
@token_file_option
@json_option
@click.option(
    "--url",
    envvar=[HTTP_URL_ENV, URL_ENV],
    default=DEFAULT_URL,
    show_default=True,
    metavar="URL",
    help=f"the servers' tenure://HOST:PORT[,HOST:PORT...] (each door is reloaded), or an "
    f"HTTP endpoint, http(s)://HOST:HTTP_PORT; env {HTTP_URL_ENV}, else {URL_ENV}",
)
@ca_option
def reload(url: str, ca: Path | None, as_json: bool) -> int:
    """Make the servers at --url read their TLS files and auth file again.

    Tokens added, removed, rotated and changed, quotas changed: connections of a
    removed or rotated token are closed (their sessions keep their recovery
    window), the others stay. A file that does not load changes nothing: the
    server says why, and this command exits 3. Each door of a tenure:// URL is
    reloaded (every member of a cluster reads its own files). Needs an admin token
    (read-write, every node) in --token-file or TENURE_AUTH_TOKEN; a server without
    an auth file reloads for a client on its own host.
    """
    if scheme_of(url, "reload") in HTTP_SCHEMES:
        return _over_http(url, ca, as_json)
    doors = native_reload(url, ca)
    if as_json:
        print_json({"doors": [_door_json(door) for door in doors]})
    for door in doors:
        if as_json:
            continue
        if door.reloaded is not None:
            heading = f"{door.door}: reloaded" if len(doors) > 1 else None
            _print(_fields(door.reloaded), heading)
        else:
            click.echo(f"{door.door}: not reloaded: {_why(door)}")
    failed = [door for door in doors if door.reloaded is None]
    if failed:
        said = "; ".join(f"{door.door}: {_why(door)}" for door in failed)
        raise CommandFailedError(
            f"{len(failed)} of {len(doors)} servers did not reload: {said}", Status.FAILED
        )
    return Status.OK


def _fields(done: FilesReloaded) -> dict[str, object]:
    """What a reload changed, as the HTTP endpoint's answer says it."""
    return {
        "tls": done.tls,
        "tokens_added": list(done.tokens_added),
        "tokens_removed": list(done.tokens_removed),
        "tokens_rotated": list(done.tokens_rotated),
        "tokens_changed": list(done.tokens_changed),
        "connections_closed": done.connections_closed,
        "others": list(done.others),
    }


def _why(door: DoorReload) -> str:
    """Why ``door`` did not reload, in one line."""
    error = door.error
    if error is None:
        return "no answer"
    said = older_server(error, "reload") or permission_words(str(error))
    return f"{type(error).__name__}: {' '.join(said.split())}"


def _door_json(door: DoorReload) -> dict[str, object]:
    """One door's answer as JSON."""
    return {
        "door": door.door,
        "reloaded": None if door.reloaded is None else _fields(door.reloaded),
        "error": None if door.reloaded is not None else _why(door),
    }


def _print(done: dict[str, object], heading: str | None) -> None:
    """What changed, a line each (under ``heading``, indented, if given)."""
    if heading is not None:
        click.echo(heading)
    indent = "  " if heading is not None else ""
    for key, value in done.items():
        shown = ", ".join(map(str, value)) if isinstance(value, list) else str(value)
        click.echo(f"{indent}{key}: {shown or '-'}")


def _over_http(url: str, ca: Path | None, as_json: bool) -> int:
    """``POST /admin/reload`` to the HTTP endpoint ``url`` (the admin token as Bearer)."""
    token = auth_token(url)
    if token is None:
        raise click.UsageError(
            "reload needs an admin token: --token-file FILE or TENURE_AUTH_TOKEN"
        )
    parts = urlsplit(url)
    target = urlunsplit((parts.scheme, parts.netloc, "/admin/reload", "", ""))
    request = urllib.request.Request(
        target, data=b"", method="POST", headers={"Authorization": f"Bearer {token}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT, context=http_context(ca)) as answer:
            body = json.loads(answer.read(MAX_ANSWER))
    except urllib.error.HTTPError as error:
        raise CommandFailedError(
            f"{target}: {error.code}: {_refusal(error)}", Status.FAILED
        ) from None
    except (urllib.error.URLError, OSError, ValueError) as error:
        raise CommandFailedError(f"{target}: {error}", Status.FAILED) from None
    done = body.get("reloaded", {}) if isinstance(body, dict) else {}
    if as_json:
        print_json(done)
    else:
        _print(done, None)
    return Status.OK


def _refusal(error: urllib.error.HTTPError) -> str:
    """The server's ``error`` of a refusal, or its reason phrase."""
    try:
        body = json.loads(error.read(MAX_ANSWER))
    except (OSError, ValueError):
        return str(error.reason)
    why = body.get("error") if isinstance(body, dict) else None
    return str(why) if why else str(error.reason)
