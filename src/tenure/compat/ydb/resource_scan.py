"""A node's YDB resources read in name order from its sorted semaphore names, a budget
of names at a time.

The limiters of a node's resources are its semaphores ``ratelimiter/PATH``
(:mod:`.resources`): a range of the node's sorted names
(:class:`tenure._core.sorted_keys.SortedKeys`), and those below a resource ``a``
the range of ``ratelimiter/a/``. So a listing, and the search for a resource's
descendants, read that range and nothing else of the node.

In name order a resource comes before every resource below it (a path sorts before
the paths it starts), so one pass knows each one's parent (the nearest resource above
it) without looking up a name per level of its path, which costs a deep path its
depth squared: the pass keeps the *chain*, the resources read whose paths start the
path being read, shortest first. A path that does not start with the last of the
chain ends that one (no later path starts with it either: they sort after this one).
The parent of a path is then the last of the chain if the path goes on with ``/``
after it, else the last one's own parent: a resource of the chain below the last one
starts the last one at no ``/`` (else it would be above it, and the last one's parent
would be nearer), so it does not start the path at one either.

A :class:`ResourceScan` goes on from where its last :meth:`~ResourceScan.step`
stopped, and looks at ``budget`` names at most in a step (a bisection of the index,
where it goes on, counts as one): a listing steps once per turn of the server's loop,
every other request served between (:mod:`.rate_limiter`). A scan of the roots
(``roots=True``) reads no name below a root: at the first, it goes on past the root's
range (``ratelimiter/a/`` ends before ``ratelimiter/a0``: ``0`` follows ``/``). What
changes between two steps shows, or not, as in any paged listing: each name is read
as its step finds it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from tenure._core.node import Node
from tenure._core.semaphore import Semaphore

#: The character right after ``/``: a path's range of names below it ends before
#: the path followed by it.
_PAST_SLASH: Final = chr(ord("/") + 1)


@dataclass(frozen=True, slots=True)
class Found:
    """A resource a scan read: its path, and its parent among the resources the scan
    read (None: none above it in the scan's range)."""

    path: str
    parent: Found | None


class ResourceScan:
    """One pass over the resources whose limiters are named ``prefix`` + a path below
    ``under`` (every one for ``""``), in name order (see the module docstring).

    ``keep(path, semaphore)``: whether the semaphore named ``prefix + path`` is a
    resource (one that is not is skipped, and is no one's parent); ``roots``: only
    the resources without one above them in the range.
    """

    def __init__(
        self,
        prefix: str,
        under: str,
        keep: Callable[[str, Semaphore], bool],
        *,
        roots: bool = False,
    ) -> None:
        #: The range's names start with this.
        self.prefix = prefix + (under + "/" if under else "")
        self.roots = roots
        #: Whether the whole range is read.
        self.done = False
        self._names = prefix  # (before each path)
        self._keep = keep
        self._start = self.prefix  # where the next step goes on...
        self._inclusive = True  # ...from it (True) or after it
        self._chain: list[Found] = []

    def step(self, node: Node, budget: int, *, first: bool = False) -> list[Found]:
        """The resources read among the next ``budget`` names at most (2 at least) of
        ``node``'s range (fewer: the range is read, :attr:`done`), in order; ``first``:
        up to the first resource only."""
        found: list[Found] = []
        left = max(budget, 2)  # (room for a bisection and a name)
        semaphores, index = node.semaphores, node.semaphore_index
        strip, chain = len(self._names), self._chain
        while left > 1 and not self.done:
            left -= 1  # (the bisection that finds where to go on)
            names = index.under(self.prefix, self._start, inclusive=self._inclusive)
            for name in names:
                left -= 1
                self._start, self._inclusive = name, False
                path = name[strip:]
                while chain and not path.startswith(chain[-1].path):
                    chain.pop()  # (and no later path starts with it)
                last = chain[-1] if chain else None
                below = last is not None and path.startswith("/", len(last.path))
                if below and self.roots:
                    assert last is not None
                    # Nothing in ``last``'s range is a root: on past it.
                    self._start, self._inclusive = self._names + last.path + _PAST_SLASH, True
                    break
                semaphore = semaphores.get(name)
                if semaphore is not None and self._keep(path, semaphore):
                    parent = last if below else None if last is None else last.parent
                    resource = Found(path, parent)
                    chain.append(resource)
                    found.append(resource)
                    if first:
                        return found
                if left <= 0:
                    break
            else:
                self.done = True  # (the range ran out)
        return found

    def rest(self, node: Node) -> list[Found]:
        """Every resource left to read, in one step (as long as the range is)."""
        found: list[Found] = []
        while not self.done:  # (a root's range skipped starts another go)
            found += self.step(node, len(node.semaphore_index) + 2)
        return found
