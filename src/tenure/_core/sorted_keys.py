"""A sorted index of a dict's keys, so that a listing page costs its own size.

The engine keeps its nodes, each node's semaphores and each node's sessions in
dicts (lookups by key on every command). A listing asks for the keys after a
bound, sorted, a page at a time: walking the dict for each page costs every key,
page after page (quadratic to page through, and a stall of the event loop when a
token that sees few nodes pages through many it may not see). :class:`SortedKeys`
keeps the same keys sorted beside the dict: a page is two bisections, then the
page itself; a prefix is a range of it.

The keys are kept in sorted runs of at most ``2 * LOAD`` keys each (the
shape of ``sortedcontainers.SortedList``, without the dependency): a key is added
or removed with a bisection of the runs' last keys, then a list insert or delete
in one run, so a node of 100,000 semaphores pays for a new name about what a
node of 1,000 does (one sorted list would move every pointer after the name).

``looked_at`` counts the keys a page read (not time): tests bound a page's work
with it.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Iterator
from typing import Generic, TypeVar

K = TypeVar("K", str, int)

#: A run grows to 2 * LOAD keys, then splits in two (it shrinks as its keys go; an
#: emptied run is dropped).
LOAD = 512


class SortedKeys(Generic[K]):
    """The keys of a dict, sorted (see the module docstring)."""

    def __init__(self, keys: Iterable[K] = ()) -> None:
        ordered = sorted(keys)
        #: The keys, in order, in runs of up to 2 * LOAD (none empty).
        self.runs: list[list[K]] = [ordered[i : i + LOAD] for i in range(0, len(ordered), LOAD)]
        #: Each run's last key (what a key is bisected against first).
        self.lasts: list[K] = [run[-1] for run in self.runs]
        self.size = len(ordered)
        #: Keys read by the pages so far (a measure of their work, for tests).
        self.looked_at = 0

    def __len__(self) -> int:
        return self.size

    @property
    def keys(self) -> list[K]:
        """Every key, in order (a new list: for tests and checks, not listings)."""
        return [key for run in self.runs for key in run]

    def has(self, key: K) -> bool:
        """Whether ``key`` is kept (two bisections)."""
        lasts = self.lasts
        r = bisect_left(lasts, key)
        if r == len(lasts):
            return False
        run = self.runs[r]
        return run[bisect_left(run, key)] == key

    def add(self, key: K) -> bool:
        """Add ``key`` (no effect if present); whether it was not there."""
        runs, lasts = self.runs, self.lasts
        if not runs:
            runs.append([key])
            lasts.append(key)
            self.size = 1
            return True
        r = bisect_left(lasts, key)
        if r == len(runs):  # (above every key: new session ids, names made in order)
            r -= 1
            run = runs[r]
            run.append(key)
            lasts[r] = key
        else:
            run = runs[r]
            i = bisect_left(run, key)
            if run[i] == key:
                return False
            run.insert(i, key)
        self.size += 1
        if len(run) > 2 * LOAD:  # split in two
            runs.insert(r + 1, run[LOAD:])
            del run[LOAD:]
            lasts.insert(r, run[-1])
        return True

    def discard(self, key: K) -> bool:
        """Remove ``key`` (no effect if absent); whether it was there."""
        runs, lasts = self.runs, self.lasts
        r = bisect_left(lasts, key)
        if r == len(runs):
            return False
        run = runs[r]
        i = bisect_left(run, key)
        if run[i] != key:
            return False
        del run[i]
        self.size -= 1
        if not run:
            del runs[r]
            del lasts[r]
        elif i == len(run):
            lasts[r] = run[-1]
        return True

    def _from(self, key: K, *, inclusive: bool) -> Iterator[K]:
        """The keys from ``key`` on (``inclusive``) or after it, in order."""
        runs = self.runs
        if inclusive:
            r = bisect_left(self.lasts, key)
            i = bisect_left(runs[r], key) if r < len(runs) else 0
        else:
            r = bisect_right(self.lasts, key)
            i = bisect_right(runs[r], key) if r < len(runs) else 0
        while r < len(runs):
            run = runs[r]
            while i < len(run):
                self.looked_at += 1
                yield run[i]
                i += 1
            r += 1
            i = 0

    def page(self, after: K, limit: int) -> list[K]:
        """Up to ``limit`` keys greater than ``after``, in order."""
        page: list[K] = []
        if limit <= 0:
            return page
        for key in self._from(after, inclusive=False):
            page.append(key)
            if len(page) >= limit:
                break
        return page

    def prefixed(self, prefix: str, after: str, limit: int) -> list[str]:
        """Up to ``limit`` keys that start with ``prefix`` and are greater than ``after``."""
        page: list[str] = []
        if limit <= 0:
            return page
        for key in self._under(prefix, after):
            page.append(key)
            if len(page) >= limit:
                break
        return page

    def matching(
        self, prefixes: Iterable[str], after: str, limit: int, match: Callable[[str], bool]
    ) -> list[str]:
        """Up to ``limit`` keys greater than ``after`` that start with one of
        ``prefixes`` and pass ``match``, in order.

        Only the ranges of the prefixes are read: a key outside them is never looked
        at; a key inside them that ``match`` refuses is (a prefix is all that a
        pattern such as ``jobs-*`` or ``a*b`` says for sure about a range).
        """
        page: list[str] = []
        for key in self._in_ranges(_outermost(prefixes), after):
            if match(key):
                page.append(key)
                if len(page) >= limit:
                    break
        return page

    def matching_within(
        self,
        prefixes: Iterable[str],
        after: str,
        limit: int,
        match: Callable[[str], bool],
        budget: int,
    ) -> tuple[list[str], str | None]:
        """:meth:`matching`, looking at ``budget`` keys at most: the keys found, and
        where to go on (None: nowhere, the page is whole). A token whose pattern
        starts with a wildcard (``*-jobs``) has the range of ``""``, every key: its
        page is read a budget at a time, from the last key looked at.
        """
        page: list[str] = []
        for looked, key in enumerate(self._in_ranges(_outermost(prefixes), after), 1):
            if match(key):
                page.append(key)
                if len(page) >= limit:
                    return page, None
            if looked >= budget:
                return page, key
        return page, None

    def under(self, prefix: str, start: str, *, inclusive: bool = False) -> Iterator[str]:
        """The keys that start with ``prefix`` and are greater than ``start`` (or equal
        to it: ``inclusive``), in order, read one at a time as the caller takes them
        (each counted in ``looked_at``): for a walk that decides as it goes where to
        go on. Valid only while the keys do not change (within one step).
        """
        return self._under(prefix, start, inclusive)

    def _in_ranges(self, prefixes: list[str], after: str) -> Iterator[str]:
        """The keys greater than ``after`` under ``prefixes`` (sorted, none under another)."""
        for prefix in prefixes:
            yield from self._under(prefix, after)

    def _under(self, prefix: str, after: str, inclusive: bool = False) -> Iterator[str]:
        """The keys greater than ``after`` (or equal: ``inclusive``) that start with
        ``prefix``, in order."""
        keys: SortedKeys[str] = self  # type: ignore[assignment]  # (str keys only)
        if after >= prefix:
            start = keys._from(after, inclusive=inclusive)
        else:
            start = keys._from(prefix, inclusive=True)
        for key in start:  # (the keys under a prefix are next to each other)
            if not key.startswith(prefix):
                return
            yield key


def _outermost(prefixes: Iterable[str]) -> list[str]:
    """``prefixes`` sorted, without those under another (their ranges are disjoint
    and in order then)."""
    kept: list[str] = []
    for prefix in sorted(set(prefixes)):
        if not kept or not prefix.startswith(kept[-1]):
            kept.append(prefix)
    return kept
