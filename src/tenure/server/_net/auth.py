"""Authentication (tokens in Hello) and authorization (which token may do what, where).

The auth file (``--auth-file``, TOML) lists the tokens the server accepts::

    [[token]]
    name = "deployer"              # shown in logs and error messages; the secret never is
    secret = "s3cr3t..."           # or: secret_sha256 = "<hex digest of the secret>"
    access = "read-write"          # or "read-only"
    nodes = ["jobs", "config-*"]   # optional (omitted: every node); fnmatch patterns
    [token.quota]                  # optional, every key too (omitted: the server's default)
    sessions = 1000                # sessions, watches, waiters, semaphores, nodes,
    data_bytes = 67108864          # data_bytes, recovery_window, requests_per_second

Only SHA-256 digests of the secrets are kept in memory; a Hello's token is hashed
and looked up by its digest (:meth:`Tokens.authenticate`).

A token's quotas (:func:`Tokens.quotas`) are its own ``[token.quota]`` values over
the server-wide defaults (``--quota-*``); a read-only token's defaults are at most
:data:`~tenure.server._config.quota_settings.READ_ONLY_QUOTA`'s. What each counts is
in :mod:`tenure._core.quotas`.

Authorization is pure policy (no sockets, no engine): :func:`denial` says why a
token may not send a command about a node, or None if it may. Read-only tokens may
open, attach, detach, describe and close sessions, describe nodes (and read their
annex) and semaphores (with watches), ask who blocks a name, and cancel watches;
read-write tokens may also
acquire, release, renew, and create, change and delete semaphores and nodes (setting
a node's annex is changing the node, as AlterNode). The node a command touches is
:func:`command_node`: named by node commands and CreateSession, the session's own
node for every session command.

Taking a session back (AttachSession, ResumeSession) with its key is acting as the
session, so it also needs every right the session's use needs
(:func:`take_back_denial`): a read-only token may not take back a session that holds
or waits, nor one a read-write token owns. A key is a secret, not a right: one read
in a backup, or anywhere, does not let a reader close a writer's session and so
release its locks.
"""

from __future__ import annotations

import enum
import fnmatch
import hashlib
import hmac
import re
import tomllib
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol

from tenure._core import (
    Acquire,
    AcquireAll,
    AdoptHold,
    AlterNode,
    AttachSession,
    CancelAcquire,
    CancelWatch,
    ClaimName,
    CloseSession,
    Command,
    CreateNode,
    CreateSemaphore,
    CreateSession,
    DeleteSemaphore,
    DescribeNode,
    DescribeSemaphore,
    DescribeSession,
    DetachSession,
    DropNode,
    GetNodeAnnex,
    KillSession,
    ListNodes,
    ListSemaphores,
    ListSessions,
    OfferHold,
    Release,
    ReleaseClaim,
    Renew,
    ReserveUnits,
    ResumeSession,
    SetNodeAnnex,
    SwapSemaphoreData,
    TopNames,
    UpdateSemaphore,
    WatchPrefix,
    WhyName,
)
from tenure._core.quotas import NO_QUOTA, Quota, Usage
from tenure._core.session import digest_key
from tenure._protocol.admin import ReadBackup, ReloadFiles
from tenure._protocol.cluster import ClusterStatus
from tenure.errors import InvalidArgumentError
from tenure.server._config.quota_settings import READ_ONLY_QUOTA
from tenure.server._config.settings import ConfigError
from tenure.server._net.throttle import Throttle


class Access(enum.Enum):
    """What a token may do (see the module docstring)."""

    READ_ONLY = "read-only"
    READ_WRITE = "read-write"


#: The commands a read-only token may send.
READ_ONLY_COMMANDS: Final[frozenset[type[Command[object]]]] = frozenset(
    {
        CreateSession,
        AttachSession,
        ResumeSession,
        DetachSession,
        CloseSession,
        DescribeNode,
        GetNodeAnnex,
        DescribeSemaphore,
        DescribeSession,
        CancelWatch,
        WatchPrefix,
        ListNodes,
        ListSemaphores,
        ListSessions,
        WhyName,
        TopNames,
        ClusterStatus,  # (the server's own: members' addresses and log positions)
    }
)
#: The commands a read-write token may send: every command.
READ_WRITE_COMMANDS: Final[frozenset[type[Command[object]]]] = READ_ONLY_COMMANDS | {
    Acquire,
    Release,
    CancelAcquire,
    Renew,
    CreateSemaphore,
    UpdateSemaphore,
    SwapSemaphoreData,
    ReserveUnits,
    AcquireAll,
    ClaimName,
    ReleaseClaim,
    OfferHold,
    AdoptHold,
    DeleteSemaphore,
    CreateNode,
    AlterNode,
    SetNodeAnnex,
    DropNode,
    KillSession,
    # (an operator's acts on the server itself: an admin's, every node, checked where
    # they are answered, tenure.server._server_acts)
    ReadBackup,
    ReloadFiles,
}
_ALLOWED: Final = {Access.READ_ONLY: READ_ONLY_COMMANDS, Access.READ_WRITE: READ_WRITE_COMMANDS}
_KEYS: Final = frozenset({"name", "secret", "secret_sha256", "access", "nodes", "quota"})
#: Where a pattern's literal text ends (fnmatch's wildcards: ``*``, ``?``, ``[...]``).
_WILDCARD: Final = re.compile(r"[*?\[]")


@dataclass(frozen=True, slots=True)
class Token:
    """One token of the auth file. ``nodes`` None: every node."""

    name: str
    digest: bytes = b""  # sha256 of the secret; the secret itself is not kept
    access: Access = Access.READ_WRITE
    nodes: tuple[str, ...] | None = None
    #: Its own ``[token.quota]`` table (the quotas it gives; none: every default).
    quota: Quota = NO_QUOTA

    def quotas(self, default: Quota) -> Quota:
        """Its quotas: its own, over ``default`` (the server's ``--quota-*``); for a
        read-only token, each default at most :data:`READ_ONLY_QUOTA`'s."""
        if self.access is Access.READ_ONLY:
            pairs = zip(default.values(), READ_ONLY_QUOTA.values(), strict=True)
            default = Quota.of([_least(server, small) for server, small in pairs])
        return self.quota.over(default)

    def may_touch(self, node: str) -> bool:
        """Whether ``node`` matches one of the token's node patterns."""
        return self.nodes is None or any(fnmatch.fnmatchcase(node, p) for p in self.nodes)

    @property
    def prefixes(self) -> tuple[str, ...]:
        """What every node name the token may touch starts with: each pattern's text
        before its first wildcard (``jobs-*``: ``jobs-``; ``jobs``: ``jobs``), so that
        a listing of its view reads those ranges of the sorted names only."""
        if self.nodes is None:
            return ("",)
        return tuple(_WILDCARD.split(pattern, maxsplit=1)[0] for pattern in self.nodes)


class SessionLike(Protocol):
    """What :func:`command_node` needs of a session: its node."""

    @property
    def node(self) -> str:
        """The node the session belongs to."""
        ...


class KeptSession(SessionLike, Protocol):
    """What :func:`take_back_denial` reads of a session, besides its node."""

    @property
    def session_id(self) -> int:
        """Its id."""
        ...

    @property
    def key_digest(self) -> bytes:
        """Its protection key's digest (:func:`~tenure._core.session.digest_key`)."""
        ...

    @property
    def held(self) -> AbstractSet[str]:
        """The names of the semaphores it holds."""
        ...

    @property
    def waits(self) -> AbstractSet[str]:
        """The names of the semaphores it waits for."""
        ...

    @property
    def usage(self) -> Usage | None:
        """Its owner's usage (``usage.owner``: the owner's token name; None: nobody's)."""
        ...


def command_node(command: Command[object], sessions: Mapping[int, SessionLike]) -> str | None:
    """The node ``command`` touches; None for a session the engine does not know."""
    if isinstance(
        command, CreateNode | DescribeNode | AlterNode | DropNode | SetNodeAnnex | GetNodeAnnex
    ):
        return command.name
    if isinstance(
        command,
        CreateSession | KillSession | ListSemaphores | ListSessions | ReleaseClaim | WhyName,
    ):
        return command.node
    if isinstance(command, TopNames):
        return command.node or None  # ("": every node; denial() asks for every node)
    session_id = getattr(command, "session_id", None)
    session = sessions.get(session_id) if isinstance(session_id, int) else None
    return session.node if session is not None else None


def denial(token: Token, command: Command[object], node: str | None) -> str | None:
    """Why ``token`` may not send ``command`` about ``node``, or None if it may.

    ``node`` None (a session that does not exist) is checked for access only; the
    engine then answers the command with NOT_FOUND or SESSION_EXPIRED.
    """
    name = type(command).__name__
    where = f" on node {node!r}" if node is not None else ""
    if type(command) not in _ALLOWED[token.access]:
        return f"token {token.name!r} is {token.access.value}: it may not send {name}{where}"
    if node is not None and not token.may_touch(node):
        patterns = ", ".join(token.nodes or ())
        return f"token {token.name!r} may not send {name}{where}: it is limited to {patterns}"
    if isinstance(command, TopNames) and not command.node and token.nodes is not None:
        # Every node's names would show the names of nodes it may not read.
        patterns = ", ".join(token.nodes)
        return (
            f"token {token.name!r} may not send {name} for every node: it is limited to "
            f"{patterns} (name one of its nodes)"
        )
    return None


def take_back_denial(
    token: Token,
    command: AttachSession | ResumeSession,
    session: KeptSession | None,
    tokens: Tokens | None,
) -> str | None:
    """Why ``token`` may not take ``session`` back with ``command`` (its right key
    given), or None if it may (module docstring). Checked after :func:`denial`.

    A read-write token may (:func:`denial` checked the session's node). A read-only one
    may not take back a session that holds or waits (its use is read-write), nor one
    whose owner is a read-write token of ``tokens`` (its owner may use it so at any
    moment). A command whose key (or, for ResumeSession, node) is not the session's,
    or of no session, is left to the engine, which refuses it as any wrong key: what a
    guesser is told says nothing of the session.
    """
    if token.access is Access.READ_WRITE or session is None:
        return None
    key = command.protection_key
    if not isinstance(key, bytes) or not hmac.compare_digest(session.key_digest, digest_key(key)):
        return None
    if isinstance(command, ResumeSession) and command.node != session.node:
        return None
    usage = session.usage
    owner = tokens.named(usage.owner) if tokens is not None and usage is not None else None
    if session.held or session.waits:
        why = "holds or waits for locks"
    elif owner is not None and owner.access is Access.READ_WRITE:
        why = f"is owned by read-write token {owner.name!r}"
    else:
        return None
    return (
        f"token {token.name!r} is read-only: it may not send {type(command).__name__} on "
        f"node {session.node!r}: session {session.session_id} {why}, and taking it back "
        "needs read-write access"
    )


class Tokens:
    """The tokens of an auth file: who a Hello's token is, if anybody."""

    def __init__(self, tokens: list[Token], path: Path | None = None) -> None:
        self.tokens = tuple(tokens)
        #: Each token by the digest of its secret (unique: :func:`load_tokens` checks).
        self._by_digest = {token.digest: token for token in self.tokens}
        #: Each token by its name (unique: :func:`load_tokens` checks).
        self._by_name = {token.name: token for token in self.tokens}
        self.path = path
        #: Failures per peer address, shared by every listener that checks these
        #: tokens (set by the server from its settings; by default it never blocks).
        self.throttle = Throttle(0, 0.0)
        #: The digests of the secrets a reload removed or rotated (none of today's):
        #: a client still using one is not guessing, and is not throttled for it.
        self.retired: frozenset[bytes] = frozenset()

    def quotas(self, default: Quota) -> dict[str, Quota]:
        """Every token's quotas by its name (:meth:`Token.quotas`), for the engine."""
        return {token.name: token.quotas(default) for token in self.tokens}

    @property
    def names(self) -> list[str]:
        """The token names, in file order (safe to log)."""
        return [token.name for token in self.tokens]

    def take(self, fresh: Tokens) -> None:
        """Hold ``fresh``'s tokens from now on, in place (a reload: every part that
        holds this object sees them)."""
        self.tokens, self._by_digest = fresh.tokens, fresh._by_digest
        self._by_name = fresh._by_name

    def named(self, name: str) -> Token | None:
        """The token called ``name`` ("" or a name no longer in the file: None)."""
        return self._by_name.get(name)

    def authenticate(self, secret: str | None) -> Token | None:
        """The token whose secret is ``secret``, or None (also for no secret at all).

        Found by the digest of ``secret`` in a dict, in constant time whatever the
        number of tokens: what a lookup's timing could tell is about a SHA-256 digest,
        which says nothing of the secret that would help guess it (comparing every
        token's digest in turn took 100,000 comparisons a login with 100,000 tokens).
        """
        if not secret:
            return None
        return self._by_digest.get(hashlib.sha256(secret.encode()).digest())

    def is_retired(self, secret: str | None) -> bool:
        """Whether ``secret`` is one a reload removed or rotated (:attr:`retired`)."""
        return bool(secret) and hashlib.sha256(str(secret).encode()).digest() in self.retired


def load_tokens(path: Path) -> Tokens:
    """Read an auth file (see the module docstring).

    Raises:
        ConfigError: the file cannot be read or parsed, or a token is malformed;
            the message names the file and the token, never a secret.
    """
    try:
        with path.open("rb") as file:
            data = tomllib.load(file)
    except OSError as error:
        raise ConfigError(f"auth file {path}: cannot read it: {error.strerror}") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"auth file {path}: not valid TOML: {error}") from None
    extra = sorted(set(data) - {"token"})
    if extra:
        raise ConfigError(f"auth file {path}: unknown key {extra[0]!r} (only [[token]] tables)")
    entries = data.get("token", [])
    if not isinstance(entries, list) or not entries:
        raise ConfigError(f"auth file {path}: no [[token]] tables (nobody could connect)")
    tokens: list[Token] = []
    names: set[str] = set()
    by_digest: dict[bytes, Token] = {}  # (checks linear in the tokens, not quadratic)
    for index, entry in enumerate(entries, 1):
        where = f"auth file {path}, token #{index}"
        if not isinstance(entry, dict):
            raise ConfigError(f"{where}: must be a [[token]] table")
        try:
            token = _token(entry)
        except ValueError as error:
            raise ConfigError(f"{where}: {error}") from None
        if token.name in names:
            raise ConfigError(f"{where}: the name {token.name!r} is used twice")
        other = by_digest.get(token.digest)
        if other is not None:
            raise ConfigError(f"{where}: {token.name!r} has the secret of {other.name!r}")
        names.add(token.name)
        by_digest[token.digest] = token
        tokens.append(token)
    return Tokens(tokens, path)


def _token(entry: Mapping[str, object]) -> Token:
    unknown = sorted(set(entry) - _KEYS)
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r}")
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError("needs a name (a non-empty string)")
    secret, hashed = entry.get("secret"), entry.get("secret_sha256")
    if (secret is None) == (hashed is None):
        raise ValueError(f"{name!r} needs exactly one of secret and secret_sha256")
    if secret is not None:
        if not isinstance(secret, str) or not secret:
            raise ValueError(f"{name!r}: secret must be a non-empty string")
        digest = hashlib.sha256(secret.encode()).digest()
    else:
        try:
            digest = bytes.fromhex(hashed) if isinstance(hashed, str) else b""
        except ValueError:
            digest = b""
        if len(digest) != hashlib.sha256().digest_size:
            raise ValueError(f"{name!r}: secret_sha256 must be 64 hex digits")
        if digest == hashlib.sha256().digest():
            raise ValueError(f"{name!r}: secret_sha256 is the digest of an empty secret")
    try:
        access = Access(entry.get("access"))
    except ValueError:
        raise ValueError(f"{name!r}: access must be 'read-only' or 'read-write'") from None
    nodes = entry.get("nodes")
    if nodes is not None and (
        not isinstance(nodes, list) or not nodes or not all(isinstance(p, str) and p for p in nodes)
    ):
        raise ValueError(
            f"{name!r}: nodes must be a non-empty array of node names or patterns "
            "(omit it for every node)"
        )
    quota = entry.get("quota", {})
    if not isinstance(quota, dict):
        raise ValueError(f"{name!r}: quota must be a table ([token.quota])")
    try:
        quotas = Quota.from_mapping(quota, f"{name!r}: [token.quota]")
    except InvalidArgumentError as error:
        raise ValueError(str(error)) from None
    return Token(name, digest, access, tuple(nodes) if nodes is not None else None, quotas)


def _least(server: float | None, small: float | None) -> float | None:
    """The smaller of two quotas (None: none)."""
    if server is None:
        return small
    return server if small is None else min(server, small)
