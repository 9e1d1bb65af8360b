"""Field types of the wire schema: each one checks a value in both directions.

A :class:`Field` ``dump``\\s a Python value into what msgpack packs and ``load``\\s
what msgpack unpacked back into the Python value, checking it first either way. A
value that does not fit raises :class:`SchemaError`, which collects the path of the
field on its way out (``Request.command(Acquire).count``). Only the two entry points
in :mod:`tenure._protocol.messages` turn it into a public error: LocalProtocolError
when encoding (our bug) or ProtocolError when decoding (the peer's).

The rules every field follows, so that the spec can state them once:

* integers are exact ``int`` (never bool) and fit msgpack: ``uint`` is 0..2**64-1;
* floats are finite; a ``float`` field also loads a msgpack int (other languages
  may pack ``5`` for ``5.0``) and always dumps a float64;
* ``str`` is UTF-8 text (msgpack str), ``bin`` is bytes (msgpack bin), never mixed;
* records are fixed-length arrays, fields in the order the schema lists them;
  a record that gained fields at its end after its first layout (``since``) also
  loads its older, shorter layout (the missing fields take their defaults), and
  dumps without the gained fields that hold their defaults, so that a peer of an
  older protocol version reads what it always did.
"""

from __future__ import annotations

import abc
import dataclasses
import enum
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Final, Generic, TypeVar

__all__ = [
    "BIN",
    "BOOL",
    "FLOAT",
    "MAX_UINT",
    "MIN_INT",
    "SCALAR_MAP",
    "STR",
    "UINT",
    "ArrayOf",
    "EnumField",
    "Field",
    "Optional",
    "Record",
    "SchemaError",
    "Union",
    "describe",
]

#: The largest msgpack integer (uint 64); MAX_COUNT is exactly this.
MAX_UINT: Final = 2**64 - 1
#: The smallest msgpack integer (int 64).
MIN_INT: Final = -(2**63)

E = TypeVar("E", bound=enum.Enum)


class SchemaError(Exception):
    """A value does not fit its field. ``path`` names the field, outermost first."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.path: list[str] = []

    def within(self, segment: str) -> None:
        """Record that the failing value sits inside ``segment`` (called on the way out)."""
        self.path.insert(0, segment)

    @property
    def where(self) -> str:
        """The path as text: ``Reply.value(DescribeResult).description.owners[0].token``."""
        text = ""
        for segment in self.path:
            joined = not text or segment.startswith(("[", "("))
            text += segment if joined else "." + segment
        return text

    def __str__(self) -> str:
        return f"{self.where}: {self.reason}" if self.path else self.reason


def describe(value: object) -> str:
    """A short description of a value for error messages, in msgpack's terms."""
    names = {type(None): "nil", bytes: "bin", list: "array", dict: "map", tuple: "array"}
    kind = names.get(type(value), type(value).__name__)
    if value is None or isinstance(value, list | dict | tuple):
        return kind
    text = repr(value)
    return f"{kind} {text if len(text) <= 40 else text[:37] + '...'}"


class Field(abc.ABC):
    """One value's wire type. ``wire`` is how docs/protocol.md writes it."""

    wire: str

    @abc.abstractmethod
    def dump(self, value: object) -> object:
        """Check a Python value and return what msgpack should pack."""

    @abc.abstractmethod
    def load(self, raw: object) -> object:
        """Check a value msgpack unpacked and return the Python value."""


class _Scalar(Field):
    """A field whose Python and msgpack forms are the same: one check both ways."""

    def __init__(self, wire: str, check: Callable[[object], object]) -> None:
        self.wire = wire
        self._check = check

    def dump(self, value: object) -> object:
        return self._check(value)

    def load(self, raw: object) -> object:
        return self._check(raw)


def _uint(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise SchemaError(f"expected an unsigned integer, got {describe(value)}")
    if not 0 <= value <= MAX_UINT:
        raise SchemaError(f"{value} is outside 0..2**64-1")
    return int(value)


def _float(value: object) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise SchemaError(f"expected a number, got {describe(value)}")
    try:
        number = float(value)
    except OverflowError:
        raise SchemaError(f"{value} is too large for a float") from None
    if not math.isfinite(number):
        raise SchemaError(f"expected a finite number, got {number!r}")
    return number


def _bool(value: object) -> bool:
    if not isinstance(value, bool):
        raise SchemaError(f"expected a bool, got {describe(value)}")
    return value


def _str(value: object) -> str:
    if not isinstance(value, str):
        raise SchemaError(f"expected a str, got {describe(value)}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise SchemaError("str is not valid UTF-8 (it holds a lone surrogate)") from None
    return value


def _bin(value: object) -> bytes:
    if not isinstance(value, bytes):
        raise SchemaError(f"expected bin (bytes), got {describe(value)}")
    return value


def _scalar(value: object) -> object:
    """Any one of nil, bool, int, float or str (the values of a node setting)."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if not MIN_INT <= value <= MAX_UINT:
            raise SchemaError(f"{value} does not fit a msgpack integer")
        return int(value)
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, str):
        return _str(value)
    raise SchemaError(f"expected nil, bool, int, float or str, got {describe(value)}")


UINT: Final[Field] = _Scalar("uint", _uint)
FLOAT: Final[Field] = _Scalar("float", _float)
BOOL: Final[Field] = _Scalar("bool", _bool)
STR: Final[Field] = _Scalar("str", _str)
BIN: Final[Field] = _Scalar("bin", _bin)


class Optional(Field):
    """``nil`` or the inner field."""

    def __init__(self, inner: Field) -> None:
        self.inner = inner
        self.wire = f"{inner.wire}|nil"

    def dump(self, value: object) -> object:
        return None if value is None else self.inner.dump(value)

    def load(self, raw: object) -> object:
        return None if raw is None else self.inner.load(raw)


class EnumField(Field, Generic[E]):
    """An enum member as a uint. Unknown numbers load as ``unknown`` if one is given.

    (ErrorCode uses that: new codes are only ever added, and an older peer must not
    fail on a newer code; it sees it as INTERNAL, as ``error_from_code`` would.)
    """

    def __init__(
        self,
        wire: str,
        numbers: Mapping[E, int],
        *,
        unknown: E | None = None,
    ) -> None:
        self.wire = wire
        self._numbers = dict(numbers)
        self._members = {number: member for member, number in numbers.items()}
        self._unknown = unknown

    def dump(self, value: object) -> object:
        if not isinstance(value, enum.Enum) or value not in self._numbers:
            raise SchemaError(f"expected a {self.wire}, got {describe(value)}")
        return self._numbers[value]

    def load(self, raw: object) -> object:
        number = _uint(raw)
        member = self._members.get(number, self._unknown)
        if member is None:
            raise SchemaError(f"unknown {self.wire} {number}")
        return member


class Record(Field):
    """A dataclass as a fixed-length array of its fields (after ``tag``, if it has one).

    ``since``: how many fields the record's first layout had; the fields after them
    were added later, each with a default in the dataclass. Such a record loads any
    length from ``since`` on (the missing fields take their defaults), and dumps
    without the trailing added fields that hold their defaults (see the module
    docstring).
    """

    def __init__(
        self,
        cls: type,
        fields: Sequence[tuple[str, Field]],
        *,
        tag: int | None = None,
        since: int | None = None,
    ) -> None:
        self.cls = cls
        self.name = cls.__name__
        self.fields = tuple(fields)
        self.tag = tag
        self.wire = self.name
        self.since = len(self.fields) if since is None else since
        self._added_defaults: list[object] | None = None

    def added_defaults(self) -> list[object]:
        """The dumped defaults of the fields added after ``since`` (computed once)."""
        if self._added_defaults is None:
            defaults = {f.name: f for f in dataclasses.fields(self.cls)}
            dumped = []
            for name, field in self.fields[self.since :]:
                spec = defaults[name]
                if spec.default is not dataclasses.MISSING:
                    default = spec.default
                else:
                    assert spec.default_factory is not dataclasses.MISSING, name
                    default = spec.default_factory()
                dumped.append(field.dump(default))
            self._added_defaults = dumped
        return self._added_defaults

    def trim(self, items: list[object]) -> list[object]:
        """``items`` (a dump) without the trailing added fields that hold their defaults."""
        if self.since == len(self.fields):
            return items
        defaults = self.added_defaults()
        head = len(items) - len(self.fields)  # 1 for a tagged record, else 0
        while len(items) > head + self.since:
            if items[-1] != defaults[len(items) - head - self.since - 1]:
                break
            items.pop()
        return items

    def dump(self, value: object) -> object:
        if type(value) is not self.cls:
            raise SchemaError(f"expected {self.name}, got {type(value).__name__}")
        items: list[object] = [] if self.tag is None else [self.tag]
        for name, field in self.fields:
            try:
                items.append(field.dump(getattr(value, name)))
            except SchemaError as error:
                error.within(name)
                raise
        return self.trim(items)

    def load(self, raw: object) -> object:
        if not isinstance(raw, list):
            raise SchemaError(f"expected an array ({self.name}), got {describe(raw)}")
        return self.load_items(raw, 0)

    def load_items(self, items: list[object], start: int) -> object:
        """Build the dataclass from ``items[start:]`` (a tagged record starts at 1)."""
        given = len(items) - start
        if not self.since <= given <= len(self.fields):
            count = str(len(self.fields))
            if self.since != len(self.fields):
                count = f"{self.since} to {count}"
            raise SchemaError(f"{self.name} has {count} fields, got {given}")
        values: list[object] = []
        for (name, field), raw in zip(self.fields, items[start:], strict=False):
            try:
                values.append(field.load(raw))
            except SchemaError as error:
                error.within(name)
                raise
        return self.cls(*values)


class Union(Field):
    """One of several tagged records, written ``[tag, field, ...]``.

    ``root``: the union is a whole frame body, so the path starts with the record's
    name (``Request.request_id``) instead of naming the variant in parentheses.
    """

    def __init__(self, wire: str, records: Sequence[Record], *, root: bool = False) -> None:
        self.wire = wire
        self.records = tuple(records)
        self.by_tag: dict[int, Record] = {}
        for record in records:
            if record.tag is None or record.tag in self.by_tag:
                raise ValueError(f"{wire}: tag of {record.name} is missing or reused")
            self.by_tag[record.tag] = record
        self.by_type = {record.cls: record for record in records}
        self._root = root

    def _segment(self, record: Record) -> str:
        return record.name if self._root else f"({record.name})"

    def dump(self, value: object) -> object:
        record = self.by_type.get(type(value))
        if record is None:
            raise SchemaError(f"expected a {self.wire}, got {type(value).__name__}")
        try:
            return record.dump(value)
        except SchemaError as error:
            error.within(self._segment(record))
            raise

    def load(self, raw: object) -> object:
        if not isinstance(raw, list) or not raw:
            raise SchemaError(f"expected a tagged array ({self.wire}), got {describe(raw)}")
        tag = raw[0]
        record = self.by_tag.get(tag) if type(tag) is int else None
        if record is None:
            raise SchemaError(f"unknown {self.wire} tag: {describe(tag)}")
        try:
            return record.load_items(raw, 1)
        except SchemaError as error:
            error.within(self._segment(record))
            raise


class ArrayOf(Field):
    """A tuple of records as an array (of any length the frame allows)."""

    def __init__(self, inner: Field) -> None:
        self.inner = inner
        self.wire = f"[{inner.wire}, ...]"

    def dump(self, value: object) -> object:
        if not isinstance(value, tuple | list):
            raise SchemaError(f"expected a tuple, got {describe(value)}")
        return self._each(value, self.inner.dump)

    def load(self, raw: object) -> object:
        if not isinstance(raw, list):
            raise SchemaError(f"expected an array, got {describe(raw)}")
        return tuple(self._each(raw, self.inner.load))

    @staticmethod
    def _each(items: Sequence[object], convert: Callable[[object], object]) -> list[object]:
        out: list[object] = []
        for index, item in enumerate(items):
            try:
                out.append(convert(item))
            except SchemaError as error:
                error.within(f"[{index}]")
                raise
        return out


class _ScalarMap(Field):
    """A map from str to scalars (nil, bool, int, float, str): AlterNode's changes."""

    wire = "map<str, nil|bool|int|float|str>"

    def dump(self, value: object) -> object:
        if not isinstance(value, Mapping):
            raise SchemaError(f"expected a mapping, got {describe(value)}")
        return self._check(value)

    def load(self, raw: object) -> object:
        if not isinstance(raw, dict):
            raise SchemaError(f"expected a map, got {describe(raw)}")
        return self._check(raw)

    @staticmethod
    def _check(items: Mapping[object, object]) -> dict[str, object]:
        out: dict[str, object] = {}
        for key, value in items.items():
            try:
                out[_str(key)] = _scalar(value)
            except SchemaError as error:
                label = repr(key) if isinstance(key, str) and len(key) <= 40 else describe(key)
                error.within(f"[{label}]")
                raise
        return out


SCALAR_MAP: Final[Field] = _ScalarMap()
