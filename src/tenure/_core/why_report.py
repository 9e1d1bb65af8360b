"""What ``why`` answers: who blocks a name (:class:`WhyReport` and its parts).

The values only; :mod:`tenure._core.blocking` makes them from an engine's state, and
a client makes them from a describe where the store does not know what a holder waits
for (``tenure.client._why``). Public as ``tenure.WhyReport`` and the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

from tenure._core.values import ClientIdentity

__all__ = ["WhyHolder", "WhyLink", "WhyReport", "WhyRoot", "WhyWait", "WhyWaiter"]


@dataclass(frozen=True, slots=True)
class WhyWait:
    """A request a holder has queued: on ``name`` of ``node``, at ``position`` in its
    queue (1: served next; 0: not counted, past the look limit)."""

    node: str
    name: str
    position: int


@dataclass(frozen=True, slots=True)
class WhyHolder:
    """One hold of the name: its session, its client's ``address`` (where the server
    sees its connection; "" where nothing connects it: detached, in-process, or a store
    that does not say), the tokens, the fencing token, how long it
    has been held (seconds; None where the store keeps no time of grant), in how long
    its ``max_hold`` ends it (None: no bound, or a store that does not say), and
    what its holder waits for (:class:`WhyWait`, in the order they began; None where
    the store does not know what a holder waits for)."""

    session_id: int
    description: str
    identity: ClientIdentity
    address: str
    count: int
    token: int
    held_for: float | None
    max_hold_ends_in: float | None
    waiting_for: tuple[WhyWait, ...] | None = ()


@dataclass(frozen=True, slots=True)
class WhyWaiter:
    """One queued request of the name (its session's ``address`` as a holder's), at
    ``position`` (1: next), asking ``count``
    tokens, waiting for ``waiting_for`` seconds so far (None where the store keeps no
    time of arrival)."""

    session_id: int
    description: str
    identity: ClientIdentity
    address: str
    count: int
    position: int
    waiting_for: float | None


@dataclass(frozen=True, slots=True)
class WhyLink:
    """A (name, holder) the chain met: ``session_id`` holds ``name`` of ``node`` and
    waits for ``waits_on`` (names of the same node; empty: a root)."""

    node: str
    name: str
    session_id: int
    waits_on: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class WhyRoot:
    """A holder the chain met that waits for nothing: what everyone behind waits on
    (its session's ``address`` as a holder's)."""

    node: str
    name: str
    session_id: int
    description: str
    identity: ClientIdentity
    address: str
    held_for: float


@dataclass(frozen=True, slots=True)
class WhyReport:
    """Who blocks ``name`` of ``node`` (module docstring).

    ``holders`` and ``waiters`` are a page (``limit`` of each; the waiters after the
    ``after``-th); ``holders_total`` and ``waiters_total`` say how many there are.
    ``chain`` is every (name, holder) met from the name's holders on, breadth first
    (``limit`` at most);
    ``roots`` those that wait for nothing (both None where the store does not know
    what a holder waits for). ``cut``: the walk stopped at its look limit (the chain,
    the roots and the places in queues may be incomplete).
    """

    node: str
    name: str
    holders: tuple[WhyHolder, ...] = ()
    waiters: tuple[WhyWaiter, ...] = ()
    chain: tuple[WhyLink, ...] | None = ()
    roots: tuple[WhyRoot, ...] | None = ()
    holders_total: int = 0
    waiters_total: int = 0
    cut: bool = False
