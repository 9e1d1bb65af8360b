"""What a recipe needs of its session: the one primitive, and the backend's session.

A recipe (mutex, semaphore, election; one file each) is written over
:meth:`RecipeSession.acquire`, the primitive every hold is made with, and reads or
changes a semaphore through the backend's session. It is typed with this protocol,
never with :class:`~tenure.client.Session`, so that the session may make recipes
(``session.mutex(name)``) while no recipe imports the session: the client's modules
form layers (``tests/test_import_graph.py`` fails on an import circle).
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar, overload

from tenure.backends._base import BackendSession
from tenure.client._args import Data
from tenure.client._lease import Lease, LeaseMaker, Lock
from tenure.client._opening import Opening

L = TypeVar("L", bound=Lease)


class RecipeSession(LeaseMaker, Protocol):
    """The session a recipe works in (a :class:`~tenure.client.Session`), as the recipe
    sees it: its id, its :meth:`acquire` (and :meth:`_acquire`, its checked form:
    :class:`~tenure.client._lease.LeaseMaker`), and the backend's session behind it."""

    @property
    def id(self) -> int:
        """The backend's id of the session."""
        ...

    @overload
    def acquire(
        self,
        name: str,
        count: int = 1,
        *,
        data: Data = b"",
        timeout: float | None = None,
        ephemeral: bool = False,
    ) -> Opening[Lease]: ...

    @overload
    def acquire(
        self,
        name: str,
        count: int = 1,
        *,
        data: Data = b"",
        timeout: float | None = None,
        ephemeral: bool = False,
        kind: type[L],
    ) -> Opening[L]: ...

    def acquire(
        self,
        name: str,
        count: int = 1,
        *,
        data: Data = b"",
        timeout: float | None = None,
        ephemeral: bool = False,
        kind: type[Lease] = Lease,
    ) -> Opening[Any]:
        """Hold ``count`` tokens of semaphore ``name`` (see :meth:`tenure.Session.acquire`)."""
        ...

    async def _lock_reentrant(
        self, name: str, data: bytes, timeout: float | None, max_depth: int
    ) -> Lock:
        """A reentrant acquisition of the mutex ``name`` (see :class:`~tenure.Mutex`)."""
        ...

    def _backend_session(self) -> BackendSession:
        """The backend's session; the session's loss error once it has ended."""
        ...
