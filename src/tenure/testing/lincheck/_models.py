"""The models of values (register, kv, counter) and every model by name (:data:`MODELS`).

What a model is: :mod:`tenure.testing.lincheck._model`; the models of holds (mutex,
semaphore) and of membership: :mod:`tenure.testing.lincheck._hold_models`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Final

from tenure.testing.lincheck._history import FAIL, OK, Operation
from tenure.testing.lincheck._hold_models import MEMBERSHIP, MUTEX, SEMAPHORE
from tenure.testing.lincheck._model import (
    NOTHING,
    READ,
    Model,
    Prepared,
    State,
    freeze,
    is_int,
)

_SET: Final = 2  # (kind, value): the state becomes value
_CAS_OK: Final = 3  # (kind, from, to): the state was from, becomes to
_CAS_FAIL: Final = 4  # (kind, from): the state was not from
_CAS_MAYBE: Final = 5  # (kind, from, to): to if the state was from


def _pair(value: object) -> bool:
    return isinstance(value, list | tuple) and len(value) == 2


def _cas_step(state: State, prepared: Prepared) -> tuple[bool, State] | None:
    """The steps registers and counters share (None: not one of them)."""
    kind = prepared[0]
    if kind == NOTHING:
        return True, state
    if kind == READ:
        return prepared[1] == state, state
    if kind == _SET:
        return True, prepared[1]
    if kind == _CAS_OK:
        return (True, prepared[2]) if state == prepared[1] else (False, state)
    if kind == _CAS_FAIL:
        return state != prepared[1], state
    if kind == _CAS_MAYBE:
        return True, prepared[2] if state == prepared[1] else state
    return None


def _prepare_cas(op: Operation) -> Prepared:
    expected, new = freeze(op.input[0]), freeze(op.input[1])
    if op.outcome == OK:
        return (_CAS_OK, expected, new)
    if op.outcome == FAIL:
        return (_CAS_FAIL, expected)
    return (_CAS_MAYBE, expected, new)


# -- register: read, write, cas ------------------------------------------------------


def _prepare_register(op: Operation) -> Prepared:
    if op.f == "read":
        return (READ, freeze(op.output)) if op.outcome == OK else (NOTHING,)
    if op.f == "write":
        return (NOTHING,) if op.outcome == FAIL else (_SET, freeze(op.input))
    return _prepare_cas(op)


def _register_step(state: State, prepared: Prepared) -> tuple[bool, State]:
    result = _cas_step(state, prepared)
    assert result is not None
    return result


def _register_validate(op: Operation) -> str | None:
    if op.f == "cas" and not _pair(op.input):
        return "a cas's value is [from, to]"
    return None


def _register_bound_returns(
    operations: Sequence[Operation], prepared: Sequence[Prepared], initial: State
) -> list[float]:
    """An unknown write of a value nothing else writes (nor was the initial one), which
    an operation observed (a read of it, a cas from it), took effect before that
    observer returned: nothing else could have made the value. Its return is that
    observer's (the earliest)."""
    returns = [op.ret for op in operations]
    writers: dict[Any, list[int]] = {}
    for i, step in enumerate(prepared):
        if step[0] == _SET:
            writers.setdefault(step[1], []).append(i)
        elif step[0] in (_CAS_OK, _CAS_MAYBE):
            writers.setdefault(step[2], []).append(i)
    observed: dict[Any, float] = {}
    for i, step in enumerate(prepared):
        if step[0] in (READ, _CAS_OK):
            seen = step[1]
            observed[seen] = min(observed.get(seen, math.inf), operations[i].ret)
    for value, made_by in writers.items():
        if len(made_by) != 1 or value not in observed or value == initial:
            continue
        i = made_by[0]
        if prepared[i][0] == _SET and returns[i] == math.inf:
            returns[i] = max(observed[value], operations[i].call)
    return returns


REGISTER: Final = Model(
    "register",
    "one value per key, null until written (Knossos's cas-register)",
    {
        "read": "value null; ok value: the value read (null: never written)",
        "write": "value: the value written",
        "cas": "value [from, to]: ok if it swapped, fail if the value was not `from`",
    },
    lambda header, key: freeze(header.get("initial")),
    _prepare_register,
    _register_step,
    _register_validate,
    observe=freeze,
    bound_returns=_register_bound_returns,
    stale_reads=frozenset({"read"}),
)


# -- kv: porcupine's get, put, append -------------------------------------------------

_APPEND: Final = 6  # (kind, text): the state gains text at its end


def _prepare_kv(op: Operation) -> Prepared:
    if op.f == "get":
        return (READ, op.output or "") if op.outcome == OK else (NOTHING,)
    if op.outcome == FAIL:
        return (NOTHING,)
    value = "" if op.input is None else str(op.input)
    return (_SET, value) if op.f == "put" else (_APPEND, value)


def _kv_step(state: State, prepared: Prepared) -> tuple[bool, State]:
    if prepared[0] == _APPEND:
        return True, state + prepared[1]
    result = _cas_step(state, prepared)
    assert result is not None
    return result


KV: Final = Model(
    "kv",
    "porcupine's key-value store: a string per key, empty until written",
    {
        "get": "value null; ok value: the string read",
        "put": "value: the string stored",
        "append": "value: the string appended",
    },
    lambda header, key: "",
    _prepare_kv,
    _kv_step,
    lambda op: None,
    observe=lambda value: value or "",
    stale_reads=frozenset({"get"}),
)


# -- counter: add, read, cas ---------------------------------------------------------

_ADD: Final = 7  # (kind, delta, total or None): the state plus delta, which is total


def _prepare_counter(op: Operation) -> Prepared:
    if op.f == "read":
        return (READ, op.output) if op.outcome == OK else (NOTHING,)
    if op.f == "add":
        if op.outcome == FAIL:
            return (NOTHING,)
        return (_ADD, op.input, op.output if op.outcome == OK else None)
    return _prepare_cas(op)


def _counter_step(state: State, prepared: Prepared) -> tuple[bool, State]:
    if prepared[0] == _ADD:
        total = state + prepared[1]
        # ok's value is the new total: a lost or doubled add shows at once
        return prepared[2] is None or prepared[2] == total, total
    result = _cas_step(state, prepared)
    assert result is not None
    return result


def _counter_validate(op: Operation) -> str | None:
    if op.f == "add" and not is_int(op.input):
        return "an add's value is an integer (the delta)"
    if op.f == "add" and op.outcome == OK and op.output is not None and not is_int(op.output):
        return "an ok add's value is the new total, an integer"
    if op.f == "cas" and not (_pair(op.input) and all(is_int(v) for v in op.input)):
        return "a cas's value is [from, to], integers"
    if op.f == "read" and op.outcome == OK and not is_int(op.output):
        return "an ok read's value is the total, an integer"
    return None


COUNTER: Final = Model(
    "counter",
    "an integer per key, 0 to begin with (the header's `initial` otherwise)",
    {
        "add": "value: the delta; ok value: the new total",
        "read": "value null; ok value: the total",
        "cas": "value [from, to]: ok if it swapped, fail if the total was not `from`",
    },
    lambda header, key: int(header.get("initial", 0)),
    _prepare_counter,
    _counter_step,
    _counter_validate,
    observe=lambda value: value,
    stale_reads=frozenset({"read"}),
)

#: Every model by name (``--model NAME``).
MODELS: Final[dict[str, Model]] = {
    model.name: model for model in (REGISTER, KV, COUNTER, MUTEX, SEMAPHORE, MEMBERSHIP)
}
