"""The dashboard's login tickets: what its cookie holds instead of a token's secret.

A login (``POST /dashboard/api/login`` with a token's secret) gets a ticket::

    tdt1.<token name, base64url>.<expiry, unix seconds>.<id, base64url>.<signature>

signed (HMAC-SHA256) with the server's secret, the one the faces sign with
(:attr:`tenure.server.plug.Plug.secret`: the data directory's, or a cluster's shared
one), under a label of its own, and with the digest of the token's secret mixed into
the signed text. The secret itself never leaves the server again, and a ticket is
refused

* once it expires (``--dashboard-ticket-ttl`` after the login);
* when its token is no longer in the auth file, or its secret changed (the digest no
  longer matches the signature);
* after its logout: its id is kept in a bounded set until the ticket would expire
  anyway (:data:`MAX_REVOKED`; when the set is full of live ids, the logout revokes
  every ticket of that token issued until now instead, a per-token "not before").

What survives a restart: the tickets (the key is the data directory's) and the
logouts, which are written to ``LOGOUTS_FILE`` in the data directory before the
logout is answered (whole, fsynced, renamed, the directory fsynced: a power cut
keeps either the old list or the new). A file that cannot be read refuses every
ticket issued before the start instead. On a cluster, whose servers share no data
directory, each server keeps its logouts in memory: a ticket logged out is refused
by that server until it restarts, and by the others only once it expires (to cut
every ticket of a token at once, change its secret or remove it from the auth
file).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import json
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

from tenure.server._durability.identity import write_durably
from tenure.server._net.auth import Token, Tokens

__all__ = ["LOGOUTS_FILE", "MAX_REVOKED", "PREFIX", "LoginTickets"]

log = logging.getLogger("tenure.server")

#: The logouts' file in the data directory (JSON: ids and "not before" times).
LOGOUTS_FILE: Final = "dashboard-logouts.json"

#: The start of every dashboard ticket (a version: a new format gets a new one).
PREFIX: Final = "tdt1."
#: What the key is derived under: dashboard tickets and YDB tickets never verify as
#: each other, though both are signed with the same server secret.
_LABEL: Final = b"tenure dashboard ticket v1\0"
#: Logged-out ticket ids kept until they expire, at most.
MAX_REVOKED: Final = 10_000
#: The "not before" key that applies to every token (no token is named "").
_EVERY_TOKEN: Final = ""
#: Random bytes in a ticket's id (unique per login, so one logout revokes one login).
_ID_BYTES: Final = 12


class LoginTickets:
    """Issues and checks the dashboard's tickets (see the module docstring)."""

    def __init__(
        self,
        secret: bytes,
        ttl: float,
        clock: Callable[[], float] = time.time,
        *,
        logouts: Path | None = None,
    ) -> None:
        """``logouts``: the file the logouts are kept in (None: memory only)."""
        self._key = _derive(secret)
        self.ttl = ttl
        self._clock = clock
        self._logouts = logouts
        #: ticket id -> its expiry, for logged-out tickets not yet expired.
        self._revoked: dict[str, int] = {}
        #: token name -> tickets issued before this (unix seconds) are refused.
        self._not_before: dict[str, int] = {}
        if logouts is not None:
            self._load(logouts)

    def signs_with(self, secret: bytes) -> bool:
        """Whether these tickets are signed with ``secret`` (the server's)."""
        return hmac.compare_digest(self._key, _derive(secret))

    def issue(self, token: Token) -> str:
        """A new ticket for ``token``, good for :attr:`ttl` seconds."""
        now = self._clock()
        expires = int(now + self.ttl)
        ticket_id = _b64(os.urandom(_ID_BYTES))
        body = f"{PREFIX}{_b64(token.name.encode())}.{expires}.{int(now)}.{ticket_id}"
        return f"{body}.{self._sign(body, token)}"

    def check(self, ticket: str | None, tokens: Tokens) -> Token | None:
        """The token ``ticket`` stands for, or None: not a ticket of this server's,
        expired, logged out, or its token is gone or has a new secret."""
        parts = _parts(ticket)
        if parts is None:
            return None
        body, name, expires, issued, ticket_id, signature = parts
        if expires <= self._clock() or ticket_id in self._revoked:
            return None
        if issued < max(self._not_before.get(name, 0), self._not_before.get(_EVERY_TOKEN, 0)):
            return None
        for token in tokens.tokens:
            if token.name == name and hmac.compare_digest(signature, self._sign(body, token)):
                return token
        return None

    async def log_out(self, ticket: str | None, tokens: Tokens) -> bool:
        """:meth:`revoke`, then the logouts written to their file (in a thread: an
        fsync must not stall the server's loop) before this returns."""
        if not self.revoke(ticket, tokens):
            return False
        if self._logouts is not None:
            await asyncio.to_thread(write_durably, self._logouts, self._saved(), 0o600)
        return True

    def revoke(self, ticket: str | None, tokens: Tokens) -> bool:
        """Log ``ticket`` out in memory (whether it was good: nothing to do for a bad one)."""
        if self.check(ticket, tokens) is None:
            return False
        parts = _parts(ticket)
        assert parts is not None
        _, name, expires, _, ticket_id, _ = parts
        now = self._clock()
        if len(self._revoked) >= MAX_REVOKED:
            self._revoked = {k: e for k, e in self._revoked.items() if e > now}
        if len(self._revoked) >= MAX_REVOKED:
            # Full of live ids: bounded memory wins over the token's other logins,
            # which are logged out too (+1: issue times are whole seconds).
            self._not_before[name] = int(now) + 1
        else:
            self._revoked[ticket_id] = expires
        return True

    def _saved(self) -> bytes:
        """The logouts as their file keeps them (the expired ones left out)."""
        now = self._clock()
        revoked = {k: e for k, e in self._revoked.items() if e > now}
        horizon = now - self.ttl  # a "not before" older than any live ticket says nothing
        not_before = {k: t for k, t in self._not_before.items() if t > horizon}
        return json.dumps({"revoked": revoked, "not_before": not_before}).encode()

    def _load(self, path: Path) -> None:
        try:
            raw = json.loads(path.read_bytes())
            revoked = {str(k): int(e) for k, e in raw["revoked"].items()}
            not_before = {str(k): int(t) for k, t in raw["not_before"].items()}
        except FileNotFoundError:
            return
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as error:
            # Unreadable: every ticket issued until now is refused instead (a logout
            # must not be forgotten; a login again costs the operator little).
            log.warning(
                "%s cannot be read (%s): every dashboard login made before now is refused",
                path,
                error,
                extra={"event": "dashboard_logouts_unreadable"},
            )
            self._not_before = {_EVERY_TOKEN: int(self._clock()) + 1}
            return
        now = self._clock()
        self._revoked = dict([(k, e) for k, e in revoked.items() if e > now][-MAX_REVOKED:])
        self._not_before = not_before

    def _sign(self, body: str, token: Token) -> str:
        text = body.encode() + b"\0" + token.digest
        return _b64(hmac.new(self._key, text, hashlib.sha256).digest())


def _parts(ticket: str | None) -> tuple[str, str, int, int, str, str] | None:
    """(signed body, token name, expiry, issue time, id, signature), or None."""
    if not ticket or not ticket.startswith(PREFIX):
        return None
    body, _, signature = ticket.rpartition(".")
    fields = body[len(PREFIX) :].split(".")
    if len(fields) != 4 or not fields[1].isdigit() or not fields[2].isdigit():
        return None
    name_b64, expires, issued, ticket_id = fields
    try:
        name = base64.urlsafe_b64decode(name_b64 + "=" * (-len(name_b64) % 4)).decode()
    except (ValueError, binascii.Error, UnicodeError):
        return None
    return body, name, int(expires), int(issued), ticket_id, signature


def _derive(secret: bytes) -> bytes:
    return hmac.new(secret, _LABEL, hashlib.sha256).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()
