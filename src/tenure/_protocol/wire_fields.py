"""The wire schema's field types: one value's type on the wire, and its checks. [compiled]

A :class:`Field` is one value's wire type, as docs/protocol.md writes it: the scalars
(:data:`UINT`, :data:`FLOAT`, :data:`BOOL`, :data:`STR`, :data:`BIN`), a value or nil
(:class:`Optional`), a credential never shown in an error (:class:`Secret`), an enum
member as a uint (:class:`EnumField`) and an array of one field (:class:`ArrayOf`).
The records and unions made of them, and the rules every field follows, are
:mod:`tenure._protocol.wire`'s.
"""

from __future__ import annotations

import abc
import enum
import functools
import operator
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Annotated, Any, Final, Generic, Literal, TypeVar

import msgspec

from tenure._protocol.wire_checks import (
    WireError,
    check_bin,
    check_bool,
    check_float,
    check_str,
    check_uint,
    describe,
)

__all__ = [
    "BIN",
    "BOOL",
    "FLOAT",
    "STR",
    "UINT",
    "ArrayOf",
    "Convert",
    "EnumField",
    "Field",
    "Optional",
    "Secret",
    "any_of",
    "as_float",
]

# msgspec's types of the scalars. A uint needs no upper bound: msgpack has no larger
# integer, and msgspec refuses to encode one. NaN fails both bounds of a float.
_UINT: Final = Annotated[int, msgspec.Meta(ge=0)]
_FLOAT: Final = Annotated[float, msgspec.Meta(ge=-sys.float_info.max, le=sys.float_info.max)]

E = TypeVar("E", bound=enum.Enum)
#: A value's conversion between the dataclasses' form and the Struct's (a dump, a load).
Convert = Callable[[Any], Any]


def any_of(types: Iterable[Any]) -> Any:
    """The union of ``types`` (msgspec's type of a field that holds any one of them)."""
    return functools.reduce(operator.or_, types)


class Field(abc.ABC):
    """One value's wire type.

    ``wire`` is how docs/protocol.md writes it and ``annotation`` its msgspec type.
    ``dump`` turns the dataclasses' value into the Struct's and ``load`` back; None
    where they are the same value (the scalars), so that records skip the call.
    """

    wire: str
    annotation: Any
    dump: Convert | None = None
    load: Convert | None = None

    @abc.abstractmethod
    def check(self, raw: object) -> None:
        """Raise WireError if ``raw`` (plainly decoded msgpack) does not fit (the cold path)."""


class _Scalar(Field):
    """A field whose Python and msgpack forms are the same value."""

    def __init__(self, wire: str, annotation: Any, check: Callable[[object], None]) -> None:
        self.wire = wire
        self.annotation = annotation
        self._check = check

    def check(self, raw: object) -> None:
        self._check(raw)


def as_float(value: Any) -> Any:
    """A float field's value as it is dumped: an int as the float64 it stands for."""
    if type(value) is int:
        try:
            return float(value)
        except OverflowError:
            raise WireError(f"{value} is too large for a float") from None
    return value


UINT: Final[Field] = _Scalar("uint", _UINT, check_uint)
FLOAT: Final[Field] = _Scalar("float", _FLOAT, check_float)
FLOAT.dump = as_float
BOOL: Final[Field] = _Scalar("bool", bool, check_bool)
STR: Final[Field] = _Scalar("str", str, check_str)
BIN: Final[Field] = _Scalar("bin", bytes, check_bin)


class Optional(Field):
    """``nil`` or the inner field."""

    def __init__(self, inner: Field) -> None:
        self.inner = inner
        self.wire = f"{inner.wire}|nil"
        self.annotation = any_of([inner.annotation, None])
        dump, load = inner.dump, inner.load
        if dump is as_float:
            self.dump = as_float  # it passes None as it is: one call less per float|nil
        elif dump is not None:
            self.dump = lambda value: None if value is None else dump(value)
        if load is not None:
            self.load = lambda value: None if value is None else load(value)

    def check(self, raw: object) -> None:
        if raw is not None:
            self.inner.check(raw)


class Secret(Field):
    """The inner field, holding a credential: its value is never in an error message.

    An error about a field is logged by the server (a peer's malformed message): a
    token sent as the wrong type (msgpack ``bin`` instead of ``str``, an int...) must
    not reach the log in clear, so the error names the type it got, never the value.
    """

    def __init__(self, inner: Field) -> None:
        self.inner = inner
        self.wire = inner.wire
        self.annotation = inner.annotation
        self.dump, self.load = inner.dump, inner.load

    def check(self, raw: object) -> None:
        try:
            self.inner.check(raw)
        except WireError:
            kind = describe(raw).split(" ", 1)[0]
            raise WireError(
                f"expected {self.wire}, got {kind} (its value is not shown: a credential)"
            ) from None


class EnumField(Field, Generic[E]):
    """An enum member as a uint. Unknown numbers load as ``unknown`` if one is given.

    (ErrorCode uses that: new codes are only ever added, and an older peer must not
    fail on a newer code; it sees it as INTERNAL, as ``error_from_code`` would.)
    """

    def __init__(self, wire: str, numbers: Mapping[E, int], *, unknown: E | None = None) -> None:
        self.wire = wire
        self.numbers = dict(numbers)
        self.members = {number: member for member, number in numbers.items()}
        kinds = {type(member) for member in numbers}
        self.annotation = _UINT if unknown is not None else Literal[tuple(self.members)]
        by_number, members, known = self.numbers, self.members, self.members.get

        def dump(value: Any) -> int:
            if type(value) not in kinds or value not in by_number:
                raise WireError(f"expected a {wire}, got {describe(value)}")
            return by_number[value]

        self.dump = dump
        self.load = (lambda number: known(number, unknown)) if unknown is not None else members.get
        self._unknown = unknown

    def check(self, raw: object) -> None:
        check_uint(raw)
        if self._unknown is None and raw not in self.members:
            raise WireError(f"unknown {self.wire} {raw}")


class ArrayOf(Field):
    """A tuple of values as an array (of any length the frame allows)."""

    def __init__(self, inner: Field) -> None:
        self.inner = inner
        self.wire = f"[{inner.wire}, ...]"
        self.annotation = tuple[inner.annotation, ...]  # type: ignore[name-defined]
        dump, load = inner.dump, inner.load

        def dump_each(values: Any) -> tuple[Any, ...]:
            if not isinstance(values, tuple | list):
                raise WireError(f"expected a tuple, got {describe(values)}")
            if dump is None:
                return tuple(values)
            out = []
            for index, value in enumerate(values):
                try:
                    out.append(dump(value))
                except WireError as error:
                    error.within(f"[{index}]")
                    raise
            return tuple(out)

        self.dump = dump_each
        if load is not None:
            self.load = lambda values: tuple([load(value) for value in values])

    def check(self, raw: object) -> None:
        if not isinstance(raw, list):
            raise WireError(f"expected an array, got {describe(raw)}")
        for index, item in enumerate(raw):
            try:
                self.inner.check(item)
            except WireError as error:
                error.within(f"[{index}]")
                raise
