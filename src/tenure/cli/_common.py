"""What every ``tenure`` command shares: exit statuses, options, errors, output.

Errors never print a traceback: :func:`error_line` makes the one line a failing
command writes on stderr, and :func:`status_of` the exit status it ends with
(the table is :class:`Status`, documented in docs/operations.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shlex
import sys
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, Final, Protocol, TypeVar
from urllib.parse import urlsplit

import click

import tenure
from tenure._core.values import MAX_DESCRIPTION_BYTES
from tenure.cli._auth_token import child_environ, connect_token, redact, token_file_option
from tenure.cli._node_hint import missing_node
from tenure.cli._render import safe
from tenure.cli._status import Status
from tenure.client import Client
from tenure.errors import InvalidArgumentError, NotFoundError, PermissionDeniedError, TenureError

#: Where the commands connect when neither ``--url`` nor ``TENURE_URL`` says.
DEFAULT_URL: Final = "tenure://127.0.0.1:6388"
#: The environment variable ``--url`` defaults to.
URL_ENV: Final = "TENURE_URL"
#: The node ``lock``, ``elect``, ``leader`` and ``observe`` use without ``--node``.
DEFAULT_NODE: Final = "default"
#: Set to 1 to have an unexpected error (a bug) print its traceback too.
TRACEBACK_ENV: Final = "TENURE_TRACEBACK"
#: The client name every command's sessions carry (operators see it in listings).
CLIENT_NAME: Final = "tenure-cli"

#: What each command of the wire protocol lets a token do, in the words of a person
#: at the CLI: a ``tenure://`` server's refusal names the command (``it may not send
#: Acquire``), which the CLI never shows (:func:`permission_words`).
PERMISSION_WORDS: Final = {
    "CreateSession": "open sessions",
    "AttachSession": "attach sessions",
    "ResumeSession": "resume sessions",
    "DetachSession": "detach sessions",
    "CloseSession": "close sessions",
    "DescribeNode": "read nodes",
    "GetNodeAnnex": "read nodes",
    "DescribeSemaphore": "read semaphores",
    "DescribeSession": "read sessions",
    "CancelWatch": "stop watches",
    "WatchPrefix": "watch semaphores",
    "ListNodes": "list nodes",
    "ListSemaphores": "list semaphores",
    "ListSessions": "list sessions",
    "WhyName": "ask who blocks a name",
    "TopNames": "see the most contended names",
    "Acquire": "take locks, semaphore tokens or leadership",
    "Release": "release locks",
    "CancelAcquire": "stop waiting",
    "Renew": "renew leases",
    "CreateSemaphore": "create semaphores",
    "UpdateSemaphore": "change semaphores",
    "SwapSemaphoreData": "change semaphores",
    "ReserveUnits": "change semaphores",
    "AcquireAll": "take locks, semaphore tokens or leadership",
    "ClaimName": "claim names",
    "ReleaseClaim": "release claims",
    "OfferHold": "hand off leases",
    "AdoptHold": "adopt handed-off leases",
    "DeleteSemaphore": "delete semaphores",
    "CreateNode": "create nodes",
    "AlterNode": "change nodes",
    "SetNodeAnnex": "change nodes",
    "DropNode": "drop nodes",
    "KillSession": "end sessions",
    "ClusterStatus": "ask about the cluster",
    "ReadBackup": "take backups",
    "ReloadFiles": "reload the servers' files",
}
_SEND: Final = re.compile(r"\bsend (" + "|".join(PERMISSION_WORDS) + r")\b")

T = TypeVar("T")
S = TypeVar("S")
S_co = TypeVar("S_co", covariant=True)
F = TypeVar("F", bound=Callable[..., Any])


class CommandFailedError(Exception):
    """A command ends with ``status`` after writing ``message`` as its one error line."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def status_of(error: BaseException) -> int:
    """The exit status a command that raised ``error`` ends with."""
    if isinstance(error, CommandFailedError):
        return error.status
    if isinstance(error, click.ClickException | InvalidArgumentError):
        return Status.USAGE
    return Status.FAILED


def expected(error: BaseException) -> bool:
    """Whether ``error`` is one a command may end with (else it is a bug of tenure's)."""
    return isinstance(
        error, CommandFailedError | click.ClickException | TenureError | TimeoutError | OSError
    )


def error_line(error: BaseException) -> str:
    """The one line (no newline inside) that says why a command failed.

    ``tenure lock: No such option '--bogus' (see 'tenure lock --help')`` for bad
    usage, ``tenure: NotFoundError: node 'x' does not exist`` for a refusal. An
    unexpected error (a bug) says so, and how to see its traceback.
    """
    if isinstance(error, click.UsageError) and error.ctx is not None:
        path = error.ctx.command_path
        text = f"{path}: {error.format_message()} (see '{path} --help')"
    elif isinstance(error, click.ClickException):
        text = f"tenure: {error.format_message()}"
    elif isinstance(error, CommandFailedError):
        text = f"tenure: {error}"
    elif isinstance(error, PermissionDeniedError):
        text = f"tenure: {type(error).__name__}: {permission_words(str(error))}"
    elif expected(error):
        text = f"tenure: {type(error).__name__}: {error}"
    else:
        text = (
            f"tenure: internal error: {type(error).__name__}: {error} "
            f"(set {TRACEBACK_ENV}=1 for the traceback, and please report it)"
        )
    # Server and backend messages quote names and descriptions any client chose:
    # their control characters are shown escaped, never sent to the terminal. And
    # no secret is ever shown (a URL's ?token=, a token read from a file).
    return safe(redact(" ".join(text.split())))


def permission_words(message: str) -> str:
    """A refusal's ``message`` with the wire commands it names said as what they do.

    ``token 'viewer' is read-only: it may not send Acquire on node 'jobs'`` becomes
    ``... it may not take locks, semaphore tokens or leadership on node 'jobs'``.
    """
    return _SEND.sub(lambda found: PERMISSION_WORDS[found.group(1)], message)


def _checked_url(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """``--url`` as given, or a usage error if it cannot even be split (``tenure://[bad``)."""
    try:
        urlsplit(value)
    except ValueError as error:
        raise click.BadParameter(f"malformed URL {redact(repr(value))}: {error}") from None
    return value


def url_option(function: F) -> F:
    """``--url``: the backend, from ``TENURE_URL`` by default, else the local server;
    and ``--token-file``, the ``tenure://`` servers' auth token (``cli._auth_token``)."""
    return token_file_option(
        click.option(
            "--url",
            envvar=URL_ENV,
            default=DEFAULT_URL,
            show_default=True,
            metavar="URL",
            callback=_checked_url,
            help="backend URL (tenure://, memory://, etcd://, redis://, postgres://); "
            f"env {URL_ENV}",
        )(function)
    )


#: The options of ``tenure://`` URLs that :func:`tenure_options` also takes as flags.
TENURE_FLAGS: Final = ("token", "ca", "cert", "key", "server_hostname")


def tenure_options(function: F) -> F:
    """``--token``, ``--ca``, ``--cert``, ``--key``, ``--server-hostname``: the
    ``tenure://`` URL options of the same names (a flag wins over the URL's query)."""
    flags = [
        ("--token", "TOKEN", "the servers' auth token (?token=)"),
        ("--ca", "FILE", "CA certificate file to trust; implies TLS (?ca=)"),
        ("--cert", "FILE", "client certificate file, for mTLS (?cert=)"),
        ("--key", "FILE", "the client certificate's key file (?key=)"),
        ("--server-hostname", "NAME", "the name the servers' certificates carry"),
    ]
    for flag, metavar, words in reversed(flags):
        function = click.option(flag, metavar=metavar, default=None, help=words)(function)
    return function


def tenure_flags(given: dict[str, object]) -> dict[str, object]:
    """The options :func:`tenure_options` were given (only those set), by option name."""
    return {name: given[name] for name in TENURE_FLAGS if given.get(name) is not None}


def count_option(function: F) -> F:
    """``--count N``: a streaming command (observe, watch) stops after N states."""
    return click.option(
        "--count",
        "limit",
        type=click.IntRange(1),
        metavar="N",
        help="stop after N states (default: until ^C)",
    )(function)


def json_option(function: F) -> F:
    """``--json``: print one JSON document (one per line for streams) instead of a table."""
    return click.option(
        "--json", "as_json", is_flag=True, help="print JSON (for scripts) instead of a table"
    )(function)


def node_option(function: F) -> F:
    """``--node`` and ``--create-node``: the node a lock, election or claim is taken in.

    Without ``--node`` it is ``default``, made if missing (no name was typed, so none
    was mistyped). A node named with ``--node`` must exist, unless ``--create-node``
    (issue 57: ``--node bilign`` made the mistyped node and ran the command, excluded
    from nothing); a missing one is said with the names it may have meant.
    """
    function = click.option(
        "--create-node",
        is_flag=True,
        help="make --node NODE (with default settings) if it is missing",
    )(function)
    return click.option(
        "--node",
        default=None,
        metavar="NODE",
        help=f"the node it lives in (default: {DEFAULT_NODE!r}, made if missing); a node "
        "named here must exist, unless --create-node",
    )(function)


def chosen_node(node: str | None, create_node: bool) -> tuple[str, bool]:
    """The node ``--node`` and ``--create-node`` name, and whether to make it if missing
    (:func:`node_option`)."""
    if node is None:
        return DEFAULT_NODE, True
    return node, create_node


def existing_node_option(function: F) -> F:
    """``--node`` of the commands that only read: the node must exist."""
    return click.option(
        "--node",
        default=DEFAULT_NODE,
        show_default=True,
        metavar="NODE",
        help="the node it lives in (exit 3 if it does not exist)",
    )(function)


def seconds_option(flag: str, *, default: float, help: str) -> Callable[[F], F]:
    """An option of a number of seconds, 0 or more (its default shown)."""
    return click.option(
        flag,
        type=click.FloatRange(0),
        default=default,
        show_default=True,
        metavar="SECONDS",
        help=help,
    )


def exit_status_option(flag: str, *, default: Status, help: str) -> Callable[[F], F]:
    """An option of the exit status a command ends with in some case (0 to 255)."""
    return click.option(
        flag,
        type=click.IntRange(0, 255),
        default=default.value,
        show_default=True,
        metavar="N",
        help=help,
    )


@contextlib.asynccontextmanager
async def connect(
    url: str, *, node: str | None = None, creatable: bool = False
) -> AsyncIterator[Client]:
    """A client of ``url`` whose sessions name this command as their client, with the
    auth token of ``--token-file`` or ``TENURE_AUTH_TOKEN`` (``cli._auth_token``).

    ``node``: the node the command names. A NotFoundError that leaves the block while
    that node does not exist is said as its absence, with the names it may have been
    meant as (:func:`tenure.cli._node_hint.missing_node`; ``creatable``: and that
    ``--create-node`` makes it), whichever call found it missing, on every backend.
    """
    token = connect_token(url)
    opening = (
        tenure.connect(url, client_name=CLIENT_NAME)
        if token is None
        else tenure.connect(url, client_name=CLIENT_NAME, token=token)
    )
    async with opening as client:
        try:
            yield client
        except NotFoundError:
            if node is None:
                raise
            words = await missing_node(client, node, creatable)
            if words is None:  # the node exists: something in it was missing
                raise
            raise NotFoundError(words) from None


def run(main: Coroutine[Any, Any, T]) -> T:
    """Run a command's coroutine on a fresh event loop (the default asyncio loop)."""
    return asyncio.run(main)


async def ensure_node(client: Client, node: str, create: bool = True) -> None:
    """Make ``node`` with default settings if it is missing and ``create``; else
    NotFoundError if it is missing (said with the names meant by :func:`connect`).

    An existing node is only read, so that a token that may not create nodes (a
    read-only one, or one limited to some nodes) is not refused for creating one.
    """
    try:
        await client.describe_node(node)
    except NotFoundError:
        if not create:
            raise
        await client.create_node(node, exist_ok=True)


def print_json(document: object) -> None:
    """Write one JSON document on one line of stdout, flushed (streams are read live)."""
    sys.stdout.write(json.dumps(document, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def session_description(words: list[str]) -> str:
    """A session description naming this command (shell-quoted), cut to the description limit."""
    text = shlex.join(["tenure", *words])
    encoded = text.encode("utf-8", "replace")
    if len(encoded) <= MAX_DESCRIPTION_BYTES:
        return encoded.decode("utf-8")
    return encoded[: MAX_DESCRIPTION_BYTES - 3].decode("utf-8", "ignore") + "..."


def environ_with(extra: dict[str, str]) -> dict[str, str]:
    """This process's environment plus ``extra`` (what a supervised command gets),
    without the auth token unless ``--pass-token`` (:func:`child_environ`)."""
    return {**child_environ(os.environ), **extra}


class States(Protocol[S_co]):
    """A stream of states that can be closed (an election's observe, a watch)."""

    def __aiter__(self) -> AsyncIterator[S_co]:
        """Iterate over the states."""
        ...

    async def aclose(self) -> None:
        """Stop the stream."""
        ...


async def print_states(
    states: States[S],
    limit: int | None,
    as_json: bool,
    to_json: Callable[[S], object],
    to_line: Callable[[S], str],
) -> int:
    """Print each state of a stream (``observe``, ``watch``): a line, or a JSON document
    per line; stop after ``limit`` states (None: until the stream or ^C ends it)."""
    seen = 0
    async for state in states:
        if as_json:
            print_json(to_json(state))
        else:
            click.echo(to_line(state))
        seen += 1
        if limit is not None and seen >= limit:
            await states.aclose()
            break
    return Status.OK


def run_until_interrupted(main: Coroutine[Any, Any, int]) -> int:
    """:func:`run` for a command that runs until ^C, which ends it with status 0."""
    try:
        return run(main)
    except KeyboardInterrupt:
        return Status.OK
