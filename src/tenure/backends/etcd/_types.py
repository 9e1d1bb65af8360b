"""What each part of one etcd session (acquiring, waiting, holds, claims, administration,
watches) may ask of its home, the session's store: a narrow protocol per part, each
naming only what that part uses, so none of them imports the store that composes them."""

from __future__ import annotations

from typing import Protocol

from tenure._etcd.client import EtcdClient
from tenure._etcd.streams import WatchHub
from tenure.backends._store import BoundSession
from tenure.backends._turns import Turns
from tenure.backends.etcd._feed import Feeds
from tenure.backends.etcd._hints import Hints
from tenure.backends.etcd._node import NodeView
from tenure.backends.etcd._record import SessionRecord
from tenure.backends.etcd._session_keys import SessionKeys
from tenure.backends.etcd._txns import TxnSender

__all__ = [
    "AdminHome",
    "Armed",
    "ClaimsHome",
    "EtcdWatchHome",
    "HoldsHome",
    "PartHome",
    "PrefixWatchHome",
    "SetAcquirerHome",
    "SetWaiterHome",
    "SingleAcquirerHome",
    "SingleWaiterHome",
]


class Armed(Protocol):
    """An armed watch of a session (a semaphore's or a prefix's), as the session's end
    sees it: counted against max_watches_per_session, failed when the session ends."""

    def fail(self, error: BaseException) -> None:
        """The session ended: the watch's consumer hears ``error``."""


class PartHome(Protocol):
    """What every part that reads or writes the session's semaphores asks of its home."""

    @property
    def keys(self) -> SessionKeys:
        """Where the session's keys are."""

    @property
    def sender(self) -> TxnSender:
        """The session's Txns (each compares its record) and reads."""


class HoldsHome(PartHome, Protocol):
    """What :class:`~tenure.backends.etcd._holds.Holds` asks of its home."""

    @property
    def session(self) -> BoundSession:
        """The session (its ledger, its loss)."""

    @property
    def record(self) -> SessionRecord:
        """The session's record (why it is gone, if it is)."""

    @property
    def conn(self) -> EtcdClient:
        """The client's channel to etcd (reads of many semaphores at once)."""


class SingleWaiterHome(HoldsHome, Protocol):
    """What :class:`~tenure.backends.etcd._wait.SingleWaiter` asks of its home."""

    @property
    def feeds(self) -> Feeds:
        """The client's feeds of semaphores its requests wait on."""


class SetWaiterHome(SingleWaiterHome, Protocol):
    """What :class:`~tenure.backends.etcd._set_wait.SetWaiter` asks of its home."""

    async def release(self, name: str, hold: int) -> bool:
        """Delete every key of hold ``hold`` of ``name`` (both marks); whether any was."""


class ClaimsHome(HoldsHome, Protocol):
    """What :class:`~tenure.backends.etcd._claims.Claims` asks of its home."""

    @property
    def view(self) -> NodeView:
        """The client's view of the node (its settings)."""


class SetAcquirerHome(ClaimsHome, Protocol):
    """What :class:`~tenure.backends.etcd._set.SetAcquirer` asks of its home."""

    @property
    def hints(self) -> Hints:
        """The client's guesses about semaphores."""

    @property
    def turns(self) -> Turns[bytes]:
        """Whose turn it is to join each semaphore's queue, of this client's requests."""


class SingleAcquirerHome(PartHome, Protocol):
    """What :class:`~tenure.backends.etcd._acquire.SingleAcquirer` asks of its home."""

    @property
    def session(self) -> BoundSession:
        """The session (its ledger, its loss)."""

    @property
    def record(self) -> SessionRecord:
        """The session's record (its fence, compared by a nested Txn)."""

    @property
    def view(self) -> NodeView:
        """The client's view of the node (its settings)."""

    @property
    def hints(self) -> Hints:
        """The client's guesses about semaphores."""

    @property
    def turns(self) -> Turns[bytes]:
        """Whose turn it is to join each semaphore's queue, of this client's requests."""

    async def release(self, name: str, hold: int) -> bool:
        """Delete every key of hold ``hold`` of ``name`` (both marks); whether any was."""


class EtcdWatchHome(PartHome, Protocol):
    """What an :class:`~tenure.backends.etcd._watch.EtcdWatch` asks of its home."""

    @property
    def conn(self) -> EtcdClient:
        """The client's channel to etcd (who owns and waits: sessions' records)."""

    @property
    def hub(self) -> WatchHub:
        """The client's one watch stream."""


class PrefixWatchHome(Protocol):
    """What an :class:`~tenure.backends.etcd._prefix_watch.EtcdPrefixWatch` asks of its
    home."""

    @property
    def session(self) -> BoundSession:
        """The session (its end ends the arming)."""

    @property
    def keys(self) -> SessionKeys:
        """Where the session's keys are."""

    @property
    def hub(self) -> WatchHub:
        """The client's one watch stream."""


class AdminHome(EtcdWatchHome, PrefixWatchHome, Protocol):
    """What :class:`~tenure.backends.etcd._admin.Admin` asks of its home (and its
    watches of theirs)."""

    @property
    def hints(self) -> Hints:
        """The client's guesses about semaphores (a deleted one's forgotten)."""

    def tell_deleted(self, name: str) -> None:
        """``name`` was deleted by force here: this client's holders of it hear it now."""
