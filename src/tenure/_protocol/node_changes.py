"""AlterNode's changes: the one map the native protocol carries. [compiled]"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from tenure._core.stored_config import current_names, stored_names
from tenure._protocol.wire import FLOAT, STR, Field, any_of
from tenure._protocol.wire_checks import MAX_UINT, MIN_INT, WireError, describe, explain, plain

__all__ = ["NodeChanges"]


class NodeChanges(Field):
    """AlterNode's changes: a map from str to nil, bool, int, float or str.

    The map's keys are setting names on the wire and in the journal (which logs
    commands in this layout), so ``recovery_window`` goes out as ``session_timeout``,
    which servers of every version understand and every journal holds; either name
    loads, as today's name. (See tenure._core.stored_config.)

    The Struct holds the map's msgpack bytes (msgspec.Raw), decoded here: msgspec
    keeps the last of repeated keys, and a map must not repeat one.
    """

    wire = "map<str, nil|bool|int|float|str>"
    annotation = msgspec.Raw

    def __init__(self) -> None:
        settings = any_of([bool, int, FLOAT.annotation, str, None])  # finite floats
        self._decoder = msgspec.msgpack.Decoder(dict[str, settings])  # type: ignore[valid-type]
        self.dump, self.load = self._dump, self._load

    def _dump(self, value: Any) -> msgspec.Raw:
        if not isinstance(value, Mapping):
            raise WireError(f"expected a mapping, got {describe(value)}")
        try:
            raw = msgspec.Raw(msgspec.msgpack.encode(stored_names(dict(value))))
        except (TypeError, ValueError, OverflowError) as error:
            raise explain(self, plain(dict(value)), error) from None
        self._load(raw)  # what the peer would refuse is not sent
        return raw

    def _load(self, raw: msgspec.Raw) -> dict[str, object]:
        data = bytes(raw)
        try:
            changes = self._decoder.decode(data)
        except (msgspec.MsgspecError, UnicodeDecodeError) as error:
            raise explain(self, msgspec.msgpack.decode(data), error) from None
        if len(changes) != _map_size(data):
            raise WireError("a map repeats a key")
        # Both names at once stay as sent: the engine refuses them (INVALID_ARGUMENT),
        # a reply rather than a malformed message that would end the connection.
        return current_names(changes)

    def check(self, raw: object) -> None:
        if not isinstance(raw, dict):
            raise WireError(f"expected a map, got {describe(raw)}")
        for key, value in raw.items():
            label = repr(key) if isinstance(key, str) and len(key) <= 40 else describe(key)
            try:
                _check_setting(key, value)
            except WireError as error:
                error.within(f"[{label}]")
                raise


def _check_setting(key: object, value: object) -> None:
    if not isinstance(key, str):
        raise WireError(f"expected a str key, got {describe(key)}")
    if value is None or isinstance(value, bool | str):
        STR.check(value) if isinstance(value, str) else None
    elif isinstance(value, int):
        if not MIN_INT <= value <= MAX_UINT:
            raise WireError(f"{value} does not fit a msgpack integer")
    elif isinstance(value, float):
        FLOAT.check(value)
    else:
        raise WireError(f"expected nil, bool, int, float or str, got {describe(value)}")


def _map_size(data: bytes) -> int:
    """How many entries the msgpack map in ``data`` announces (repeats included)."""
    first = data[0]
    if first == 0xDE:
        return int.from_bytes(data[1:3], "big")
    if first == 0xDF:
        return int.from_bytes(data[1:5], "big")
    return first & 0x0F  # fixmap: 0x80..0x8f
