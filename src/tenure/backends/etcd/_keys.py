"""Where ``etcd://`` keeps things: the key layout and the values.

Everything lives under the prefix ``P`` (``/tenure/`` by default); node and
semaphore names are percent-encoded (``/`` and ``%`` only), so that one name is
never a prefix of another's keys and each node, semaphore and queue is one range::

    P n/<node>/cfg                         the NodeConfig (no lease)
    P n/<node>/gone/<name>                 a forced delete's marker (put, then deleted)
    P n/<node>/kill/<sid>                  why kill_session ended a session (on a lease of
                                           an hour of its own: its client reads it late)
    P n/<node>/c/<name>                    a live claim (on its at_most or at_least lease): its
                                           id and its leases (:mod:`._claims`)
    P n/<node>/sess/<sid>                  a session (on its lease): description, window, seq,
                                           key (its secret's SHA-256), owner (its client now),
                                           its client's identity and when it was opened
    P n/<node>/s/<name>/rec                a persistent semaphore: limit, data (no lease; a
                                           claim's is on its claim's lease)
    P n/<node>/s/<name>/q/<sid>-<hold>[+]  a request or hold (on the session's lease): count, data,
                                           at (when made; g: true if granted by the Txn that
                                           made it; grp: how many names, of a lock_all's set:
                                           the set's old name, kept for stored keys)
    P n/<node>/s/<name>/g/<sid>-<hold>[+]  the grant of a request that waited (same lease): at
    P n/<node>/s/<name>/p/<sid>-<hold>     a placeholder (same lease, empty): the name is
                                           counted while a lock_all makes its requests
                                           (:mod:`tenure.backends.etcd._set`)

``at`` is a UNIX time by the clock of the client that wrote the key (etcd has no
clock of its own to offer); keys written before tenure 0.14 have none.

Keeping a node's keys under one range makes dropping it one delete, and a
semaphore's keys under one range makes one Range read (at one revision) and one
watch cover its record, queue and grants. ``<sid>`` is the session's lease id in
16 hex digits, ``<hold>`` the hold number in 8; a trailing ``+`` marks a hold's
second request (an upgrade), see :mod:`tenure.backends.etcd._queue`.

Values are msgpack maps. The requests that read and write these keys are built
with :mod:`tenure._etcd.requests`.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote, unquote

import msgpack

__all__ = [
    "Layout",
    "decode",
    "encode",
    "entry_suffix",
    "name_part",
    "parse_suffix",
]

#: A name ``quote`` leaves as it is (its always-safe characters).
_PLAIN: Final = re.compile(r"[A-Za-z0-9_.~-]*")


@functools.lru_cache(maxsize=4096)  # every call of a session builds keys of the same names
def _escape(name: str) -> str:
    return quote(name, safe="")


def name_part(name: str) -> bytes:
    """A semaphore's (or node's) part of its keys: ``name`` %-encoded, then ``/``.

    As :meth:`Layout.semaphore` spells it; most names need no encoding, and are
    told apart by a match rather than looked up (a workload of ever new names would
    only churn the cache).
    """
    if _PLAIN.fullmatch(name):
        return (name + "/").encode()
    return (_escape(name) + "/").encode()


@dataclass(frozen=True, slots=True)
class Layout:
    """The keys of one deployment (one prefix)."""

    prefix: bytes

    def node(self, node: str) -> bytes:
        """The range of everything of ``node``."""
        return self.prefix + f"n/{_escape(node)}/".encode()

    def config(self, node: str) -> bytes:
        """The node's settings."""
        return self.node(node) + b"cfg"

    def gone(self, node: str) -> bytes:
        """The range of the node's forced-delete markers (:mod:`._node`)."""
        return self.node(node) + b"gone/"

    def gone_marker(self, node: str, name: str) -> bytes:
        """The marker a forced delete of ``name`` puts."""
        return self.gone(node) + _escape(name).encode()

    @staticmethod
    def escape(name: str) -> str:
        """A name as its keys spell it (%-encoded; of a prefix, a prefix)."""
        return _escape(name)

    @staticmethod
    def unescape(escaped: str) -> str:
        """The name a key part stands for."""
        return unquote(escaped)

    def killed(self, node: str, sid: int) -> bytes:
        """Why kill_session ended session ``sid`` (read by its client when it finds it gone)."""
        return self.node(node) + f"kill/{sid:016x}".encode()

    def sessions(self, node: str) -> bytes:
        """The range of the node's session records."""
        return self.node(node) + b"sess/"

    def session(self, node: str, sid: int) -> bytes:
        """One session's record (on its lease)."""
        return self.sessions(node) + f"{sid:016x}".encode()

    def claims(self, node: str) -> bytes:
        """The range of the node's live claims (:mod:`._claims`)."""
        return self.node(node) + b"c/"

    def claim(self, node: str, name: str) -> bytes:
        """The key of the live claim of ``name``."""
        return self.claims(node) + _escape(name).encode()

    def semaphores(self, node: str) -> bytes:
        """The range of every semaphore's keys in the node."""
        return self.node(node) + b"s/"

    def semaphore(self, node: str, name: str) -> bytes:
        """The range of one semaphore's keys: record, queue, grants."""
        return self.semaphores(node) + name_part(name)

    def record(self, node: str, name: str) -> bytes:
        """A persistent semaphore's record."""
        return self.semaphore(node, name) + b"rec"

    def queue(self, node: str, name: str) -> bytes:
        """The range of a semaphore's requests."""
        return self.semaphore(node, name) + b"q/"

    def grants(self, node: str, name: str) -> bytes:
        """The range of a semaphore's grants."""
        return self.semaphore(node, name) + b"g/"


def entry_suffix(sid: int, hold: int, upgrade: bool) -> bytes:
    """The last part of a request's (and its grant's) key."""
    return f"{sid:016x}-{hold:08x}{'+' if upgrade else ''}".encode()


def parse_suffix(suffix: bytes) -> tuple[int, int, bool]:
    """``(sid, hold, upgrade)`` of :func:`entry_suffix`."""
    text = suffix.decode()
    upgrade = text.endswith("+")
    sid, hold = text.rstrip("+").split("-")
    return int(sid, 16), int(hold, 16), upgrade


def encode(value: dict[str, Any]) -> bytes:
    """A value as stored."""
    packed: bytes = msgpack.packb(value, use_bin_type=True)
    return packed


def decode(raw: bytes) -> dict[str, Any]:
    """A stored value."""
    value = msgpack.unpackb(raw, raw=False)
    if not isinstance(value, dict):
        raise ValueError("not a map")
    return value
