"""Reload: a running server reads its TLS files and its auth file again (SIGHUP, ``tenure reload``).

What is read again is what the settings name, at the paths they named at the start
(``--tls-cert``, ``--tls-key``, ``--tls-client-ca``, ``--auth-file``): a reload
changes what the files say, never which files there are, nor whether TLS or tokens
are on. Every file is loaded and checked first; one that does not load (missing,
not PEM, a key that is not the certificate's, an auth file that does not parse or
names a token twice) raises :class:`ConfigError` naming it and **changes nothing**:
the server goes on with what it had. The loading runs in a thread, off the event loop
(an auth file of 100,000 tokens takes seconds to parse: the loop serves meanwhile),
as do its checks and its comparison with the tokens held, each linear in the tokens;
one reload runs at a time. Only then is it all taken at once, between two steps of
the engine (the event loop runs one thing at a time), in time linear in the
connections and the sessions, not in the tokens:

* **TLS**: the next handshake gets the new context (its certificate, key and client
  CAs); a connection made before keeps its own session, and is not dropped. The
  HTTP port's own files (``--http-tls-cert``, ``--http-tls-key``) are read again
  too when its endpoint is given (:data:`Prepare`), and a face's own
  (:class:`~tenure.server.plug.Reloading`: the YDB port's gRPC server).
* **Tokens**: the :class:`~tenure.server._net.auth.Tokens` object every part holds
  (the gate, the faces, the HTTP endpoint) is given the new tokens in place, so the
  next Hello, dflockd auth, YDB ticket, dashboard login or ``/metrics`` scrape is
  checked against them. A token **removed**, or **rotated** (its name kept, its
  secret changed), has its native connections closed: ``GoingAway(AUTHENTICATION)``,
  their sessions detached with their recovery window (a client re-attaches them with
  a token of the new file; one that reconnects with the old secret is refused
  without counting as a guess, :attr:`~tenure.server._net.auth.Tokens.retired`).
  A token whose access, nodes or quotas changed keeps its connections: each later
  command is judged by the new access and nodes. A token **narrowed** (made
  read-only, or its nodes changed) has each of its sessions that uses a right it
  lost ended as an operator's kill would (:func:`_end_narrowed`): one on a node the
  token may no longer touch, and, made read-only, one that holds or waits. Its
  holds are released and its client is told its session expired; left alive, such
  a session held its locks for as long as its client pinged, since the token could
  no longer release or close it. The faces (a
  :class:`~tenure.server.plug.Reloading`) close their own connections of a removed or
  rotated token: dflockd's, and YDB's Session streams.
* **Quotas**: the engine's ledger (:attr:`tenure._core.quotas.QuotaLedger.quotas`)
  and the request rates (:class:`~tenure.server._net.token_rates.TokenRates`) take
  the new quotas; what a token holds already is kept (a quota lowered below it
  refuses its next creation, as at a start).

:func:`reload` is the act; :func:`reload_logged` logs it (``reloaded``, or
``reload_refused`` with the reason) and is what SIGHUP runs. A cluster member
reloads its current term's server, and its next term keeps what it reloaded (each
member reads its own files).
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import ssl
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tenure._core import KillSession
from tenure._core.quotas import Quota
from tenure.errors import ErrorCode, TenureError
from tenure.server._config.quota_settings import default_quota
from tenure.server._config.settings import ConfigError
from tenure.server._net.auth import Access, Token, Tokens, load_tokens
from tenure.server._net.gate import Conn
from tenure.server._net.tls import describe, server_context
from tenure.server._net.token_rates import rates_of

if TYPE_CHECKING:
    from tenure.server._serve import Server
    from tenure.server.plug import Reloading

log = logging.getLogger("tenure.server")

__all__ = ["Prepare", "Reloaded", "reload", "reload_by_signal", "reload_logged"]

#: Another part's files to read again (the HTTP port's TLS files:
#: :meth:`tenure.server._http.endpoint.Endpoint.prepare_tls`): loads and checks them
#: (ConfigError: nothing changes), and returns their name and the step that takes
#: them, run only once every file has loaded; None: that part has no files.
Prepare = Callable[[], tuple[str, Callable[[], None]] | None]


@dataclass(frozen=True, slots=True)
class Reloaded:
    """What a reload changed: ``tls`` (``off``, ``tls`` or ``mtls``: its files read again
    unless ``off``), the tokens' names ``added``, ``removed``, ``rotated`` (a new secret)
    and ``changed`` (access, nodes or quotas), how many connections were ``closed``, and
    the ``others`` whose files were read again (``http_tls``)."""

    tls: str
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    rotated: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    closed: int = 0
    others: tuple[str, ...] = ()

    def fields(self) -> dict[str, object]:
        """For the log and ``tenure reload``'s answer (names only, never a secret)."""
        return {
            "tls": self.tls,
            "tokens_added": list(self.added),
            "tokens_removed": list(self.removed),
            "tokens_rotated": list(self.rotated),
            "tokens_changed": list(self.changed),
            "connections_closed": self.closed,
            "others": list(self.others),
        }


#: One reload at a time per server: a second waits for the first, then reads the files
#: as they are by then.
_RELOADING: weakref.WeakKeyDictionary[Server, asyncio.Lock] = weakref.WeakKeyDictionary()

#: The reloads SIGHUP started, each a task of its own (kept until it ends).
_BY_SIGNAL: set[asyncio.Task[Reloaded | ConfigError]] = set()


@dataclass(frozen=True, slots=True)
class _Change:
    """How the auth file's tokens differ from those the server holds (:func:`_compare`),
    and what the new ones make: the engine's ``quotas`` and the request ``rates``."""

    fresh: Tokens
    added: tuple[str, ...]
    removed: tuple[str, ...]
    rotated: tuple[str, ...]
    changed: tuple[str, ...]
    #: Each token that lost a right, by name, as the new file has it (:func:`_narrows`).
    narrowed: dict[str, Token]
    #: Its tokens' names, for :attr:`Throttle.names`, and their secrets' digests.
    names: frozenset[str]
    digests: frozenset[bytes]
    #: The digests of the secrets removed or rotated (:attr:`Tokens.retired`).
    gone: frozenset[bytes]
    quotas: dict[str, Quota]
    rates: dict[str, float]


@dataclass(frozen=True, slots=True)
class _Loaded:
    """Every file read and checked, and compared with what the server holds; nothing
    taken yet."""

    tls: ssl.SSLContext | None
    change: _Change | None
    prepared: list[tuple[str, Callable[[], None]]]


def _load(server: Server, held: Tokens | None, prepares: Sequence[Prepare]) -> _Loaded:
    """Read and check every file, and compare its tokens with ``held``, the server's (in
    a thread: nothing here touches what the loop runs).

    Raises:
        ConfigError: a file does not load (the message names it).
    """
    config = server.config
    tls = server_context(config.tls_cert, config.tls_key, config.tls_client_ca)
    fresh = load_tokens(config.auth_file) if config.auth_file is not None else None
    prepared = [step for step in (prepare() for prepare in prepares) if step is not None]
    change = None
    if held is not None and fresh is not None:
        change = _compare(held.tokens, fresh, default_quota(config))
    return _Loaded(tls, change, prepared)


def _compare(held: Sequence[Token], fresh: Tokens, default: Quota) -> _Change:
    """How ``fresh`` differs from the ``held`` tokens, and its quotas over ``default``.

    Linear in the tokens, and worked out in the loading thread: with 100,000 tokens it
    took the event loop a second (three times that beside other work), and a client's
    pings went unanswered for as long.
    """
    before = {token.name: token for token in held}
    after = {token.name: token for token in fresh.tokens}
    added = tuple(name for name in after if name not in before)
    removed = tuple(name for name in before if name not in after)
    rotated = tuple(
        name
        for name, token in after.items()
        if name in before and not hmac.compare_digest(before[name].digest, token.digest)
    )
    new_secret = set(rotated)
    changed = tuple(
        name
        for name, token in after.items()
        if name in before and name not in new_secret and before[name] != token
    )
    narrowed = {name: after[name] for name in changed if _narrows(before[name], after[name])}
    quotas = fresh.quotas(default)
    names, digests = frozenset(after), frozenset(token.digest for token in fresh.tokens)
    gone = frozenset(before[name].digest for name in (*removed, *rotated))
    return _Change(
        fresh,
        added,
        removed,
        rotated,
        changed,
        narrowed,
        names,
        digests,
        gone,
        quotas,
        rates_of(quotas),
    )


async def reload(server: Server, also: Sequence[Prepare] = ()) -> Reloaded:
    """Read ``server``'s TLS and auth files again, and ``also``'s, and take them all
    (module docstring).

    Raises:
        ConfigError: a file does not load (the message names it), or the server
            began to stop meanwhile; nothing changed.
    """
    async with _RELOADING.setdefault(server, asyncio.Lock()):
        faces = server.faces.reloading()
        prepares = (*also, *(face.prepare_reload for face in faces))  # (YDB's TLS files)
        # (Nothing else replaces the held tokens: reloads run one at a time.)
        loaded = await asyncio.to_thread(_load, server, server.gate.tokens, prepares)
        if server.stopping:
            raise ConfigError("nothing to reload: the server is stopping")
        done, ended = _take(server, loaded, faces)
        if ended:
            await server.host.committed()  # (a narrowed token's sessions ended: durable)
        return done


def _take(server: Server, loaded: _Loaded, faces: Sequence[Reloading]) -> tuple[Reloaded, int]:
    """Take what :func:`_load` read, at once (between two steps of the engine); what
    changed, and how many sessions of narrowed tokens were ended. Linear in the
    connections and the buckets in use, not in the tokens (:func:`_compare` was)."""
    gate, tls, change, prepared = server.gate, loaded.tls, loaded.change, loaded.prepared
    # Everything loaded: from here nothing fails half-way, unless a file changes
    # between its check and its take (a step that loads it again in place): those
    # steps go first, so that such a failure leaves the server's own files untaken.
    for name, take in prepared:
        try:
            take()
        except (OSError, ssl.SSLError) as error:
            raise ConfigError(f"{name}: its files changed while reloaded: {error}") from None
    gate.tls = tls
    others = tuple(name for name, _ in prepared)
    tokens = gate.tokens
    if tokens is None or change is None:
        return Reloaded(describe(tls), others=others), 0
    tokens.take(change.fresh)
    tokens.throttle.names = change.names
    tokens.retired = (tokens.retired | change.gone) - change.digests
    server.host.engine.ledger.quotas = change.quotas
    rates = server.served.commit.rates
    if rates is not None:
        rates.retune(change.rates)
    ended = _end_narrowed(server, change.narrowed)
    lost = frozenset((*change.removed, *change.rotated))
    closed = _close_gone(server, lost, change.fresh)
    closed += sum(face.tokens_gone(lost) for face in faces)
    done = Reloaded(
        describe(tls), change.added, change.removed, change.rotated, change.changed, closed, others
    )
    return done, ended


def _narrows(before: Token, after: Token) -> bool:
    """Whether ``after`` lost a right ``before`` had: made read-only, or other nodes."""
    made_read_only = before.access is Access.READ_WRITE and after.access is Access.READ_ONLY
    return made_read_only or before.nodes != after.nodes


def _end_narrowed(server: Server, narrowed: Mapping[str, Token]) -> int:
    """End every session of a token of ``narrowed`` (its name: its new token) that uses a
    right the token lost: on a node it may no longer touch, or, read-only now, holding
    or waiting. As an operator's kill (:class:`KillSession`: its holds released, its
    client told); each logged and audited; how many. A standby ends none: its leader
    does."""
    if not narrowed or not server.role.leading:
        return 0
    doomed = []
    for session in server.host.engine.sessions.values():
        usage = session.usage
        token = narrowed.get(usage.owner) if usage is not None else None
        if token is None:
            continue
        if not token.may_touch(session.node):
            doomed.append((session, token, f"token {token.name!r} may no longer touch its node"))
        elif token.access is Access.READ_ONLY and (session.held or session.waits):
            doomed.append((session, token, f"token {token.name!r} was made read-only"))
    ended = 0
    for session, token, why in doomed:
        node, sid = session.node, session.session_id
        try:
            server.host.execute(KillSession(node, sid))
        except TenureError as error:  # (ended meanwhile, or the server cannot log)
            log.warning("session %d of token %r not ended: %s", sid, token.name, error)
            continue
        ended += 1
        fields = {"token": token.name, "node": node, "session_id": sid, "why": why}
        log.info(
            "session ended: its token lost a right it used (reload): %s",
            why,
            extra={"event": "narrowed_session_ended", "fields": fields},
        )
        server.audit.record(
            "kill_session",
            token=None,
            address=None,
            command="KillSession",
            node=node,
            session_id=sid,
            via="reload",
            why=why,
            outcome="ok",
        )
    return ended


def _close_gone(server: Server, gone: frozenset[str], after: Tokens) -> int:
    """Close the native connections of the tokens ``gone``; give the others their
    token as the new file says it; how many were closed."""
    closed = 0
    for conn in list(server.reception.conns):
        if not isinstance(conn, Conn) or conn.token is None or conn.closing:
            continue
        name = conn.token.name
        token = after.named(name)
        if token is not None and name not in gone:
            conn.token = token
            continue
        word = "removed from" if token is None else "rotated in"
        server.gate.send_away(
            conn, ErrorCode.AUTHENTICATION, f"token {name!r} was {word} the auth file"
        )
        closed += 1
    return closed


def reload_by_signal(server: Server | None, also: Sequence[Prepare] = ()) -> None:
    """SIGHUP's handler: :func:`reload_logged` as a task of its own (a signal's handler
    cannot wait for the files to load)."""
    task = asyncio.get_running_loop().create_task(reload_logged(server, also))
    _BY_SIGNAL.add(task)
    task.add_done_callback(_BY_SIGNAL.discard)


async def reload_logged(
    server: Server | None,
    also: Sequence[Prepare] = (),
    *,
    token: str | None = None,
    address: str | None = None,
) -> Reloaded | ConfigError:
    """:func:`reload`, logged; the refusal returned, not raised (the server serves on).

    The one place a reload is told: its two log events (``reloaded``,
    ``reload_refused``) and its line of the audit log (``reload``), by the admin token
    named ``token`` from ``address`` (both None: a SIGHUP).
    """
    if server is None or server.stopping:
        refusal = ConfigError("nothing to reload: the server is not serving")
    else:
        try:
            done = await reload(server, also)
        except ConfigError as error:
            refusal = error
        else:
            log.info("reloaded", extra={"event": "reloaded", "fields": done.fields()})
            server.audit.record(
                "reload", token=token, address=address, outcome="ok", **done.fields()
            )
            return done
    fields = {"why": str(refusal)}
    log.error(
        "reload refused; serving on as before: %s",
        refusal,
        extra={"event": "reload_refused", "fields": fields},
    )
    if server is not None:  # (a file that does not load: the caller's argument)
        server.audit.record(
            "reload", token=token, address=address, outcome="invalid_argument", why=str(refusal)
        )
    return refusal
