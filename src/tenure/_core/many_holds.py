"""A session's table of holds once it holds many semaphores: their names sorted, compactly.

A session keeps, per semaphore name, the numbers of its holds there
(:class:`tenure._core.session.Session`). While it holds few, that is a dict (a
lookup on every acquire and release, inline in the compiled build). A session that
holds many (a batch job's, a face's, a benchmark's four sessions of a million held
mutexes) pays the dict's price per name: 31 bytes a name at 250,000 (a 16-byte entry
and a 4-byte index per slot, two thirds of them used at best), for the usual number
0 of every hold. :class:`ManyHolds` keeps the names in a
:class:`~tenure._core.sorted_keys.SortedKeys` instead (a pointer each in runs of
512 to 1,024: about 9 bytes a name) and the numbers only of the names whose holds
are not just the usual one (hold 0 alone): a dict of the exceptions, empty for most.
Its names are in order, as the session's end and its description walk them.

Not compiled: the sorted index is not (mypyc would make each of its generic calls
checked); a session turns to it only past :data:`MANY` names, and back below a half
of that, so a session of a few holds keeps the compiled dict's speed.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from collections.abc import Set as AbstractSet
from typing import Final, TypeAlias

from tenure._core.sorted_keys import SortedKeys

#: The numbers of a session's holds (or waits) on one semaphore: one int, the usual
#: case, or a set of two or more (as :mod:`tenure._core.session` keeps them).
Numbers: TypeAlias = int | set[int]

#: A session's table of holds turns from a dict into a :class:`ManyHolds` when it would
#: pass this many names (and back below half of it).
MANY: Final = 256


class ManyHolds(AbstractSet[str]):
    """The names a session holds (a read-only set, in order) and each one's numbers."""

    __slots__ = ("_names", "_numbers")

    def __init__(self, table: Iterable[tuple[str, Numbers]] = ()) -> None:
        self._numbers: dict[str, Numbers] = {}
        names: list[str] = []
        for name, numbers in table:
            names.append(name)
            if numbers != 0:  # (hold 0 alone, the usual, is the default: not kept)
                self._numbers[name] = numbers
        self._names: SortedKeys[str] = SortedKeys(names)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._names.has(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names.keys)

    def __len__(self) -> int:
        return len(self._names)

    def __eq__(self, other: object) -> bool:
        # (By names and numbers, and equal to a dict of the same holds: a session
        # restored from a snapshot may keep the other shape; to a set, by names.)
        if isinstance(other, ManyHolds):
            return self._numbers == other._numbers and self._names.keys == other._names.keys
        if isinstance(other, dict):
            return self.table() == other
        if isinstance(other, AbstractSet):  # (as the set of names it is read as)
            return len(self) == len(other) and all(name in other for name in self)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # (changes: unhashable, as a set is)

    def get(self, name: str) -> Numbers | None:
        """The numbers of the holds on ``name`` (None: it holds none there)."""
        numbers = self._numbers.get(name)
        if numbers is not None:
            return numbers
        return 0 if self._names.has(name) else None

    def items(self) -> Iterator[tuple[str, Numbers]]:
        """Each name, in order, with its numbers."""
        extra = self._numbers
        for name in self._names.keys:
            yield name, extra.get(name, 0)

    def add(self, name: str, number: int) -> bool:
        """Add hold ``number`` on ``name``; whether it was not there."""
        numbers = self._numbers.get(name)
        if numbers is None:  # (none there, or hold 0 alone: one bisection finds which)
            if self._names.add(name):
                if number != 0:
                    self._numbers[name] = number
                return True
            if number == 0:
                return False
            self._numbers[name] = {0, number}
            return True
        if type(numbers) is int:
            if numbers == number:
                return False
            self._numbers[name] = {numbers, number}
            return True
        assert isinstance(numbers, set)
        if number in numbers:
            return False
        numbers.add(number)
        return True

    def discard(self, name: str, number: int) -> bool:
        """Drop hold ``number`` on ``name``; whether it was there."""
        numbers = self._numbers.get(name)
        if numbers is None:  # (none there, or hold 0 alone)
            return number == 0 and self._names.discard(name)
        if type(numbers) is int:
            if numbers != number:
                return False
            self._names.discard(name)
            self._numbers.pop(name, None)
            return True
        assert isinstance(numbers, set)
        if number not in numbers:
            return False
        numbers.discard(number)
        if len(numbers) == 1:
            (left,) = numbers
            if left == 0:
                del self._numbers[name]
            else:
                self._numbers[name] = left
        return True

    def table(self) -> dict[str, Numbers]:
        """The same holds as a dict (what the session keeps again below half of :data:`MANY`)."""
        return dict(self.items())
