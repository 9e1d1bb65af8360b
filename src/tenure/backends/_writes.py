"""The semaphore writes of the backend session's core, as values: one member, four kinds.

:meth:`CoreSession.write_semaphore <tenure.backends._core_session.CoreSession.write_semaphore>`
takes one of them (:data:`SemaphoreWrite`): creating a persistent semaphore, replacing
its data, compare-and-set of its data, deleting it. A new kind of write is a new
value here, not a new member every backend must grow. Part of the backend contract
(re-exported by :mod:`tenure.backends`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

__all__ = ["CreateWrite", "DeleteWrite", "SemaphoreWrite", "SwapWrite", "UpdateWrite"]


@dataclass(frozen=True, slots=True)
class CreateWrite:
    """Create a persistent semaphore of ``limit`` tokens with ``data``;
    AlreadyExistsError if it exists."""

    limit: int
    data: bytes


@dataclass(frozen=True, slots=True)
class UpdateWrite:
    """Replace a semaphore's data; NotFoundError if missing."""

    data: bytes


@dataclass(frozen=True, slots=True)
class SwapWrite:
    """Replace a semaphore's data with ``data`` if it is ``expected`` now, atomically.

    The write answers whether it did. NotFoundError if missing. If the answer is lost
    (the store unreachable), the error says so: whether the swap happened is then
    unknown.
    """

    expected: bytes
    data: bytes


@dataclass(frozen=True, slots=True)
class DeleteWrite:
    """Delete a semaphore; one with owners or waiters only with ``force``.

    Forced: its waiters fail with NotFoundError and its owners lose their grants (each
    owner's listener hears ``lease_lost``).
    """

    force: bool


#: One change of a semaphore that is not a hold (:meth:`CoreSession.write_semaphore`).
SemaphoreWrite: TypeAlias = CreateWrite | UpdateWrite | SwapWrite | DeleteWrite
