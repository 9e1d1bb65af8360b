"""What the dflockd face keeps besides the engine: holds, keys, tokens.

Each dflockd grant or waiting request is one engine session of its own: a dflockd
hold lives on by its own lease after its connection is gone, and is found again at
a restart by its session (an engine session could carry several numbered holds,
but then they would share one recovery window and one end). Locks live in the node ``dflockd`` as
the same ephemeral semaphores native mutexes use, so the two exclude each other;
dflockd semaphores live in ``dflockd-semaphores`` as semaphores of the limit their
first caller chose (dflockd keeps the two namespaces apart).

Tokens are the dflockd fencing format: 16 hex digits of the engine's fencing token
(one counter for every grant, journaled, so it increases across restarts) and 16
hex digits of salt. The salt is an HMAC of the fence under the server's secret (the
data directory's, or a cluster's, which every member shares: :attr:`Plug.secret`),
so a token cannot be guessed from its fence, and the server can check one after a
restart, or a new leader after a failover, without having stored it.

The key registry is dflockd's: ``--dflockd-max-locks`` counts every key, idle ones
too, until the idle-key collector forgets it (``--dflockd-gc-max-idle``). Each key
counts as well against the token whose client registered it, for
``--dflockd-max-locks-per-token`` (issue 47: one token's keys filled the registry,
and every other token's new keys were refused until they were collected).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
from dataclasses import dataclass, field
from typing import Final

from tenure.compat.dflockd import codec as wire

LOCK_NODE: Final = "dflockd"
SEMAPHORE_NODE: Final = "dflockd-semaphores"
#: The description of the engine sessions the face makes (found again at start-up).
SESSION_DESCRIPTION: Final = "dflockd"


def node_of(semaphore: bool) -> str:
    """The node that holds dflockd semaphores (True) or locks (False)."""
    return SEMAPHORE_NODE if semaphore else LOCK_NODE


class TokenMint:
    """Makes and checks dflockd tokens for engine fencing tokens."""

    def __init__(self, secret: bytes) -> None:
        self._secret = secret

    def token(self, fence: int) -> str:
        """The dflockd token of the grant with engine fencing token ``fence``."""
        return wire.make_token(fence, self._salt(fence))

    def fence(self, token: str) -> int | None:
        """The fence of a token this server made, or None for any other string."""
        parsed = wire.parse_token(token)
        if parsed is None:
            return None
        fence, salt = parsed
        return fence if hmac.compare_digest(salt, self._salt(fence)) else None

    def _salt(self, fence: int) -> bytes:
        mac = hmac.new(self._secret, fence.to_bytes(8, "big"), hashlib.sha256)
        return mac.digest()[:8]


@dataclass(eq=False)
class Hold:
    """One dflockd acquire: its engine session, and its grant once it has one."""

    session_id: int
    key: str
    semaphore: bool
    lease: int
    conn_id: int  # the connection that asked (0 once it is gone, auto-release off)
    fence: int | None = None  # set once granted
    expired: bool = False  # the lease ran out (or the grant ended) before `w` saw it
    # Resolved when the engine grants (True) or gives up (False) a queued request.
    outcome: asyncio.Future[bool] | None = None

    @property
    def granted(self) -> bool:
        """Whether the engine granted it."""
        return self.fence is not None


@dataclass
class KeyUse:
    """A key dflockd knows, for --dflockd-max-locks and the idle-key collector."""

    last_active: float
    limit: int = 1
    #: The token whose client registered it (it counts in :attr:`Registry.keys_of`).
    token: str = ""


@dataclass
class Registry:
    """Holds by session and by fence, and the keys in use."""

    by_session: dict[int, Hold] = field(default_factory=dict)
    by_fence: dict[int, Hold] = field(default_factory=dict)
    keys: dict[tuple[bool, str], KeyUse] = field(default_factory=dict)
    #: How many of ``keys`` each token registered (a token with none is not here).
    keys_of: dict[str, int] = field(default_factory=dict)

    def add(self, hold: Hold) -> None:
        """Track ``hold`` by its session."""
        self.by_session[hold.session_id] = hold

    def granted(self, hold: Hold, fence: int) -> None:
        """The engine granted ``hold`` with ``fence``."""
        hold.fence = fence
        self.by_fence[fence] = hold

    def forget(self, hold: Hold) -> None:
        """``hold`` is over (released, expired, withdrawn)."""
        self.by_session.pop(hold.session_id, None)
        if hold.fence is not None:
            self.by_fence.pop(hold.fence, None)

    def of_connection(self, conn_id: int) -> list[Hold]:
        """The holds a connection asked for, in session order."""
        return [hold for hold in self.by_session.values() if hold.conn_id == conn_id]

    def touch(self, semaphore: bool, key: str, now: float, limit: int = 1, token: str = "") -> None:
        """Note activity on a key (registering it if new, as ``token``'s)."""
        use = self.keys.get((semaphore, key))
        if use is None:
            self.keys[(semaphore, key)] = KeyUse(now, limit, token)
            self.keys_of[token] = self.keys_of.get(token, 0) + 1
        else:
            use.last_active = now

    def forget_key(self, semaphore: bool, key: str) -> None:
        """The collector forgot ``key`` (it is registered): its token has one fewer."""
        use = self.keys.pop((semaphore, key))
        left = self.keys_of[use.token] - 1
        if left:
            self.keys_of[use.token] = left
        else:
            del self.keys_of[use.token]

    def busy_keys(self) -> set[tuple[bool, str]]:
        """Keys with a hold or a waiting request."""
        return {(hold.semaphore, hold.key) for hold in self.by_session.values()}


@dataclass(eq=False)
class DflockdConn:
    """One dflockd connection (the server writes its ``outbox`` after each commit)."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    peer: str
    conn_id: int
    codec: wire.LineReader = field(default_factory=wire.LineReader)
    outbox: list[bytes] = field(default_factory=list)
    closing: bool = False
    authenticated: bool = False
    #: The name of the token its ``auth`` gave ("" without an auth file): what its
    #: locks make is that token's, and counts against its quotas.
    token: str = ""
    stable_ref: bool = False
    pending: dict[tuple[bool, str], Hold] = field(default_factory=dict)  # `e` awaiting `w`
