"""Where a cluster keeps things in etcd: the key layout and the values.

Every cluster lives under ``P = <prefix>c/<name>/`` (``<prefix>``: ``?prefix=`` of
``--cluster``, ``/tenure/`` by default; ``<name>``: the URL's path), so several
clusters, and the ``etcd://`` backend's keys (``<prefix>n/...``), share one etcd; a cell
of the service other than ``default`` under ``P = <prefix>c/<name>@<cell>/`` (in its
``--cell-etcd``, if it has one; the service's directory: :mod:`.directory`)::

    P id                        the cluster's instance id (16 bytes, made once)
    P secret                    what the faces sign with (32 bytes, made once): the
                                same on every member, so a token or a ticket one
                                leader handed out is good on the next
    P leader/<lease>            a candidate: its lease (16 hex digits), on that lease;
                                the lowest create_revision leads, and that revision is
                                its term (etcd's concurrency.Election)
    P members/<name>            a member's record, on its lease: role, addresses, the
                                last log index its engine holds, when it wrote this
    P log/<index>               one log entry (20 digits): the term that appended it and
                                journal records (each length, crc32, payload, as in the
                                data directory's log)
    P snapshot                  the newest snapshot: the index it covers, its term,
                                how many chunks, its size and crc32
    P chunks/<index>-<term>/<n> the snapshot's bytes, in chunks (6 digits)

Values are msgpack arrays (:class:`LogEntry`, :class:`Pointer`, a :class:`ServerRecord` as
:class:`StoredMember`), decoded into typed structs; an unreadable one is
:class:`ClusterDataError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field, replace
from typing import Final, TypeVar
from urllib.parse import quote

import msgspec

from tenure.errors import CorruptLogError
from tenure.server._config.cluster_settings import DEFAULT_CELL

__all__ = [
    "DEFAULT_CELL",
    "FIELD_FACES",
    "INDEX_DIGITS",
    "ClusterDataError",
    "ClusterKeys",
    "LogEntry",
    "ServerRecord",
    "Pointer",
    "StoredMember",
    "decode_entry",
    "decode_member",
    "decode_pointer",
    "encode",
]

T = TypeVar("T")

#: Digits of a log index in its key: keys sort as the indexes do.
INDEX_DIGITS: Final = 20


class ClusterDataError(CorruptLogError):
    """A value under the cluster's prefix cannot be read (damaged, or written by
    something else): the cluster's state cannot be trusted, as a damaged log's."""

    def __init__(self, problem: str) -> None:
        super().__init__("etcd", None, problem)


@dataclass(frozen=True, slots=True)
class ClusterKeys:
    """The keys of one cluster (module docstring)."""

    root: bytes  # P

    @classmethod
    def of(cls, prefix: str, cluster: str) -> ClusterKeys:
        """The keys of cluster ``cluster`` under ``prefix``."""
        return cls(f"{prefix}c/{quote(cluster, safe='')}/".encode())

    @classmethod
    def of_cell(cls, prefix: str, cluster: str, cell: str) -> ClusterKeys:
        """The keys of cell ``cell`` of service ``cluster`` under ``prefix``: the
        cluster's own for the default cell (a cluster made before cells is that cell),
        ``<prefix>c/<cluster>@<cell>/`` for any other (beside it, never under it)."""
        if cell == DEFAULT_CELL:
            return cls.of(prefix, cluster)
        return cls(f"{prefix}c/{quote(cluster, safe='')}@{quote(cell, safe='')}/".encode())

    @property
    def id(self) -> bytes:
        """The cluster's instance id."""
        return self.root + b"id"

    @property
    def secret(self) -> bytes:
        """The cluster's secret (what the faces sign with)."""
        return self.root + b"secret"

    @property
    def candidates(self) -> bytes:
        """The range of the election's keys."""
        return self.root + b"leader/"

    def candidate(self, lease: int) -> bytes:
        """The election key of the member on ``lease``."""
        return self.candidates + f"{lease:016x}".encode()

    @property
    def members(self) -> bytes:
        """The range of the members' records."""
        return self.root + b"members/"

    def member(self, name: str) -> bytes:
        """One member's record."""
        return self.members + quote(name, safe="").encode()

    @property
    def log(self) -> bytes:
        """The range of the log's entries."""
        return self.root + b"log/"

    def entry(self, index: int) -> bytes:
        """The key of log entry ``index``."""
        return self.log + str(index).zfill(INDEX_DIGITS).encode()

    def index_of(self, key: bytes) -> int:
        """The index of a log entry's key."""
        return int(key[len(self.log) :])

    @property
    def snapshot(self) -> bytes:
        """The newest snapshot's pointer."""
        return self.root + b"snapshot"

    @property
    def all_chunks(self) -> bytes:
        """The range of every snapshot's chunks."""
        return self.root + b"chunks/"

    def chunks(self, index: int, term: int) -> bytes:
        """The range of the chunks of the snapshot at ``index`` written in ``term``."""
        return self.all_chunks + f"{str(index).zfill(INDEX_DIGITS)}-{term}/".encode()

    def chunk(self, index: int, term: int, number: int) -> bytes:
        """One chunk of that snapshot."""
        return self.chunks(index, term) + f"{number:06d}".encode()


class LogEntry(msgspec.Struct, array_like=True, frozen=True):
    """A log entry: the term (the leader's election revision) and framed records."""

    term: int
    records: bytes


class Pointer(msgspec.Struct, array_like=True, frozen=True):
    """The newest snapshot: it holds the state after log entry ``index``."""

    index: int
    term: int
    chunks: int
    size: int
    crc: int


@dataclass(frozen=True, slots=True)
class ServerRecord:
    """A member's record (and a candidate's election value).

    ``address``: its native face as clients reach it (``--advertise``); ``http``: its
    HTTP endpoint's address (empty: none); ``role``: ``leader`` or ``standby``;
    ``applied``: the last log index its engine holds; ``written``: the UNIX time it
    wrote the record (its own clock: for display); ``faces``: the address of each of
    its faces of other lock services as their clients reach it, by face name (the
    face registry's :func:`~tenure.server._faces.advertised`; a face not there: none);
    ``shift``: its wall clock less its monotonic clock, what turns the times of an
    engine it leads into UNIX time (standbys show their replica's times with the
    leader's: its engine's times are on the leader's clock).
    """

    name: str
    address: str
    role: str = ""
    applied: int = 0
    written: float = 0.0
    http: str = ""
    _: KW_ONLY
    faces: Mapping[str, str] = field(default_factory=dict)
    shift: float = 0.0

    def rewritten(self, role: str, applied: int, written: float, shift: float) -> ServerRecord:
        """This record as its member writes it again: its addresses and name kept."""
        return replace(self, role=role, applied=applied, written=written, shift=shift)


#: The faces whose addresses the first layout of a member's record kept in fields of
#: their own (its array's positions 6 and 7, in this order). A record still keeps them
#: there, and every other face's in a map after ``shift``: so that members of either
#: layout read each other's records (stored data keeps its form, as the snapshot's).
FIELD_FACES: Final = ("ydb", "dflockd")


class StoredMember(msgspec.Struct, array_like=True, frozen=True):
    """A :class:`ServerRecord` as stored: its fields in order, :data:`FIELD_FACES`' addresses
    in fields of their own (``field_face_0``, ``field_face_1``), the rest in ``faces``."""

    name: str
    address: str
    role: str = ""
    applied: int = 0
    written: float = 0.0
    http: str = ""
    field_face_0: str = ""
    field_face_1: str = ""
    shift: float = 0.0
    faces: dict[str, str] = {}

    @classmethod
    def of(cls, member: ServerRecord) -> StoredMember:
        """``member`` as stored."""
        first, second = (member.faces.get(name, "") for name in FIELD_FACES)
        others = {name: at for name, at in member.faces.items() if name not in FIELD_FACES}
        return cls(
            member.name,
            member.address,
            member.role,
            member.applied,
            member.written,
            member.http,
            first,
            second,
            member.shift,
            others,
        )

    def member(self) -> ServerRecord:
        """The record this stores (a face with an empty address: none)."""
        faces = dict(zip(FIELD_FACES, (self.field_face_0, self.field_face_1), strict=True))
        faces |= self.faces
        return ServerRecord(
            self.name,
            self.address,
            self.role,
            self.applied,
            self.written,
            self.http,
            faces={name: at for name, at in faces.items() if at},
            shift=self.shift,
        )


_encoder: Final = msgspec.msgpack.Encoder()
_entries: Final = msgspec.msgpack.Decoder(LogEntry)
_pointers: Final = msgspec.msgpack.Decoder(Pointer)
_members: Final = msgspec.msgpack.Decoder(StoredMember)


def encode(value: LogEntry | Pointer | ServerRecord) -> bytes:
    """A value as stored."""
    return _encoder.encode(StoredMember.of(value) if isinstance(value, ServerRecord) else value)


def _decoded(decoder: msgspec.msgpack.Decoder[T], raw: bytes, what: str) -> T:
    try:
        return decoder.decode(raw)
    except msgspec.MsgspecError as error:
        raise ClusterDataError(f"unreadable {what}: {error}") from None


def decode_entry(raw: bytes) -> LogEntry:
    """A log entry as stored (raises :class:`ClusterDataError`)."""
    return _decoded(_entries, raw, "log entry")


def decode_pointer(raw: bytes) -> Pointer:
    """A snapshot pointer as stored (raises :class:`ClusterDataError`)."""
    return _decoded(_pointers, raw, "snapshot pointer")


def decode_member(raw: bytes) -> ServerRecord:
    """A member's record as stored (raises :class:`ClusterDataError`)."""
    return _decoded(_members, raw, "member record").member()
