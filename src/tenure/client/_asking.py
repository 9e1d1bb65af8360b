"""What each caller of a session holds or is acquiring: a caller may not ask again.

Every acquire is a hold of its own, even within one session, so a caller that asked
again for a semaphore it holds, or is still acquiring, would queue behind itself
(forever, for a mutex). The session refuses that at once, with
PreconditionFailedError. The caller is the asyncio task, or, in the sync face, the
thread a call runs for (:mod:`tenure.client._caller`): there each blocking call is a
task of its own, so keyed by task, a thread relocking a mutex it holds would wait
behind itself.

What :class:`Asking` keeps, per (semaphore name, caller), is a *stake*: the task
still acquiring, then the lease it was granted. (Not a claim: that is the recipe of
``session.claim``.) Only its owner drops a stake (the acquire that failed, the lease
that ended), so an end that comes late never drops a newer stake of the same caller,
and a lease that belongs to no caller (resumed with its session) drops none. A sync
call that its thread withdrew (a Ctrl-C) acts for nobody any more
(:func:`~tenure.client._caller.withdrawn`): until its withdrawal is through, its
stake does not refuse the thread's next call, which takes the stake over.
"""

from __future__ import annotations

import asyncio
from typing import Any, TypeAlias

from tenure.client._caller import Caller, named, withdrawn
from tenure.client._lease import Lease
from tenure.errors import PreconditionFailedError

#: A stake: the task acquiring (None outside any task), then the lease granted.
Stake: TypeAlias = "Lease | asyncio.Task[Any] | None"


class Asking:
    """A session's stakes: which semaphores each caller holds or is acquiring there."""

    __slots__ = ("_stakes",)

    def __init__(self) -> None:
        self._stakes: dict[tuple[str, Caller], Stake] = {}

    def staked(self, name: str, caller: Caller) -> bool:
        """Whether ``caller`` holds or is acquiring ``name`` (a withdrawn sync call's
        acquire, on its way out, no longer counts)."""
        key = (name, caller)
        if key not in self._stakes:
            return False
        stake = self._stakes[key]
        return not (isinstance(stake, asyncio.Task) and withdrawn(stake))

    def stake(self, names: tuple[str, ...], caller: Caller, task: asyncio.Task[Any] | None) -> None:
        """``task`` starts acquiring ``names`` for ``caller``; refused, with nothing
        staked, if the caller holds or is acquiring any of them."""
        for name in names:
            if self.staked(name, caller):
                # Waiting here would wait for ourselves, forever.
                raise PreconditionFailedError(
                    f"{named(caller)} already holds or is acquiring {name!r} in this "
                    "session; tenure locks and leases are not reentrant (a mutex made "
                    "with reentrant=True nests)"
                )
        for name in names:
            self._stakes[name, caller] = task

    def stake_one(self, name: str, caller: Caller, task: asyncio.Task[Any] | None) -> None:
        """:meth:`stake` of one name (a lease's acquire: no tuple, no loop)."""
        key = (name, caller)
        if key in self._stakes and self.staked(name, caller):
            self.stake((name,), caller, task)  # (raises, saying so)
        self._stakes[key] = task

    def unstake(
        self, names: tuple[str, ...], caller: Caller, task: asyncio.Task[Any] | None
    ) -> None:
        """``task``'s acquire of ``names`` failed: drop its stakes (not one taken over)."""
        for name in names:
            key = (name, caller)
            if key in self._stakes and self._stakes[key] is task:
                del self._stakes[key]

    def granted(self, lease: Lease, caller: Caller, task: asyncio.Task[Any] | None) -> None:
        """``task``'s acquire for ``caller`` was granted ``lease``: the stake is the
        lease's now (if the stake was taken over meanwhile, the lease has none)."""
        lease._caller = caller
        key = (lease.name, caller)
        if key in self._stakes and self._stakes[key] is task:
            self._stakes[key] = lease

    def forget(self, lease: Lease) -> None:
        """``lease`` ended: drop its stake, if it has one."""
        key = (lease.name, lease._caller)
        if self._stakes.get(key) is lease:
            del self._stakes[key]
