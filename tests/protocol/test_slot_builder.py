"""wire.slot_builder: a record's dataclass made of its values without its ``__init__``.

Decoding a command built it through the frozen dataclass's generated ``__init__``
(a frame and an ``object.__setattr__`` per field); where that is all ``__init__``
does, the slots are set directly. These check that what is built is the same object
the constructor makes, and that a class whose ``__init__`` does more keeps it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from tenure._core import Acquire, Release
from tenure._protocol import Request
from tenure._protocol.messages import decode_message, encode_message
from tenure._protocol.wire import UINT, Record, slot_builder


def _names(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def test_the_request_paths_commands_are_built_without_their_init() -> None:
    built = Acquire(7, "jobs/a", 1, 42, b"data", 1.5, True, 30.0, 2, True, 9, 60.0)
    values = [getattr(built, name) for name in _names(Acquire)]
    build = slot_builder(Acquire, _names(Acquire))
    assert build is not None
    made = build(values)
    assert type(made) is Acquire
    assert made == built
    assert hash(made) == hash(built)
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.count = 2  # type: ignore[misc]
    release = slot_builder(Release, _names(Release))
    assert release is not None
    assert release([7, "jobs/a", 3]) == Release(7, "jobs/a", 3)


def test_a_decoded_command_equals_the_one_encoded() -> None:
    for sent in (
        Acquire(7, "jobs/a", 1, 42, b"", None, True, None, 0, False, 0, None),
        Acquire(7, "jobs/a", 2, 43, b"x", 0.5, False, 10.0, 1, True, 3, 5.0),
        Release(7, "jobs/a"),
    ):
        loaded = decode_message(encode_message(Request(9, sent)))
        assert isinstance(loaded, Request)
        assert type(loaded.command) is type(sent)
        assert loaded.command == sent


@dataclasses.dataclass(frozen=True, slots=True)
class _Checked:
    count: int

    def __post_init__(self) -> None:
        if self.count > 10:
            raise ValueError("count above 10")


@dataclasses.dataclass(frozen=True)
class _NoSlots:
    count: int


@dataclasses.dataclass(frozen=True, slots=True)
class _Plain:
    count: int


def test_a_class_whose_init_does_more_is_built_by_its_init() -> None:
    assert slot_builder(_Checked, ["count"]) is None
    assert slot_builder(_NoSlots, ["count"]) is None
    assert slot_builder(_Plain, ["other"]) is None  # (not its fields: the constructor's)
    assert slot_builder(int, ["count"]) is None
    record = Record(_Checked, [("count", UINT)])
    assert record.from_wire(record.to_wire(_Checked(3))) == _Checked(3)
    # __post_init__ runs on a load: a value it refuses is refused.
    struct: Any = record.struct
    assert struct is not None
    with pytest.raises(ValueError, match="count above 10"):
        record.from_wire(struct(11))
    plain = Record(_Plain, [("count", UINT)])
    plain_struct: Any = plain.struct
    assert plain.from_wire(plain_struct(11)) == _Plain(11)
