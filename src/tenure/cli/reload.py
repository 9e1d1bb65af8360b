"""``tenure reload``: a running server reads its TLS files and its auth file again.

It asks the server's HTTP endpoint (``tenure serve --http-port``): ``POST
/admin/reload`` with an admin token (a read-write token of the auth file for every
node) as ``Authorization: Bearer``. Not a native request: a reload is the server's
act on itself, not the engine's (no protocol version needed for it, and every
member of a cluster answers for itself, its own files); the HTTP port already
checks bearer secrets, throttled. The token comes from ``--token-file`` or
``TENURE_AUTH_TOKEN``, never argv. SIGHUP does the same without a token.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit, urlunsplit

import click

from tenure.cli._auth_token import auth_token, redact, token_file_option
from tenure.cli._common import CommandFailedError, json_option, print_json
from tenure.cli._status import Status

#: How long the server may take to answer, in seconds (it loads a few small files).
TIMEOUT: Final = 30.0
#: The largest answer read (a list of token names).
MAX_ANSWER: Final = 1 << 20


@click.command()
@token_file_option
@json_option
@click.option(
    "--url",
    required=True,
    envvar="TENURE_HTTP_URL",
    metavar="URL",
    help="the server's HTTP endpoint, http(s)://HOST:HTTP_PORT (env TENURE_HTTP_URL)",
)
@click.option(
    "--ca",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="trust these CA certificates (PEM) for an https:// URL",
)
def reload(url: str, ca: Path | None, as_json: bool) -> int:
    """Make the server at --url read its TLS files and auth file again.

    Tokens added, removed, rotated and changed, quotas changed: connections of a
    removed or rotated token are closed (their sessions keep their recovery
    window), the others stay. A file that does not load changes nothing: the
    server says why, and this command exits 3. Needs an admin token (read-write,
    every node) in --token-file or TENURE_AUTH_TOKEN.
    """
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        raise click.BadParameter(
            f"reload asks the server's HTTP endpoint (http://HOST:HTTP_PORT), got "
            f"{redact(repr(url))}",
            param_hint="--url",
        )
    token = auth_token(url)
    if token is None:
        raise click.UsageError(
            "reload needs an admin token: --token-file FILE or TENURE_AUTH_TOKEN"
        )
    target = urlunsplit((parts.scheme, parts.netloc, "/admin/reload", "", ""))
    request = urllib.request.Request(
        target, data=b"", method="POST", headers={"Authorization": f"Bearer {token}"}
    )
    context = ssl.create_default_context(cafile=str(ca)) if ca is not None else None
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT, context=context) as response:
            answer = json.loads(response.read(MAX_ANSWER))
    except urllib.error.HTTPError as error:
        raise CommandFailedError(f"{target}: {error.code}: {_why(error)}", Status.FAILED) from None
    except (urllib.error.URLError, OSError, ValueError) as error:
        raise CommandFailedError(f"{target}: {error}", Status.FAILED) from None
    done = answer.get("reloaded", {}) if isinstance(answer, dict) else {}
    if as_json:
        print_json(done)
    else:
        for key, value in done.items():
            shown = ", ".join(value) if isinstance(value, list) else str(value)
            click.echo(f"{key}: {shown or '-'}")
    return Status.OK


def _why(error: urllib.error.HTTPError) -> str:
    """The server's ``error`` of a refusal, or its reason phrase."""
    try:
        body = json.loads(error.read(MAX_ANSWER))
    except (OSError, ValueError):
        return str(error.reason)
    why = body.get("error") if isinstance(body, dict) else None
    return str(why) if why else str(error.reason)
