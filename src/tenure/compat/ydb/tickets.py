"""Who a YDB call comes from: tickets, static-credential logins, and the auth file.

YDB's clients send a ticket in the ``x-ydb-auth-ticket`` metadata of every call. The
YDB face takes two kinds, both checked against the server's auth file
(``--auth-file``, its policy lent by :mod:`tenure.server.plug`):

* a token's secret itself (``ydb.AccessTokenCredentials(secret)``): the token
  whose secret it is;
* a ticket from a login (``ydb.StaticCredentials(user, password)``, whose
  ``AuthService/Login`` gives the user a ticket): the user is a token's name, the
  password its secret. The ticket names the token and when it expires
  (``--ydb-ticket-ttl``), signed with this data directory's secret (a cluster's
  shared one), so it outlives a restart of the server. The digest of the token's
  secret is mixed into the signed text and checked against the auth file at every
  call, so a ticket dies with its token when the auth file drops it *or changes its
  secret* (issue 37: rotating a leaked secret must cut the logins made with it), on
  every server that checks it.

Without an auth file every call is anonymous and may do anything, as on a YDB
without authentication. With one, a call without a valid ticket is refused
UNAUTHORIZED, and each command is authorized as the native protocol's are
(:func:`tenure.server.plug.denial`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from collections.abc import Callable, Iterable
from typing import Final

from tenure.server.plug import Token, Tokens, peer_host

#: The metadata key of a call's ticket.
TICKET_HEADER: Final = "x-ydb-auth-ticket"
#: The start of a ticket this server made (a token's secret never starts so: it
#: would then be taken as a forged ticket and refused, not as the secret).
_TICKET_PREFIX: Final = "tenure-ydb-ticket."
#: What the signature covers besides the ticket's fields: tickets sign nothing else.
_LABEL: Final = b"tenure ydb ticket v1\0"


class UnauthorizedError(Exception):
    """The call's ticket is missing, unknown, expired, or its token was removed."""


class Tickets:
    """Tickets and logins of one server (see the module docstring)."""

    def __init__(
        self,
        tokens: Tokens | None,
        key: bytes,
        ticket_ttl: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.tokens = tokens
        self._key = hmac.new(key, _LABEL, hashlib.sha256).digest()
        self._ttl = ticket_ttl
        self._clock = clock

    def login(self, user: str, password: str, peer: str = "") -> str:
        """A ticket for the token named ``user`` whose secret is ``password``.

        ``peer``: the caller's address (gRPC's ``context.peer()``), whose failures are
        throttled (:meth:`_throttled`); empty: not throttled.

        Raises:
            UnauthorizedError: no such token, or not its secret; or no auth file (there
                is nothing to log in to); or the peer's address is blocked.
        """
        if self.tokens is None:
            raise UnauthorizedError("this server has no auth file: connect without credentials")
        tokens = self.tokens

        def check() -> Token:
            token = tokens.authenticate(password)
            if token is None or token.name != user:
                raise UnauthorizedError("unknown user or wrong password")
            return token

        # (Counted per address and per the name guessed at: guesses at one token's
        # secret from many addresses are blocked too; see the throttle.)
        token = self._throttled(peer, check, target=user)
        expires = int(self._clock() + self._ttl)
        body = f"{_b64(user.encode())}.{expires}"
        return f"{_TICKET_PREFIX}{body}.{self._sign(body, token)}"

    def token_of(self, metadata: Iterable[tuple[str, str | bytes]], peer: str = "") -> Token | None:
        """The token a call acts as (None: anonymous, when the server has no auth file).

        ``peer``: the caller's address, whose failures are throttled (empty: not).

        Raises:
            UnauthorizedError: an auth file is in use and the call's ticket is not good,
                or the peer's address is blocked.
        """
        if self.tokens is None:
            return None
        return self._throttled(peer, lambda: self._token_of(metadata))

    def _throttled(self, peer: str, check: Callable[[], Token], target: str | None = None) -> Token:
        """``check()``, unless ``peer``'s address (or the token name ``target`` the
        credential is aimed at, if it names one) is blocked; its outcome told to the
        throttle (issue 28: guessing costs the guesser a block per few failures)."""
        assert self.tokens is not None
        throttle, addr, now = self.tokens.throttle, peer_host(peer), time.monotonic()
        if peer and not throttle.check(addr, now, target):
            raise UnauthorizedError(
                "too many authentication failures from this address or for this user; "
                "try again later"
            )
        try:
            token = check()
        except UnauthorizedError:
            if peer:
                throttle.failed(addr, now, target)
            raise
        if peer and target is not None:
            throttle.succeeded(addr, target)  # (its owner's address: forgets no failure)
        return token

    def _token_of(self, metadata: Iterable[tuple[str, str | bytes]]) -> Token:
        assert self.tokens is not None
        ticket = next((v for k, v in metadata if k == TICKET_HEADER), None)
        if not isinstance(ticket, str) or not ticket:
            raise UnauthorizedError("this server requires credentials (a token or a login)")
        if ticket.startswith(_TICKET_PREFIX):
            return self._ticket_token(ticket[len(_TICKET_PREFIX) :])
        token = self.tokens.authenticate(ticket)
        if token is None:
            raise UnauthorizedError("unknown token")
        return token

    def _ticket_token(self, ticket: str) -> Token:
        body, _, signature = ticket.rpartition(".")
        name_b64, _, expires = body.partition(".")
        try:
            name = base64.urlsafe_b64decode(name_b64 + "=" * (-len(name_b64) % 4)).decode()
        except (ValueError, UnicodeError):
            raise UnauthorizedError("the ticket was not made by this server") from None
        assert self.tokens is not None
        named = [token for token in self.tokens.tokens if token.name == name]
        for token in named:  # (the name is unique in an auth file: at most one)
            if hmac.compare_digest(signature, self._sign(body, token)):
                break
        else:
            if named:  # a ticket of an earlier secret and a forgery look alike
                raise UnauthorizedError(
                    "the ticket was not made by this server, or its token's secret "
                    "changed since: log in again"
                )
            raise UnauthorizedError(
                "the ticket was not made by this server, or its token is no longer in the auth file"
            )
        if not expires.isdigit() or int(expires) <= self._clock():
            raise UnauthorizedError("the ticket expired: log in again")
        return token

    def _sign(self, body: str, token: Token) -> str:
        """The signature of ``body`` for ``token``: over its secret's digest too."""
        text = body.encode() + b"\0" + token.digest
        return _b64(hmac.new(self._key, text, hashlib.sha256).digest())


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()
