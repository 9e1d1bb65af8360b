"""The wire schema: every record a msgspec ``Struct``, made to and from a dataclass. [compiled]

msgspec encodes and decodes the frames, in C, straight between msgpack and these
Structs, checking every value on the way in. What this module adds is the mapping
between the Structs and the frozen dataclasses the rest of tenure uses
(:meth:`Field.dump`: dataclass to Struct, :meth:`Field.load`: back), and, when msgspec
refuses a value, the explanation: :meth:`Field.check` walks the plainly decoded value
and raises :class:`WireError` naming the field path (``Request.command(Acquire).count``)
and what is wrong with it, in the spec's words. Only the entry points in
:mod:`tenure._protocol.messages` turn it into a public error: LocalProtocolError when
encoding (our bug) or ProtocolError when decoding (the peer's).

The rules every field follows, so that the spec can state them once:

* integers are exact ``int`` (never bool) and fit msgpack: ``uint`` is 0..2**64-1;
* floats are finite; a ``float`` field also loads a msgpack int (other languages
  may pack ``5`` for ``5.0``) and always dumps a float64;
* ``str`` is UTF-8 text (msgpack str), ``bin`` is bytes (msgpack bin), never mixed;
* records are fixed-length arrays, fields in the order the schema lists them (a
  tagged record is ``[tag, field, ...]``: msgspec's ``array_like`` Struct with an int
  ``tag``); a record that gained fields at its end after its first layout (``since``)
  also loads its older, shorter layout (the missing fields take their defaults), and
  dumps without the gained fields that hold their defaults, so that a peer of an
  older protocol version reads what it always did.

Our own values are checked when encoding by decoding what was encoded, with the same
Structs: what a peer would refuse is never sent.
"""

from __future__ import annotations

import dataclasses
import operator
import types
from collections.abc import Callable, Sequence
from typing import Any, Final

import msgspec

from tenure._protocol.wire_checks import (
    MAX_UINT,
    MIN_INT,
    WireError,
    describe,
    explain,
    plain,
)
from tenure._protocol.wire_fields import (
    BIN,
    BOOL,
    FLOAT,
    STR,
    UINT,
    ArrayOf,
    Convert,
    EnumField,
    Field,
    Optional,
    Secret,
    any_of,
    as_float,
)

__all__ = [
    "BIN",
    "BOOL",
    "FLOAT",
    "MAX_UINT",
    "MIN_INT",
    "STR",
    "UINT",
    "ArrayOf",
    "EnumField",
    "Field",
    "Optional",
    "Record",
    "Secret",
    "Union",
    "WireError",
    "any_of",
    "as_float",
    "describe",
    "explain",
    "plain",
]

_NOTHING: Final = object()  # the key of an empty memo: no value is it


class Record(Field):
    """A dataclass as a fixed-length array of its fields (after ``tag``, if it has one).

    ``since``: how many fields the record's first layout had; the fields after them
    were added later, each with a default in the dataclass (see the module docstring).
    ``struct`` is its msgspec Struct; ``to_wire`` and ``from_wire`` are its ``dump``
    and ``load`` (never None), and ``convert`` dumps a value already known to be a
    ``cls``.
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
        self.name = self.wire = cls.__name__
        self.fields = tuple(fields)
        self.tag = tag
        self.since = len(self.fields) if since is None else since
        defaults = self._gained_defaults()
        # The gained fields have defaults (so the shorter layouts load), the others none.
        spec: list[Any] = [(name, field.annotation) for name, field in self.fields]
        for index, default in enumerate(defaults, self.since):
            spec[index] = (*spec[index], default)
        self.struct = self.annotation = self._struct(spec)
        # The shorter layouts, dumped when the gained fields at the end hold defaults.
        self._shorter = {
            length: self._struct(spec[:length]) for length in range(self.since, len(spec))
        }
        self._defaults = [None] * self.since + defaults
        self.convert = self._make_convert()
        self.to_wire = self.dump = self._make_dump()
        self.from_wire = self.load = self._make_load()

    def _gained_defaults(self) -> list[object]:
        out: list[object] = []
        specs = {spec.name: spec for spec in dataclasses.fields(self.cls)}
        for name, field in self.fields[self.since :]:
            spec = specs[name]
            if spec.default is not dataclasses.MISSING:
                default = spec.default
            else:
                assert spec.default_factory is not dataclasses.MISSING, name
                default = spec.default_factory()
            out.append(default if field.dump is None else field.dump(default))
        return out

    def _struct(self, spec: list[Any]) -> type[msgspec.Struct]:
        return msgspec.defstruct(
            self.name,
            spec,
            module=__name__,
            tag=self.tag,
            array_like=True,
            frozen=True,
            forbid_unknown_fields=True,
            gc=False,  # scalars, Structs and tuples of them: never a reference cycle
        )

    def _make_dump(self) -> Convert:
        cls, convert = self.cls, self.convert

        def checked(value: Any) -> msgspec.Struct:
            if type(value) is not cls:
                raise WireError(f"expected {cls.__name__}, got {type(value).__name__}")
            struct: msgspec.Struct = convert(value)
            return struct

        if self.tag is not None:
            return checked  # a variant of a union: a message's own, never dumped twice
        # The last value dumped and its Struct, swapped as one tuple (threads may share
        # this). The dataclasses are frozen, so the same object dumps the same: a watch
        # firing's one description, pushed to a thousand watchers, is converted once.
        memo: list[tuple[object, Any]] = [(_NOTHING, None)]

        def remembered(value: Any) -> msgspec.Struct:
            last = memo[0]
            if last[0] is value:
                return last[1]  # type: ignore[no-any-return]
            struct = checked(value)
            memo[0] = (value, struct)
            return struct

        return remembered

    def _make_convert(self) -> Convert:
        """The Struct of a value known to be of ``cls`` (no check of its type)."""
        struct, names = self.struct, [name for name, _ in self.fields]
        get: Callable[[Any], Any]
        if not names:  # a record of no fields (ClusterStatus)

            def get(value: Any) -> Any:
                return ()

        else:
            get = operator.attrgetter(*names)
        if len(names) == 1:
            only = get

            def get(value: Any) -> tuple[Any]:
                return (only(value),)

        converts = [(i, field.dump) for i, (_, field) in enumerate(self.fields) if field.dump]
        shorter, defaults, since = self._shorter, self._defaults, self.since

        def convert(value: Any) -> msgspec.Struct:
            items = get(value)
            if converts:
                items = list(items)
                for index, dump in converts:
                    try:
                        items[index] = dump(items[index])
                    except WireError as error:
                        error.within(names[index])
                        raise
            if shorter:
                end = len(items)
                while end > since and items[end - 1] == defaults[end - 1]:
                    end -= 1
                if end < len(items):
                    return shorter[end](*items[:end])
            return struct(*items)

        return convert

    def _make_load(self) -> Convert:
        cls, names = self.cls, [name for name, _ in self.fields]
        converts = [(i, field.load) for i, (_, field) in enumerate(self.fields) if field.load]
        astuple = msgspec.structs.astuple
        build = slot_builder(cls, names)
        if build is None:  # (its __init__ does more than set its fields: it is called)

            def build(items: Sequence[Any]) -> Any:
                return cls(*items)

        def load(value: msgspec.Struct) -> Any:
            if not converts:
                return build(astuple(value))
            items = list(astuple(value))
            for index, convert in converts:
                try:
                    items[index] = convert(items[index])
                except WireError as error:
                    error.within(names[index])
                    raise
            return build(items)

        return load

    def check(self, raw: object) -> None:
        if not isinstance(raw, list):
            raise WireError(f"expected an array ({self.name}), got {describe(raw)}")
        self.check_items(raw, 0)

    def check_items(self, items: list[object], start: int) -> None:
        """Check ``items[start:]`` as this record's fields (a tagged record starts at 1)."""
        given = len(items) - start
        if not self.since <= given <= len(self.fields):
            count = str(len(self.fields))
            if self.since != len(self.fields):
                count = f"{self.since} to {count}"
            raise WireError(f"{self.name} has {count} fields, got {given}")
        for (name, field), raw in zip(self.fields, items[start:], strict=False):
            try:
                field.check(raw)
            except WireError as error:
                error.within(name)
                raise


def slot_builder(cls: type, names: Sequence[str]) -> Callable[[Sequence[Any]], Any] | None:
    """What makes a ``cls`` of its fields' values (in ``names``' order) without calling
    its ``__init__``, or None where that would not make the same object.

    A frozen dataclass's generated ``__init__`` sets each field with
    ``object.__setattr__``, from a frame of its own: decoding a command spent more on
    that than on anything else it does (an Acquire has 12 fields; under callgrind,
    building an Acquire and a Release took 24,400 instructions that way, 16,400 this
    way, in the pure build). Setting each slot through its descriptor makes the same
    object, where ``__init__`` does nothing else: a slotted dataclass whose generated
    ``__init__`` takes exactly ``names`` (no ``__post_init__``, no ``InitVar``, no field
    left out of ``__init__``) and whose ``__new__`` is ``object``'s. Anything else (a
    class of the compiled build's, a hand-written ``__init__``) gets None.
    """
    if not dataclasses.is_dataclass(cls) or "__slots__" not in cls.__dict__:
        return None
    params = getattr(cls, "__dataclass_params__", None)
    every = getattr(cls, "__dataclass_fields__", {})
    fields = dataclasses.fields(cls)
    if (
        params is None
        or not params.init
        or hasattr(cls, "__post_init__")
        or cls.__new__ is not object.__new__
        or len(every) != len(fields)  # (an InitVar or a ClassVar is a pseudo-field)
        or [f.name for f in fields] != list(names)
        or not all(f.init for f in fields)
    ):
        return None
    slots = [_slot_of(cls, name) for name in names]
    if any(slot is None for slot in slots):
        return None
    setters = tuple(slot.__set__ for slot in slots if slot is not None)
    new = object.__new__

    def build(items: Sequence[Any]) -> Any:
        made = new(cls)
        for setter, item in zip(setters, items, strict=True):
            setter(made, item)
        return made

    return build


def _slot_of(cls: type, name: str) -> Any:
    """The member descriptor of slot ``name`` of ``cls`` or of a base (None: none)."""
    for klass in cls.__mro__:
        found = klass.__dict__.get(name)
        if found is not None:
            return found if type(found) is types.MemberDescriptorType else None
    return None


class Union(Field):
    """One of several tagged records, written ``[tag, field, ...]``.

    ``root``: the union is a whole frame body, so the path starts with the record's
    name (``Request.request_id``) instead of naming the variant in parentheses.
    ``to_wire`` and ``from_wire`` are its ``dump`` and ``load`` (never None).
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
        self.annotation = any_of(record.struct for record in records)
        self._root = root
        by_type, segment = self.by_type, self._segment
        by_struct = {record.struct: record.from_wire for record in records}

        # Found by its exact type, a variant's value needs no other check of its type.
        converts = {record.cls: record.convert for record in records}.get

        def dump(value: Any) -> msgspec.Struct:
            convert = converts(type(value))
            if convert is None:
                raise WireError(f"expected a {wire}, got {type(value).__name__}")
            try:
                struct: msgspec.Struct = convert(value)
            except WireError as error:
                error.within(segment(by_type[type(value)]))
                raise
            return struct

        def load(value: msgspec.Struct) -> Any:
            try:
                return by_struct[type(value)](value)
            except WireError as error:
                tag = value.__struct_config__.tag
                assert isinstance(tag, int)
                error.within(segment(self.by_tag[tag]))
                raise

        self.to_wire: Convert = dump
        self.from_wire: Convert = load
        self.dump, self.load = dump, load

    def _segment(self, record: Record) -> str:
        return record.name if self._root else f"({record.name})"

    def check(self, raw: object) -> None:
        if not isinstance(raw, list) or not raw:
            raise WireError(f"expected a tagged array ({self.wire}), got {describe(raw)}")
        tag = raw[0]
        record = self.by_tag.get(tag) if type(tag) is int else None
        if record is None:
            raise WireError(f"unknown {self.wire} tag: {describe(tag)}")
        try:
            record.check_items(raw, 1)
        except WireError as error:
            error.within(self._segment(record))
            raise
