"""Quotas per owner and the server's memory budget: what each owner holds, counted as it changes.

An *owner* here is who a session, semaphore or node belongs to: the name of the token
that created it (a server with an auth file sets it, never a client), or ``""``
(nobody: no auth file, or a test). CONTRIBUTING's glossary calls it a *quota owner*
where the engine's :class:`~tenure._core.holders.Owner` (a hold) could be meant.
The engine keeps, per owner, how much of each countable thing it holds now
(:data:`COUNTED`), updated at every change (O(1), never a scan), and the same summed
over everybody (``total``), from which the state's size is estimated for the memory
budget.

What each owner may hold is data the host gives (:attr:`QuotaLedger.quotas`, by owner;
an owner with no entry has no quota), like the node ceilings: a journal's replay
lifts them (:attr:`QuotaLedger.enforcing` False), since what was logged was let in.

What counts against whom:

* ``sessions``: sessions open (attached or detached), against the session's owner;
* ``watches``: watches armed (semaphore and prefix watches), against the owner of
  the session that armed them;
* ``prefix_watches``: prefix watches armed (counted in ``watches`` as well), against
  the owner of the session that armed them: each fires on every change under its
  prefix, so a token's few cost every writer of the node (issue 47);
* ``waiters``: acquires queued, against the owner of the waiting session;
* ``semaphores``: semaphores that exist, against the owner of the session that
  created them (CreateSemaphore, an acquire of a new ephemeral one, or a claim; a
  claim of an ended claim's semaphore takes it over from its maker);
* ``nodes``: nodes that exist, against who created them;
* ``data_bytes``: bytes of data held, and of every name, key and identity a client
  chose (the variable-size parts of what it makes, :func:`text_bytes` each): a
  semaphore's name and data against the semaphore's owner, each holder's and
  waiter's data against its session's owner, a session's description, client
  identity (host and name) and protection key against the session's owner, a
  watch's name (or prefix) against its session's owner, a node's name and annex
  values against the node's owner. A quota on bytes that 1 KiB names could pass
  around would be none: a name costs the server what data does.

Counted for the memory budget only (no quota: each is bounded otherwise): ``holds``
(bounded by an owner's sessions and the semaphores' limits) and ``missed_bytes``, the
estimated bytes of the endings each session keeps for its client to read back after a
re-attach (:attr:`tenure._core.session.Session.missed`; at most the node's
``max_missed_per_session`` a session), against the session's owner. An ending is kept
when it happens (a timeout, a deletion: never refused), and counted then, so that
whatever is asked next sees it in the estimate.

``recovery_window`` (the longest session timeout an owner may ask) is a check, not
a count; ``requests_per_second`` is the server's (its gate), not the engine's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Final

from tenure._core.quota_values import (
    COUNTED,
    NO_QUOTA,
    Q_DATA_BYTES,
    Q_HOLDS,
    Q_MISSED_BYTES,
    Q_NODES,
    Q_PREFIX_WATCHES,
    Q_SEMAPHORES,
    Q_SESSIONS,
    Q_WAITERS,
    Q_WATCHES,
    QUOTA_NAMES,
    TRACKED,
    Quota,
)
from tenure.errors import LimitExceededError

__all__ = [
    "COUNTED",
    "QuotaLedger",
    "NO_QUOTA",
    "OBJECT_BYTES",
    "QUOTA_NAMES",
    "Q_DATA_BYTES",
    "Q_HOLDS",
    "Q_MISSED_BYTES",
    "Q_NODES",
    "Q_PREFIX_WATCHES",
    "Q_SEMAPHORES",
    "Q_SESSIONS",
    "Q_WAITERS",
    "Q_WATCHES",
    "Quota",
    "TRACKED",
    "Usage",
    "text_bytes",
]

# (The quotas' names, their indexes and Quota: tenure._core.quota_values, re-exported.)

#: What one counted object costs the server's memory, in bytes, besides its data:
#: the heap each took when measured with ``python -m bench.micro.memory_budget`` on
#: the compiled build (a session about 410, a watch 670, a queued acquire 440, a
#: created semaphore 240, a node 1160, a numbered hold on a shared semaphore 300,
#: with their indexes; a held mutex, its semaphore and hold together, about 280 of
#: RSS at a million (issue 51: 319 before; charged 900 and its name, ``python -m
#: bench.micro.memory_holds``), rounded up (the allocator's slack; measured with
#: short names, which these cover). The memory budget is charged these (in
#: :data:`TRACKED` order) plus every data byte, which counts what a client chooses
#: the size of: data, names, keys, identities (:func:`text_bytes`). A prefix watch
#: is charged as a watch (it is one), nothing more; a kept ending's bytes as counted.
#: A session is 700: a real client's (a 16-byte key, a description and identity of
#: some 50 characters) grew the compiled server's RSS by 979 bytes against 746 charged
#: at 600, past the 1.3 the budget promises (``--kinds-only``; 1.16 at 700).
OBJECT_BYTES: Final = (700, 1000, 600, 400, 2000, 1, 0, 500, 1)


def text_bytes(text: str) -> int:
    """What a name, description or identity's string counts in ``data_bytes``.

    An ASCII string (the usual case), its length: O(1), ``isascii`` reads a flag the
    string keeps. Any other, what the interpreter keeps of it (a scan of at most a
    few KiB): 1, 2 or 4 bytes a character (by its widest character), and its UTF-8
    beside, made the first time it is sent (a reply, a push) and kept. Not its UTF-8
    alone: one emoji makes a 1 KiB name cost 4 KiB.
    """
    if text.isascii():
        return len(text)
    widest = ord(max(text))
    width = 1 if widest < 0x100 else 2 if widest < 0x10000 else 4
    return width * len(text) + len(text.encode("utf-8", "surrogatepass"))


class Usage:
    """What one owner holds now: one count per :data:`COUNTED`; ``total`` is the
    everybody's usage that each change is added to as well (None: this is it).

    ``live``: whether its ledger counts now (:meth:`QuotaLedger.pause_counting`); each
    place that counts reads it first, in its own code, so that a paused ledger costs
    the hot path an attribute read and no call of this module.
    """

    __slots__ = ("counts", "live", "owner", "total")

    def __init__(self, owner: str, total: Usage | None = None, *, live: bool = True) -> None:
        self.owner = owner
        self.counts = [0] * len(TRACKED)
        self.total = total
        self.live = live

    def add(self, index: int, amount: int = 1) -> None:
        """Its owner now holds ``amount`` more (less if negative) of ``index``."""
        self.counts[index] += amount
        total = self.total
        if total is not None:
            total.counts[index] += amount

    def __repr__(self) -> str:
        return f"Usage({self.owner!r}, {dict(zip(TRACKED, self.counts, strict=True))})"


class QuotaLedger:
    """Every owner's usage, the total, the quotas and the memory budget (module docstring).

    State and not state: the counts follow the state (a snapshot's load counts them
    afresh, a replay counts as it applies), the quotas and the budget are the host's,
    and ``refusals`` (how many commands each quota refused, per quota and owner) is
    for the metrics.
    """

    __slots__ = (
        "_budget",
        "_quotas",
        "counting",
        "enforcing",
        "fresh_counts",
        "kept_bytes",
        "limited",
        "refusals",
        "total",
        "usage",
    )

    def __init__(self) -> None:
        self.usage: dict[str, Usage] = {}
        self.total = Usage("")
        self._quotas: Mapping[str, Quota] = {}
        self._budget = 0
        #: Whether a quota or a budget is set (a plain attribute: the hot path reads it).
        self.limited = False
        #: Whether the counts follow the state (:meth:`pause_counting`).
        self.counting = True
        #: Every owner's usage counted from the whole state (the engine's
        #: :func:`tenure._core.ownership.counted_usage`): what a paused ledger's
        #: estimate and its resumption read. None: nothing to count (zeros).
        self.fresh_counts: Callable[[], Mapping[str, list[int]]] | None = None
        #: False while a journal is replayed: what was logged was let in.
        self.enforcing = True
        self.refusals: dict[tuple[str, str], int] = {}
        #: Bytes the host keeps beside the state, counted in the estimate too: the
        #: deadlocks each node shows (``EngineState.note_deadlock``; no owner's).
        self.kept_bytes = 0

    @property
    def quotas(self) -> Mapping[str, Quota]:
        """The quotas by owner (an owner without one has none): the host's. Setting
        some resumes the counting (:meth:`pause_counting`)."""
        return self._quotas

    @quotas.setter
    def quotas(self, quotas: Mapping[str, Quota]) -> None:
        self._quotas = quotas
        self.limited = bool(quotas or self._budget)
        if quotas:
            self.resume_counting()

    @property
    def budget(self) -> int:
        """The memory budget in estimated bytes (:meth:`estimate`); 0: none. Setting
        one resumes the counting (:meth:`pause_counting`)."""
        return self._budget

    @budget.setter
    def budget(self, budget: int) -> None:
        self._budget = budget
        self.limited = bool(self._quotas or budget)
        if budget:
            self.resume_counting()

    def pause_counting(self) -> None:
        """Count nothing while no quota and no budget is set (else do nothing): a
        host with neither pays no bookkeeping per change (each place that counts
        reads :attr:`Usage.live` first). :meth:`estimate` then counts the whole state
        when asked, and setting a quota or a budget counts it once and goes on."""
        if not self.limited:
            self.counting = False
            for usage in self.usage.values():
                usage.live = False

    def resume_counting(self) -> None:
        """Count again from now on, from the whole state counted once (O(state))."""
        if self.counting:
            return
        self.counting = True
        for usage in self.usage.values():
            usage.live = True
        self.recount(self.fresh_counts() if self.fresh_counts is not None else {})

    def of(self, owner: str) -> Usage:
        """The usage of ``owner`` (made on first use)."""
        usage = self.usage.get(owner)
        if usage is None:
            usage = self.usage[owner] = Usage(owner, self.total, live=self.counting)
        return usage

    def estimate(self) -> int:
        """The state's estimated size, in bytes: :data:`OBJECT_BYTES` per object plus
        data, plus :attr:`kept_bytes` (paused: counted from the whole state, O(state))."""
        counts = self.total.counts
        if not self.counting and self.fresh_counts is not None:
            owners = self.fresh_counts().values()
            counts = [sum(each[i] for each in owners) for i in range(len(TRACKED))]
        return self.kept_bytes + sum(n * size for n, size in zip(counts, OBJECT_BYTES, strict=True))

    def check(self, usage: Usage, index: int, amount: int = 1) -> None:
        """Raise LimitExceededError if ``usage``'s owner may not hold ``amount`` more
        of ``index``, or if the memory budget would be passed (nothing is counted)."""
        if not self.enforcing or amount <= 0 or not self.limited:
            return  # (no quota and no budget: not even a lookup)
        self._check_quota(usage, index, amount)
        self._check_budget(usage, amount * OBJECT_BYTES[index])

    def check_made(self, usage: Usage, index: int, amount: int, size: int) -> None:
        """:meth:`check` of ``amount`` new ones of ``index`` that come with ``size``
        bytes of ``data_bytes`` (their names, keys, identities, data: :func:`text_bytes`),
        the memory budget asked for both at once (asked apart, each would pass where
        the two together do not)."""
        self.check_all(usage, ((index, amount), (Q_DATA_BYTES, size)))

    def check_all(self, usage: Usage, asks: Sequence[tuple[int, int]]) -> None:
        """:meth:`check` of everything one command makes at once: ``amount`` more of
        each ``index`` in ``asks`` (amounts of 0 or less ask nothing), each quota
        asked apart and the memory budget for their sum (asked one by one, each would
        pass where all together do not: an ephemeral acquire's semaphore, its hold
        and its data)."""
        if not self.enforcing or not self.limited:
            return  # (no quota and no budget: not even a lookup)
        cost = 0
        for index, amount in asks:
            if amount > 0:
                self._check_quota(usage, index, amount)
                cost += amount * OBJECT_BYTES[index]
        self._check_budget(usage, cost)

    def _check_quota(self, usage: Usage, index: int, amount: int) -> None:
        quota = self._quotas.get(usage.owner)
        if quota is not None:
            limit = quota.limit(index)
            if limit is not None and usage.counts[index] + amount > limit:
                self.refused(COUNTED[index], usage.owner)
                raise LimitExceededError.by_quota(
                    COUNTED[index],
                    f"token {usage.owner!r} is over its quota {COUNTED[index]} ({limit})",
                )

    def _check_budget(self, usage: Usage, cost: int) -> None:
        budget = self._budget
        if budget and cost > 0 and self.estimate() + cost > budget:
            self.refused("memory_budget", usage.owner)
            raise LimitExceededError.by_quota(
                "memory_budget",
                f"the server's memory budget ({budget} bytes) is used up "
                f"(its state is estimated at {self.estimate()} bytes)",
            )

    def check_window(self, owner: str, timeout: float) -> None:
        """Raise LimitExceededError if ``owner`` may not ask a recovery window of ``timeout``."""
        if not self.enforcing:
            return
        quota = self._quotas.get(owner)
        window = quota.recovery_window if quota is not None else None
        if window is not None and timeout > window:
            self.refused("recovery_window", owner)
            raise LimitExceededError.by_quota(
                "recovery_window",
                f"token {owner!r} is over its quota recovery_window ({window:g} s): "
                f"it asked {timeout:g} s",
            )

    def refused(self, quota: str, owner: str) -> None:
        """Count a refusal by ``quota`` (or ``memory_budget``) of a command of ``owner``."""
        key = (quota, owner)
        self.refusals[key] = self.refusals.get(key, 0) + 1

    def recount(self, counts: Mapping[str, list[int]]) -> None:
        """Set every count to ``counts`` (per owner; absent: zero), after a snapshot's
        load. The :class:`Usage` objects stay the same (the state refers to them)."""
        for owner, usage in self.usage.items():
            usage.counts[:] = counts.get(owner, [0] * len(TRACKED))
        for owner, values in counts.items():
            self.of(owner).counts[:] = values
        owners = self.usage.values()
        self.total.counts[:] = [sum(u.counts[i] for u in owners) for i in range(len(TRACKED))]
