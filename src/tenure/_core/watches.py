"""Watches on a semaphore's data, owners and waiters. [compiled]

A watch is armed by a describe and fires on a change of an aspect it watches (or
of the semaphore's existence, which changes every aspect). Firing carries the state
the change left (described as the arming describe asked: with owners and waiters
or without), so a watcher sees it without another round trip; a firing that would
list more owners and waiters than ``EngineState.max_listed_per_firing`` carries
none (the listing would be built in another's step), and its watcher describes.

A one-shot watch fires once: the watcher describes again to arm the next, and that
describe reads the latest state, so changes in between coalesce. A repeating watch
(``watch_repeat``) fires on every change until it is disarmed: no describe per
change, for the server or the watcher; the client keeps only the latest state it
was sent, so changes it has no time for coalesce there.

A prefix watch (WatchPrefix) is a repeating watch of every semaphore of its node
whose name starts with its prefix, those that do not exist yet included: each
firing carries the name that changed and the state the change left. A node's
prefix watches are kept by prefix, and a change looks up only the prefixes of
its name's lengths that some watch uses: nothing at all on a node without prefix
watches, one dict lookup per distinct prefix length otherwise, however many
watches share a prefix. But every prefix watch a change hits fires, each a push to
its session: a node's prefix watches are counted (:meth:`Watches.prefix_count`),
and the engine bounds them (``EngineState.max_prefix_watches_per_node``), so that
one change's fan-out is bounded too, whoever armed them.

The watches on one name fire on each change of it, in the step that made the
change, whoever owns the semaphore: a name's watches are counted per quota owner
of the sessions that armed them (:meth:`Watches.target_count`), and the engine
bounds each quota owner's (``EngineState.max_watches_per_semaphore``), so that no
token's watches add more than that to another's change, nor use up its room.
"""

from __future__ import annotations

from typing import Final, TypeAlias

from tenure._core._dataclass import dataclass


@dataclass(frozen=True, slots=True)
class Watch:
    """An armed watch."""

    watch_id: int
    session_id: int
    node: str
    name: str
    data: bool
    owners: bool
    waiters: bool
    #: What the arming describe listed (its ``owners``/``waiters`` flags): the
    #: description that firing carries lists the same.
    with_owners: bool = False
    with_waiters: bool = False
    #: Fire on every change it watches (until disarmed), not only on the first.
    repeat: bool = False
    #: A prefix watch: ``name`` is the prefix, and it watches every name under it
    #: (always repeating).
    prefix: bool = False
    #: The quota owner of the session that armed it (its token's name; ``""``:
    #: none): a name's watches are counted per quota owner (:meth:`Watches.target_count`).
    quota_owner: str = ""


#: Which aspects of a semaphore changed in one step: an int of the bits below. Every
#: acquire and release makes and combines some, so they are ints, not objects.
Change: TypeAlias = int
NOTHING: Final = 0
DATA: Final = 1
OWNERS: Final = 2
WAITERS: Final = 4
EXISTENCE: Final = 8  # appearing or vanishing changes every aspect


def matches(change: Change, watch: Watch) -> bool:
    """Whether ``watch`` cares about ``change``."""
    return bool(
        change & EXISTENCE
        or (change & DATA and watch.data)
        or (change & OWNERS and watch.owners)
        or (change & WAITERS and watch.waiters)
    )


class Watches:
    """All armed watches, indexed by target, by node and prefix, and by id."""

    __slots__ = (
        "_by_id",
        "_by_prefix",
        "_by_target",
        "_prefix_counts",
        "_prefix_lengths",
        "_target_counts",
    )

    def __init__(self) -> None:
        self._by_target: dict[tuple[str, str], dict[int, Watch]] = {}
        self._by_id: dict[int, Watch] = {}
        #: Prefix watches: node -> prefix -> watches by id (module docstring).
        self._by_prefix: dict[str, dict[str, dict[int, Watch]]] = {}
        #: node -> length of a prefix -> how many of the node's watched prefixes have it.
        self._prefix_lengths: dict[str, dict[int, int]] = {}
        #: node -> how many prefix watches it has armed.
        self._prefix_counts: dict[str, int] = {}
        #: (node, name, quota owner) -> how many watches on the name its sessions armed.
        self._target_counts: dict[tuple[str, str, str], int] = {}

    def __len__(self) -> int:
        return len(self._by_id)

    def prefix_count(self, node: str) -> int:
        """How many prefix watches of ``node`` are armed: each fires on a change of
        any name under its prefix."""
        return self._prefix_counts.get(node, 0)

    def target_count(self, node: str, name: str, quota_owner: str) -> int:
        """How many watches on ``name`` of ``node`` (not prefix watches) the sessions of
        ``quota_owner`` have armed: each fires on a change of the name."""
        return self._target_counts.get((node, name, quota_owner), 0)

    def armed(self) -> list[Watch]:
        """Every armed watch (a copy, in the order armed)."""
        return list(self._by_id.values())

    def check_index(self) -> None:
        """Assert that the three indexes agree: each armed watch is where a firing looks
        for it (its name, or its prefix), and the prefix lengths count the prefixes (a
        cross-check for tests: :mod:`tenure._core.invariants`)."""
        for watch_id, watch in self._by_id.items():
            assert watch.watch_id == watch_id
            if watch.prefix:
                indexed = self._by_prefix[watch.node][watch.name]
                assert len(watch.name) in self._prefix_lengths[watch.node]
            else:
                indexed = self._by_target[(watch.node, watch.name)]
            assert indexed[watch_id] is watch, f"watch {watch_id} not indexed"
        for node, prefixes in self._by_prefix.items():
            lengths: dict[int, int] = {}
            for prefix, of_prefix in prefixes.items():
                assert of_prefix, f"{node}: no watch of prefix {prefix!r} but its entry"
                lengths[len(prefix)] = lengths.get(len(prefix), 0) + 1
            assert self._prefix_lengths[node] == lengths, f"{node}: prefix lengths"
            count = sum(len(of_prefix) for of_prefix in prefixes.values())
            assert self._prefix_counts[node] == count, f"{node}: prefix watches counted"
        assert set(self._prefix_lengths) == set(self._by_prefix) == set(self._prefix_counts)
        counts: dict[tuple[str, str, str], int] = {}
        for (node, name), on_target in self._by_target.items():
            assert on_target, f"{node}: no watch of {name!r} but its entry"
            for watch in on_target.values():
                key = (node, name, watch.quota_owner)
                counts[key] = counts.get(key, 0) + 1
        assert self._target_counts == counts, "watches on a name counted per quota owner"

    def arm(self, watch: Watch) -> None:
        """Register ``watch``."""
        self._by_id[watch.watch_id] = watch
        if watch.prefix:
            prefixes = self._by_prefix.setdefault(watch.node, {})
            of_prefix = prefixes.get(watch.name)
            if of_prefix is None:
                of_prefix = prefixes[watch.name] = {}
                lengths = self._prefix_lengths.setdefault(watch.node, {})
                lengths[len(watch.name)] = lengths.get(len(watch.name), 0) + 1
            of_prefix[watch.watch_id] = watch
            self._prefix_counts[watch.node] = self._prefix_counts.get(watch.node, 0) + 1
            return
        self._by_target.setdefault((watch.node, watch.name), {})[watch.watch_id] = watch
        key = (watch.node, watch.name, watch.quota_owner)
        self._target_counts[key] = self._target_counts.get(key, 0) + 1

    def disarm(self, watch_id: int) -> Watch | None:
        """Remove a watch without firing it."""
        watch = self._by_id.pop(watch_id, None)
        if watch is None:
            return None
        if watch.prefix:
            self._disarm_prefix(watch)
            return watch
        target = (watch.node, watch.name)
        on_target = self._by_target[target]
        del on_target[watch_id]
        if not on_target:
            del self._by_target[target]
        key = (watch.node, watch.name, watch.quota_owner)
        left = self._target_counts[key] - 1
        if left:
            self._target_counts[key] = left
        else:
            del self._target_counts[key]
        return watch

    def _disarm_prefix(self, watch: Watch) -> None:
        prefixes = self._by_prefix[watch.node]
        of_prefix = prefixes[watch.name]
        del of_prefix[watch.watch_id]
        self._prefix_counts[watch.node] -= 1
        if of_prefix:
            return
        del prefixes[watch.name]
        lengths = self._prefix_lengths[watch.node]
        left = lengths[len(watch.name)] - 1
        if left:
            lengths[len(watch.name)] = left
        else:
            del lengths[len(watch.name)]
        if not prefixes:
            del self._by_prefix[watch.node]
            del self._prefix_lengths[watch.node]
            del self._prefix_counts[watch.node]

    def fire(self, node: str, name: str, change: Change) -> list[Watch]:
        """Return the watches that ``change`` of ``name`` hits: those on the name, in
        arming order, then the prefix watches whose prefix ``name`` starts with (those
        of one prefix in arming order).

        One-shot watches are removed; repeating ones (prefix watches among them) stay armed.
        """
        on_target = self._by_target.get((node, name))
        fired = [w for w in on_target.values() if matches(change, w)] if on_target else []
        for watch in fired:
            if not watch.repeat:
                self.disarm(watch.watch_id)
        if self._by_prefix:
            prefixes = self._by_prefix.get(node)
            if prefixes is not None:
                size = len(name)
                for length in self._prefix_lengths[node]:
                    if length <= size:
                        watchers = prefixes.get(name[:length])
                        if watchers is not None:
                            fired += [w for w in watchers.values() if matches(change, w)]
        return fired
