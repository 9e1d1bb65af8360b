"""Authentication failures throttled per peer address and per attempted token (sans I/O).

Every listener that checks a credential (native Hello, a face's own logins and
tickets, the HTTP dashboard's login) asks :meth:`Throttle.check` before
it looks at the credential, and tells :meth:`Throttle.failed` after a failure. An
address that fails ``per_minute`` times within a minute is *blocked* for
``block_time`` seconds: every attempt from it is refused then, a good credential
included, so that guessing costs the guesser ``block_time`` per ``per_minute``
guesses, and a correct guess cannot be told from a wrong one while blocked.

**Per attempted token.** Where the credential names the token it is aimed at (YDB's
Login: a user, the token's name, and a password, its secret), the failures are
also counted per that name, from every address together: guesses at one token's
secret spread over many addresses are blocked too, past ``per_minute`` of them in a
minute, for ``block_time``. (A credential that is a secret alone, as a native
Hello's, names no token: a guess there is aimed at every token at once, and each
guess is a different secret, so no count per secret could grow; those are counted
per address only. docs/operations.md, "Throttled guessing".) A blocked name is not
blocked for its owner: the addresses that logged in as it successfully (the
latest :data:`KNOWN_ADDRESSES` of them) are still checked, so a guesser cannot
lock the owner out; a guesser at such an address would have logged in with the
secret already.

A success forgets nothing: the failures were made with other secrets than the one
that succeeded, and a guesser holding one valid token of its own must not be able
to wipe its count by logging in with it between guesses (issue 37: 540 guesses
went unblocked that way). Failures leave the count only as the minute passes.

Memory is bounded: at most ``max_tracked`` addresses and as many names are
tracked (``--auth-max-tracked``), the one touched least recently forgotten first
(a forgotten address starts afresh: an attacker spreading over more addresses than
that gains nothing it would not gain from that many addresses anyway). Names are
tracked whether a token has them or not, so that a block tells no guesser which
names exist; the auth file's own names are tracked besides and never forgotten,
so that naming ever new users cannot push a real name's count out. A block is
logged once, when it begins: one line per burst per address or name, not one per
attempt.

The counters (:attr:`Throttle.refused_total`, :meth:`Throttle.blocked`) are what
a metrics collector reads. Every failure is told to :attr:`Throttle.audit` (the
server's audit log, ``--audit-log``), with the address and the token's name when the
credential named a token the auth file has (never the text of a name it does not
have: a secret typed as a user name). Attempts refused while blocked are *counted*
and told at most once per :data:`TELL_EVERY` seconds per address or name, each time
with how many were refused since it was last told (the first of a block at once; the
rest at the next refusal past the interval, or at the first attempt once the block
is over): one client hammering a blocked address wrote a line per attempt, 26,139
in 10 s, and rotated the trail away in half an hour.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

log = logging.getLogger("tenure.server")

#: The window failures are counted in, in seconds.
WINDOW: Final = 60.0
#: How often, at most, the attempts refused while an address or a name is blocked
#: are told to the audit log (each time with their count), in seconds.
TELL_EVERY: Final = 10.0
#: How many addresses, and how many attempted names, are tracked at most (each costs
#: a few hundred bytes): the default of ``--auth-max-tracked``.
DEFAULT_MAX_TRACKED: Final = 10_000
#: How many addresses that logged in as a name are remembered per name (its owner's:
#: they are not refused while the name is blocked).
KNOWN_ADDRESSES: Final = 16


@dataclass
class _Count:
    """What is known of one address or name: its recent failures and its block."""

    window_start: float
    failures: int = 0
    blocked_until: float = 0.0
    refused: int = 0  # attempts refused during the current block
    untold: int = 0  # refused and not told to the audit log yet
    told_at: float = float("-inf")  # when refusals were last told
    #: For a name: the addresses that logged in as it, most recent last.
    known: list[str] = field(default_factory=list)


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
    """Failures per address and per attempted name; blocks either past ``per_minute``
    (module docstring). ``per_minute`` 0: never blocks (``check`` always allows).
    """

    def __init__(
        self,
        per_minute: int,
        block_time: float,
        *,
        max_addresses: int = DEFAULT_MAX_TRACKED,
        listener: str = "",
        names: frozenset[str] = frozenset(),
    ) -> None:
        """``max_addresses``: ``--auth-max-tracked``, how many addresses and how many
        other names are tracked each; ``names``: the tokens' names, tracked besides
        and never forgotten (a guesser naming ever new users cannot push a real one's
        count out)."""
        self.per_minute = per_minute
        self.block_time = block_time
        self.max_addresses = max_addresses
        self.listener = listener  # for the log: which listener's throttle (if one per)
        self.names = names
        self._peers: OrderedDict[str, _Count] = OrderedDict()
        self._targets: OrderedDict[str, _Count] = OrderedDict()
        #: Attempts refused because their address or their name was blocked, since the start.
        self.refused_total = 0
        #: Blocks begun since the start (of addresses and of names).
        self.blocks_total = 0
        #: Told ``(address, token, outcome, attempts)`` of each failed attempt
        #: (``authentication``, 1) and, at most each :data:`TELL_EVERY` seconds, of the
        #: ``attempts`` refused while blocked (``blocked``); ``token``: the name the
        #: credential named, if the auth file has it, else None (module docstring).
        self.audit: Callable[[str, str | None, str, int], None] | None = None

    def check(self, addr: str, now: float, target: str | None = None) -> bool:
        """Whether an attempt from ``addr`` (at the token named ``target``, when the
        credential names one) may go on (False: refuse it, it is blocked)."""
        if self.per_minute <= 0:
            return True
        peer = self._peers.get(addr)
        if peer is not None and now < peer.blocked_until:
            peer.refused += 1
            self.refused_total += 1
            self._peers.move_to_end(addr)
            self._refused(peer, addr, target, now)
            return False
        if peer is not None and peer.untold:  # (its block is over: the rest told now)
            self._tell_refused(peer, addr, target, now)
        if target is None:
            return True
        aimed = self._targets.get(target)
        if aimed is not None and aimed.untold and now >= aimed.blocked_until:
            self._tell_refused(aimed, addr, target, now)
        if aimed is None or now >= aimed.blocked_until or addr in aimed.known:
            return True  # (its owner's addresses are still heard: module docstring)
        aimed.refused += 1
        self.refused_total += 1
        self._targets.move_to_end(target)
        self._refused(aimed, addr, target, now)
        return False

    def _refused(self, count: _Count, addr: str, target: str | None, now: float) -> None:
        """One attempt refused because ``count``'s block holds: counted, and told with
        those before it once :data:`TELL_EVERY` has passed since the last telling."""
        count.untold += 1
        if now - count.told_at >= TELL_EVERY:
            self._tell_refused(count, addr, target, now)

    def _tell_refused(self, count: _Count, addr: str, target: str | None, now: float) -> None:
        self._tell(addr, target, "blocked", count.untold)
        count.untold, count.told_at = 0, now

    def _tell(self, addr: str, target: str | None, outcome: str, attempts: int = 1) -> None:
        """Tell :attr:`audit` of ``attempts`` refused (the name only if a token has it)."""
        if self.audit is not None:
            self.audit(addr, target if target in self.names else None, outcome, attempts)

    def failed(self, addr: str, now: float, target: str | None = None) -> None:
        """An attempt from ``addr`` (at the token named ``target``, when the credential
        names one) failed: a wrong or missing credential."""
        self._tell(addr, target, "authentication")
        if self.per_minute <= 0:
            return
        self._count(self._peers, addr, now, "peer")
        if target is not None:
            self._count(self._targets, target, now, "target")

    def succeeded(self, addr: str, target: str) -> None:
        """``addr`` logged in as the token named ``target``: its owner's address, heard
        while the name is blocked. Forgets no failure (module docstring)."""
        if self.per_minute <= 0:
            return
        aimed = self._targets.get(target)
        if aimed is None:
            # (A token's name: bounded by the auth file, never forgotten.)
            aimed = self._targets[target] = _Count(window_start=-WINDOW)
        if addr in aimed.known:
            aimed.known.remove(addr)
        aimed.known.append(addr)
        del aimed.known[:-KNOWN_ADDRESSES]

    def _count(self, table: OrderedDict[str, _Count], key: str, now: float, kind: str) -> None:
        count = table.get(key)
        if count is None:
            count = table[key] = _Count(window_start=now)
            kept = self.names if table is self._targets else frozenset()
            if len(table) > self.max_addresses + len(kept):
                # The least recently touched, a token's name excepted (at most
                # len(kept) of those are in the table: the others are within the bound).
                oldest = next(other for other in table if other not in kept)
                del table[oldest]
        else:
            table.move_to_end(key)
        if now - count.window_start >= WINDOW:
            count.window_start, count.failures = now, 0
        count.failures += 1
        if count.failures >= self.per_minute and now >= count.blocked_until:
            count.blocked_until = now + self.block_time
            count.window_start, count.failures = now, 0
            self.blocks_total += 1
            fields = {
                # (A name is the guesser's text: logged as an ASCII literal, bounded.)
                kind: key if kind == "peer" else ascii(key)[:80],
                "failures": self.per_minute,
                "block_time": self.block_time,
                **({"listener": self.listener} if self.listener else {}),
            }
            what = "address" if kind == "peer" else "token name"
            log.warning(
                f"authentication failures; {what} blocked",
                extra={"event": "auth_throttled", "fields": fields},
            )
            count.refused = 0

    def blocked(self, now: float) -> int:
        """How many addresses are blocked at ``now`` (the gauge)."""
        return sum(1 for peer in self._peers.values() if now < peer.blocked_until)

    def blocked_names(self, now: float) -> int:
        """How many attempted names are blocked at ``now``."""
        return sum(1 for aimed in self._targets.values() if now < aimed.blocked_until)

    def tracked(self) -> int:
        """How many addresses are tracked (at most ``max_addresses``)."""
        return len(self._peers)

    def tracked_targets(self) -> int:
        """How many attempted names are tracked (at most ``max_addresses``)."""
        return len(self._targets)
