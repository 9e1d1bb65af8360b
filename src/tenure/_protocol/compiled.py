"""The schema's fast path: each field compiled once into one plain function per direction.

The fields of :mod:`tenure._protocol.schema` are the reference: they check one value
at a time through method calls and wrap every step in ``try`` so that a failure
names its path. That costs more than everything else a request does, twice per
request on each side. :func:`compile_dump` and :func:`compile_load` turn a field into
straight-line code instead (one generated function per record, the common scalar
checks inlined) that accepts and returns exactly what the reference does.

Failures stay the reference's: when the fast code meets anything it does not expect
(a wrong type, a value out of range, an unknown tag), it hands the whole value to
the reference field, which raises the :class:`~tenure._protocol.schema.SchemaError`
with the full path. So the fast path only has to be right about values that are
valid; tests/protocol/test_compiled.py checks it against the reference on generated
messages, valid and not.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Callable
from typing import Any, Final

from tenure._protocol import schema
from tenure._protocol.payloads import VALUE
from tenure._protocol.schema import (
    BIN,
    BOOL,
    FLOAT,
    MAX_UINT,
    STR,
    UINT,
    ArrayOf,
    EnumField,
    Field,
    Optional,
    Record,
    SchemaError,
    Union,
)

__all__ = ["compile_dump", "compile_load"]

Convert = Callable[[object], object]

# The inlined check of each common scalar, as an expression over the variable {v}
# (assigned from {src} first). Anything unusual falls through to the reference check,
# which returns the same value for what is valid and raises for what is not.
_INLINE: Final[dict[int, str]] = {
    id(UINT): "({v} if type({v} := {src}) is int and 0 <= {v} <= MAX_UINT else _uint({v}))",
    id(BOOL): "({v} if ({v} := {src}) is True or {v} is False else _bool({v}))",
    id(BIN): "({v} if type({v} := {src}) is bytes else _bin({v}))",
    id(STR): "({v} if type({v} := {src}) is str and {v}.isascii() else _str({v}))",
    id(FLOAT): "({v} if type({v} := {src}) is float and {v} - {v} == 0.0 else _float({v}))",
}
_GLOBALS: Final[dict[str, object]] = {
    "MAX_UINT": MAX_UINT,
    "SchemaError": SchemaError,
    "_uint": schema._uint,
    "_bool": schema._bool,
    "_bin": schema._bin,
    "_str": schema._str,
    "_float": schema._float,
}

_NOTHING: Final = object()  # the key of an empty memo: no value is it
_dumps: dict[int, Convert] = {}
_loads: dict[int, Convert] = {}
_record_loads: dict[int, Callable[[list[object], int], object]] = {}


def compile_dump(field: Field) -> Convert:
    """A function equal to ``field.dump`` (same results, same errors), only faster."""
    found = _dumps.get(id(field))
    if found is None:
        found = _dumps[id(field)] = _make_dump(field)
    return found


def compile_load(field: Field) -> Convert:
    """A function equal to ``field.load`` (same results, same errors), only faster."""
    found = _loads.get(id(field))
    if found is None:
        found = _loads[id(field)] = _make_load(field)
    return found


# -- generated code ---------------------------------------------------------------------


class _Source:
    """The expressions of one generated function, and the names they refer to."""

    def __init__(self) -> None:
        self.names: dict[str, object] = dict(_GLOBALS)
        self._counter = itertools.count()

    def bind(self, value: object) -> str:
        name = f"_f{next(self._counter)}"
        self.names[name] = value
        return name

    def expression(self, field: Field, src: str, compile_one: Callable[[Field], Convert]) -> str:
        template = _INLINE.get(id(field))
        var = f"_x{next(self._counter)}"
        if template is not None:
            return template.format(v=var, src=src)
        if isinstance(field, Optional):
            inner = self.expression(field.inner, var, compile_one)
            return f"(None if ({var} := {src}) is None else {inner})"
        return f"{self.bind(compile_one(field))}({src})"

    def define(self, name: str, code: str) -> Any:
        namespace: dict[str, object] = {}
        exec(compile(code, f"<tenure schema: {name}>", "exec"), self.names, namespace)
        return namespace[name]


def _record_dump(record: Record) -> Convert:
    source = _Source()
    cls, reference = source.bind(record.cls), source.bind(record.dump)
    # Only records that gained fields trim their dump (see schema.Record): no call
    # more for the others, which are every record on the hot path.
    trim = source.bind(record.trim) if record.since != len(record.fields) else ""
    # The last value dumped and its dump, swapped as one tuple (threads may share
    # this). The records are frozen, so the same object dumps the same: a watch
    # firing's one description, pushed to a thousand watchers, is dumped once.
    memo = source.bind([(_NOTHING, None)])
    head = [] if record.tag is None else [repr(record.tag)]
    items = head + [
        source.expression(field, f"value.{name}", compile_dump) for name, field in record.fields
    ]
    code = (
        "def dump(value):\n"
        f"    last = {memo}[0]\n"
        "    if last[0] is value:\n"
        "        return last[1]\n"
        f"    if type(value) is {cls}:\n"
        "        try:\n"
        f"            out = {trim}([{', '.join(items)}])\n"
        "        except SchemaError:\n"
        "            pass\n"
        "        else:\n"
        f"            {memo}[0] = (value, out)\n"
        "            return out\n"
        f"    return {reference}(value)\n"
    )
    dump: Convert = source.define("dump", code)
    return dump


def _record_load_items(record: Record) -> Callable[[list[object], int], object]:
    found = _record_loads.get(id(record))
    if found is not None:
        return found
    source = _Source()
    cls, reference = source.bind(record.cls), source.bind(record.load_items)
    args = [
        source.expression(field, f"items[start + {index}]", compile_load)
        for index, (_name, field) in enumerate(record.fields)
    ]
    code = (
        "def load_items(items, start):\n"
        f"    if len(items) - start == {len(record.fields)}:\n"
        "        try:\n"
        f"            return {cls}({', '.join(args)})\n"
        "        except SchemaError:\n"
        "            pass\n"
        f"    return {reference}(items, start)\n"
    )
    made: Callable[[list[object], int], object] = source.define("load_items", code)
    _record_loads[id(record)] = made
    return made


# -- each kind of field -----------------------------------------------------------------


def _make_dump(field: Field) -> Convert:
    if id(field) in _INLINE and isinstance(field, schema._Scalar):
        return field._check
    if isinstance(field, Record):
        return _record_dump(field)
    if isinstance(field, Union):
        return _union_dump(field)
    if isinstance(field, Optional):
        inner = compile_dump(field.inner)
        return lambda value: None if value is None else inner(value)
    if isinstance(field, EnumField):
        return _enum_dump(field)
    if isinstance(field, ArrayOf):
        return _array_dump(field)
    if field is VALUE:
        return _value_dump()
    return field.dump


def _make_load(field: Field) -> Convert:
    if id(field) in _INLINE and isinstance(field, schema._Scalar):
        return field._check
    if isinstance(field, Record):
        load_items, reference = _record_load_items(field), field.load

        def load_record(raw: object) -> object:
            return load_items(raw, 0) if type(raw) is list else reference(raw)

        return load_record
    if isinstance(field, Union):
        return _union_load(field)
    if isinstance(field, Optional):
        inner = compile_load(field.inner)
        return lambda raw: None if raw is None else inner(raw)
    if isinstance(field, EnumField):
        return _enum_load(field)
    if isinstance(field, ArrayOf):
        return _array_load(field)
    if field is VALUE:
        return _value_load()
    return field.load


def _union_dump(union: Union) -> Convert:
    by_type = {cls: compile_dump(record) for cls, record in union.by_type.items()}
    reference = union.dump

    def dump(value: object) -> object:
        fast = by_type.get(type(value))
        if fast is not None:
            try:
                return fast(value)
            except SchemaError:
                pass
        return reference(value)  # raises, with the variant in the path

    return dump


def _union_load(union: Union) -> Convert:
    by_tag = {tag: _record_load_items(record) for tag, record in union.by_tag.items()}
    reference = union.load

    def load(raw: object) -> object:
        if type(raw) is list and raw:
            tag = raw[0]
            fast = by_tag.get(tag) if type(tag) is int else None
            if fast is not None:
                try:
                    return fast(raw, 1)
                except SchemaError:
                    pass
        return reference(raw)

    return load


def _enum_dump(field: EnumField[Any]) -> Convert:
    numbers: dict[enum.Enum, int] = field._numbers
    kinds = {type(member) for member in numbers}
    reference = field.dump

    def dump(value: object) -> object:
        if type(value) in kinds and value in numbers:
            return numbers[value]
        return reference(value)

    return dump


def _enum_load(field: EnumField[Any]) -> Convert:
    members: dict[int, enum.Enum] = field._members
    reference = field.load

    def load(raw: object) -> object:
        if type(raw) is int and raw in members:
            return members[raw]
        return reference(raw)

    return load


def _array_dump(field: ArrayOf) -> Convert:
    inner, reference = compile_dump(field.inner), field.dump

    def dump(value: object) -> object:
        if type(value) is tuple or type(value) is list:
            try:
                return [inner(item) for item in value]
            except SchemaError:
                pass
        return reference(value)

    return dump


def _array_load(field: ArrayOf) -> Convert:
    inner, reference = compile_load(field.inner), field.load

    def load(raw: object) -> object:
        if type(raw) is list:
            try:
                return tuple([inner(item) for item in raw])
            except SchemaError:
                pass
        return reference(raw)

    return load


def _value_dump() -> Convert:
    """A reply value: nil, a bool, a number (as float64) or a tagged record."""
    records, reference = compile_dump(VALUE.records), VALUE.dump
    to_float = schema._float

    def dump(value: object) -> object:
        if value is None or value is True or value is False:
            return value
        kind = type(value)
        if kind is float or kind is int:
            return to_float(value)
        if kind in VALUE.records.by_type:
            return records(value)
        return reference(value)

    return dump


def _value_load() -> Convert:
    records, reference = compile_load(VALUE.records), VALUE.load
    to_float = schema._float

    def load(raw: object) -> object:
        if raw is None or raw is True or raw is False:
            return raw
        kind = type(raw)
        if kind is float or kind is int:
            return to_float(raw)
        if kind is list:
            return records(raw)
        return reference(raw)

    return load
