"""Authentication failures throttled per peer address (sans I/O: time is passed in).

Every listener that checks a credential (native Hello, dflockd's ``auth``, YDB's
tickets and Login, the HTTP dashboard's login) asks :meth:`Throttle.check` before
it looks at the credential, and tells :meth:`Throttle.failed` after a failure. An
address that fails ``per_minute`` times within a minute is *blocked* for
``block_time`` seconds: every attempt from it is refused then, a good credential
included, so that guessing costs the guesser ``block_time`` per ``per_minute``
guesses, and a correct guess cannot be told from a wrong one while blocked.

A success forgets nothing: the failures were made with other secrets than the one
that succeeded, and a guesser holding one valid token of its own must not be able
to wipe its count by logging in with it between guesses (issue 37: 540 guesses
went unblocked that way). Failures leave the count only as the minute passes.

Memory is bounded: at most ``max_addresses`` addresses are tracked, the one
touched least recently forgotten first (a forgotten address starts afresh: an
attacker spreading over more addresses than that gains nothing it would not
gain from that many addresses anyway). A block is logged once, when it begins:
one line per burst per address, not one per attempt.

The counters (:attr:`Throttle.refused_total`, :meth:`Throttle.blocked`) are what
a metrics collector reads.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import dataclass
from typing import Final

log = logging.getLogger("tenure.server")

#: The window failures are counted in, in seconds.
WINDOW: Final = 60.0
#: How many addresses are tracked at most (each costs a few hundred bytes).
DEFAULT_MAX_ADDRESSES: Final = 10_000


@dataclass
class _Peer:
    """What is known of one address: its recent failures and its block."""

    window_start: float
    failures: int = 0
    blocked_until: float = 0.0
    refused: int = 0  # attempts refused during the current block


def peer_host(peer: object) -> str:
    """The address part of a peer, as asyncio's ``peername`` or a ``"host:port"`` string.

    The port is left out: a client that reconnects gets a new one.
    """
    if isinstance(peer, tuple) and peer:
        return str(peer[0])
    text = str(peer)
    if text.startswith("unix:"):  # gRPC's name of a Unix socket's peer
        return text
    if text.startswith(("ipv4:", "ipv6:")):  # gRPC's context.peer()
        text = text[5:]
    if text.startswith("["):  # [::1]:port
        return text[1 : text.find("]")] if "]" in text else text
    if text.count(":") == 1:  # host:port
        return text.rsplit(":", 1)[0]
    if text.startswith("(") and "," in text:  # str() of a peername tuple
        return text[1 : text.index(",")].strip("'\"")
    return text


class Throttle:
    """Failures per address; blocks an address past ``per_minute`` (module docstring).

    ``per_minute`` 0: never blocks (``check`` always allows).
    """

    def __init__(
        self,
        per_minute: int,
        block_time: float,
        *,
        max_addresses: int = DEFAULT_MAX_ADDRESSES,
        listener: str = "",
    ) -> None:
        self.per_minute = per_minute
        self.block_time = block_time
        self.max_addresses = max_addresses
        self.listener = listener  # for the log: which listener's throttle (if one per)
        self._peers: OrderedDict[str, _Peer] = OrderedDict()
        #: Attempts refused because their address was blocked, since the start.
        self.refused_total = 0
        #: Blocks begun since the start.
        self.blocks_total = 0

    def check(self, addr: str, now: float) -> bool:
        """Whether an attempt from ``addr`` may go on (False: refuse it, it is blocked)."""
        if self.per_minute <= 0:
            return True
        peer = self._peers.get(addr)
        if peer is None or now >= peer.blocked_until:
            return True
        peer.refused += 1
        self.refused_total += 1
        self._peers.move_to_end(addr)
        return False

    def failed(self, addr: str, now: float) -> None:
        """An attempt from ``addr`` failed (a wrong or missing credential)."""
        if self.per_minute <= 0:
            return
        peer = self._peers.get(addr)
        if peer is None:
            peer = self._peers[addr] = _Peer(window_start=now)
            while len(self._peers) > self.max_addresses:
                self._peers.popitem(last=False)  # the least recently touched
        else:
            self._peers.move_to_end(addr)
        if now - peer.window_start >= WINDOW:
            peer.window_start, peer.failures = now, 0
        peer.failures += 1
        if peer.failures >= self.per_minute and now >= peer.blocked_until:
            peer.blocked_until = now + self.block_time
            peer.window_start, peer.failures = now, 0
            self.blocks_total += 1
            fields = {
                "peer": addr,
                "failures": self.per_minute,
                "block_time": self.block_time,
                **({"listener": self.listener} if self.listener else {}),
            }
            log.warning(
                "authentication failures; address blocked",
                extra={"event": "auth_throttled", "fields": fields},
            )
            peer.refused = 0

    def blocked(self, now: float) -> int:
        """How many addresses are blocked at ``now`` (the gauge)."""
        return sum(1 for peer in self._peers.values() if now < peer.blocked_until)

    def tracked(self) -> int:
        """How many addresses are tracked (at most ``max_addresses``)."""
        return len(self._peers)
