"""What the parts of one etcd session (acquiring, waiting, holds, administration, watches)
may use of it: a narrow protocol, so none of them imports the store that composes them."""

from __future__ import annotations

from typing import Protocol

from tenure._etcd.client import EtcdClient
from tenure._etcd.streams import WatchHub
from tenure.backends._store import Owner
from tenure.backends._turns import Turns
from tenure.backends.etcd._feed import Feeds
from tenure.backends.etcd._hints import Hints
from tenure.backends.etcd._keys import Layout
from tenure.backends.etcd._node import NodeView
from tenure.backends.etcd._record import Record
from tenure.backends.etcd._txns import TxnSender

__all__ = ["Armed", "SessionParts"]


class Armed(Protocol):
    """An armed watch of a session (a semaphore's or a prefix's), as the session's end
    sees it: counted against max_watches_per_session, failed when the session ends."""

    def fail(self, error: BaseException) -> None:
        """The session ended: the watch's consumer hears ``error``."""


class SessionParts(Protocol):
    """One session on etcd as its parts see it."""

    @property
    def node(self) -> str:
        """The session's node."""

    @property
    def lease_id(self) -> int:
        """The session's lease: its id, and what its keys are put on."""

    @property
    def conn(self) -> EtcdClient:
        """The client's channel to etcd."""

    @property
    def layout(self) -> Layout:
        """Where the keys are."""

    @property
    def owner(self) -> Owner:
        """The session (its ledger, its loss)."""

    @property
    def record(self) -> Record:
        """The session's record."""

    @property
    def sender(self) -> TxnSender:
        """The session's Txns."""

    @property
    def view(self) -> NodeView:
        """The client's view of the node."""

    @property
    def hints(self) -> Hints:
        """The client's guesses about semaphores."""

    @property
    def feeds(self) -> Feeds:
        """The client's feeds of semaphores its requests wait on."""

    @property
    def hub(self) -> WatchHub:
        """The client's one watch stream."""

    @property
    def turns(self) -> Turns[bytes]:
        """Whose turn it is to join each semaphore's queue, of this client's requests."""

    def prefix(self, name: str) -> bytes:
        """The range of semaphore ``name``'s keys: record, queue, grants."""

    def suffix(self, hold: int, upgrade: bool = False) -> bytes:
        """The last part of hold ``hold``'s request key (and its grant's)."""

    async def release(self, name: str, hold: int) -> bool:
        """Delete every key of hold ``hold`` of ``name`` (both marks); whether any was."""

    def tell_deleted(self, name: str) -> None:
        """``name`` was deleted by force here: this client's holders of it hear it now."""
