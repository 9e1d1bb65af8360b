"""What a recipe needs of its session: the one primitive, and the backend's session.

A recipe (mutex, semaphore, election; one file each) is written over the public low
level, :mod:`tenure.lowlevel`, as a user's recipe is: the session's acquire
(:func:`tenure.lowlevel.acquire`, :class:`~tenure.client._lease.LeaseMaker`), the
primitive every hold is made with (:func:`~tenure.client._lease.open_lease` checks a
caller's arguments for it, as :meth:`tenure.Session.acquire` does), and the backend's
session (:func:`tenure.lowlevel.backend_session`), through which it reads or changes
a semaphore. This protocol declares what those reach of the session; a recipe
calls no member of it but ``id``. A recipe's session is typed with it, never with
:class:`~tenure.client.Session`, so that the session may make recipes
(``session.mutex(name)``) while no recipe imports the session: the client's modules
form layers (``tests/test_import_graph.py`` fails on an import circle).

:class:`NamedRecipe` is what a recipe object is made of: its session and its name.
"""

from __future__ import annotations

from typing import Protocol, TypeVar

from tenure.backends._base import CoreSession
from tenure.client import _args
from tenure.client._lease import Lease, LeaseMaker, Lock

L = TypeVar("L", bound=Lease)


class RecipeSession(LeaseMaker, Protocol):
    """The session a recipe works in (a :class:`~tenure.client.Session`), as the recipe
    sees it: its id, its ``_acquire`` (:class:`~tenure.client._lease.LeaseMaker`), its
    reentrant locking, and the backend's session behind it."""

    @property
    def id(self) -> int:
        """The backend's id of the session."""
        ...

    async def _lock_reentrant(
        self,
        name: str,
        data: bytes,
        timeout: float | None,
        max_depth: int,
        max_hold: float | None = None,
    ) -> Lock:
        """A reentrant acquisition of the mutex ``name`` (see :class:`~tenure.Mutex`)."""
        ...

    def _backend_session(self) -> CoreSession:
        """The backend's session; the session's loss error once it has ended."""
        ...


class NamedRecipe:
    """A recipe object (a semaphore, a counter, an election...): the session it works in
    and its name, checked as a semaphore's (InvalidArgumentError), shown as
    ``<Counter 'jobs' of session 7>``."""

    def __init__(self, session: RecipeSession, name: str) -> None:
        self.session = session
        self.name = _args.semaphore_name(name)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} of session {self.session.id}>"
