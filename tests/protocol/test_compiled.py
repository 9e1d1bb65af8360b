"""The compiled fast path of the schema against the reference fields, both directions.

tenure._protocol.compiled promises the same results and the same errors (with the
same paths) as the fields of tenure._protocol.schema; these tests hold it to that
on every sample message, on generated ones, and on each field site of the samples
replaced by values of every wrong kind.
"""

from __future__ import annotations

import enum
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tenure._core.commands import AcquireStatus
from tenure._protocol.compiled import compile_dump, compile_load
from tenure._protocol.messages import MESSAGE, Reply
from tenure._protocol.payloads import COMMAND, EFFECT, VALUE
from tenure._protocol.schema import SchemaError

from .helpers import field_sites, replace_at
from .strategies import commands_, effects_, messages, reply_values, sample_messages

WRONG: list[Any] = [None, True, False, -1, 0, 1.5, float("inf"), "s", "\udc80", b"b"]
WRONG += [[], {}, [1, 2, 3], [99], {"k": []}, 2**64, 2**64 - 1, (1,)]


class Other(enum.Enum):
    """An enum the schema does not know."""

    A = 1


def outcome(convert: Any, value: Any) -> tuple[str, Any]:
    """What ``convert(value)`` does: ("ok", result) or ("error", message with path)."""
    try:
        return "ok", convert(value)
    except SchemaError as error:
        return "error", str(error)


def same_both_ways(field: Any, value: Any) -> None:
    dumped = outcome(field.dump, value)
    assert outcome(compile_dump(field), value) == dumped
    if dumped[0] == "ok":
        loaded = outcome(field.load, dumped[1])
        assert loaded == ("ok", value)
        assert outcome(compile_load(field), dumped[1]) == loaded


def test_every_sample_message_is_the_same_both_ways() -> None:
    for message in sample_messages():
        same_both_ways(MESSAGE, message)


@given(messages)
def test_generated_messages_are_the_same_both_ways(message: Any) -> None:
    same_both_ways(MESSAGE, message)


@given(commands_, effects_, reply_values)
def test_generated_payloads_are_the_same_both_ways(command: Any, effect: Any, value: Any) -> None:
    same_both_ways(COMMAND, command)
    same_both_ways(EFFECT, effect)
    same_both_ways(VALUE, value)


def test_every_wrong_value_at_every_field_site_fails_the_same_way() -> None:
    load = compile_load(MESSAGE)
    checked = 0
    for message in sample_messages():
        wire = MESSAGE.dump(message)
        for _name, path in field_sites(MESSAGE, wire):
            for bad in WRONG:
                changed = replace_at(wire, path, bad)
                reference = outcome(MESSAGE.load, changed)
                assert outcome(load, changed) == reference, (message, path, bad)
                checked += reference[0] == "error"
    assert checked > 1_000  # the replacements did exercise the error paths


def test_wrong_python_values_fail_the_same_way_with_the_same_path() -> None:
    dump = compile_dump(MESSAGE)
    reply = Reply(7, None)
    for bad in [*WRONG, AcquireStatus.GRANTED, object(), Other.A]:
        for field_name in ("request_id", "value"):
            message = Reply(**{"request_id": 7, "value": None, field_name: bad})
            assert outcome(dump, message) == outcome(MESSAGE.dump, message), (field_name, bad)
    assert outcome(dump, object()) == outcome(MESSAGE.dump, object())
    assert outcome(dump, reply) == ("ok", [13, 7, None])


@given(st.integers(), st.floats(), st.binary(max_size=4), st.text(max_size=4))
def test_scalars_at_the_edges_match(number: int, real: float, raw: bytes, text: str) -> None:
    load = compile_load(MESSAGE)
    for value in (number, real, raw, text):
        for wire in ([13, value, None], [13, 7, value], [3, value], [16, value]):
            assert outcome(load, wire) == outcome(MESSAGE.load, wire)


def test_a_value_dumped_again_dumps_the_same_and_others_are_not_confused() -> None:
    """The one-entry memo of each record: same object, same dump; never another's."""
    dump = compile_dump(MESSAGE)
    messages = sample_messages()
    first = [dump(message) for message in messages]
    again = [dump(message) for message in messages for _ in range(2)][::2]
    assert first == again == [MESSAGE.dump(message) for message in messages]
    # Equal but distinct objects, and alternating ones, dump like the reference too.
    for message in messages + messages[::-1]:
        twin = type(message)(*(getattr(message, f) for f in message.__dataclass_fields__))
        assert dump(twin) == dump(message) == MESSAGE.dump(message)
