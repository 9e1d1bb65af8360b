"""``SyncRecipe``: what each sync recipe object is made of, written once.

A sync recipe object (:class:`tenure.sync.Mutex`, ``Semaphore``, ``Counter``...) is
the asyncio client's object of the same name called from blocking code: made with
its session and that object (its :attr:`SyncRecipe._recipe`, which every call goes
to, through the session's portal), named as it is, and shown as
``<sync Mutex 'job' of session 7>``.
"""

from __future__ import annotations

from typing import Generic, Protocol, TypeVar

from tenure.sync._leases import LeaseSession

__all__ = ["SyncRecipe"]


class _Named(Protocol):
    @property
    def name(self) -> str: ...


S = TypeVar("S", bound=LeaseSession)
A = TypeVar("A", bound=_Named)


class SyncRecipe(Generic[S, A]):
    """The sync face of the asyncio recipe object ``recipe``, in ``session`` (module
    docstring)."""

    def __init__(self, session: S, recipe: A) -> None:
        #: The session it was made in (a :class:`tenure.sync.Session`).
        self.session = session
        self.name = recipe.name
        self._recipe = recipe

    def __repr__(self) -> str:
        return f"<sync {type(self).__name__} {self.name!r} of session {self.session.id}>"
