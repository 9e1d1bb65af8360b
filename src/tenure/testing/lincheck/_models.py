"""The models: each a sequential specification as a pure step function (porcupine's way).

A model reads each operation once (``prepare``: its ``f``, outcome and values as a
small tuple), then ``step(state, prepared)`` says whether the operation can happen
in ``state`` and the state it leaves: ``(True, next)``, or ``(False, state)`` when
its result contradicts the state. States are hashable values.

An operation whose outcome is unknown (``info``) takes effect where the search
places it: its return is after everything, so placed last it never did. Its step
must be legal in every state (it may have done nothing; where applying it is not
possible it leaves the state as it is).

Each model checks one key; the checker splits a history by key.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from tenure.testing.lincheck._history import FAIL, INFO, OK, Operation

State = Any
Prepared = Any
#: What a model makes of a header and a key: its initial state.
Init = Callable[[Mapping[str, Any], "str | None"], State]
#: An operation read once for the search.
Prepare = Callable[[Operation], Prepared]
#: A model's transition: whether it is legal, and the state it leaves.
Step = Callable[[State, Prepared], tuple[bool, State]]
#: Why an operation is malformed for a model (None: it is not).
Validate = Callable[[Operation], "str | None"]
#: The latest each operation can take effect, where the model can tell more than its
#: return (an unknown write observed later took effect before its observer returned).
BoundReturns = Callable[[Sequence[Operation], Sequence[Any], State], list[float]]


@dataclass(frozen=True)
class Model:
    """A sequential specification: ``init``, ``prepare`` and ``step``, and what its
    operations are.

    ``operations`` maps each ``f`` the model knows to its description (what ``value``
    holds at the invoke and at ``ok``); ``validate`` says why an operation is not one
    of them (called before ``prepare``); ``show`` writes a state for people;
    ``observe`` makes the value a watch saw comparable with a state (None: nothing of
    the model can be watched); ``bound_returns`` (optional) says by when each operation
    must have taken effect, where that is earlier than its return.
    """

    name: str
    summary: str
    operations: Mapping[str, str]
    init: Init
    prepare: Prepare
    step: Step
    validate: Validate
    show: Callable[[State], str] = repr
    observe: Callable[[Any], State] | None = None
    bound_returns: BoundReturns | None = None


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _pair(value: object) -> bool:
    return isinstance(value, list | tuple) and len(value) == 2


def freeze(value: Any) -> Any:
    """A JSON value made hashable (lists to tuples, objects to sorted item tuples)."""
    if isinstance(value, list | tuple):
        return tuple(freeze(item) for item in value)
    if isinstance(value, dict):
        return tuple(sorted((str(k), freeze(v)) for k, v in value.items()))
    return value


# What every prepared operation starts with: its kind of step (an int, compared fast).
_NOTHING: Final = 0  # observed and changed nothing (a failed or unknown read...)
#: What ``prepare`` gives an operation that is legal in every state and changes none
#: (a failed or unknown read, a failed write, an acquire not granted): the search
#: leaves it out, as it could go anywhere.
INERT: Final = (_NOTHING,)
_READ: Final = 1  # (kind, value): the state must be value
_SET: Final = 2  # (kind, value): the state becomes value
_CAS_OK: Final = 3  # (kind, from, to): the state was from, becomes to
_CAS_FAIL: Final = 4  # (kind, from): the state was not from
_CAS_MAYBE: Final = 5  # (kind, from, to): to if the state was from


#: The ``f`` of an item a watcher saw, checked as a read of that value.
WATCH: Final = "watch"


def watch_step(model: Model, value: Any) -> Prepared:
    """What a watcher seeing ``value`` asks of ``model``'s state: to be it."""
    if model.observe is None:
        raise ValueError(f"model {model.name} has no state a watch can see")
    return (_READ, model.observe(value))


def _cas_step(state: State, prepared: Prepared) -> tuple[bool, State] | None:
    """The steps registers and counters share (None: not one of them)."""
    kind = prepared[0]
    if kind == _NOTHING:
        return True, state
    if kind == _READ:
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
        return (_READ, freeze(op.output)) if op.outcome == OK else (_NOTHING,)
    if op.f == "write":
        return (_NOTHING,) if op.outcome == FAIL else (_SET, freeze(op.input))
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
        if step[0] in (_READ, _CAS_OK):
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
)


# -- kv: porcupine's get, put, append -------------------------------------------------

_APPEND: Final = 6  # (kind, text): the state gains text at its end


def _prepare_kv(op: Operation) -> Prepared:
    if op.f == "get":
        return (_READ, op.output or "") if op.outcome == OK else (_NOTHING,)
    if op.outcome == FAIL:
        return (_NOTHING,)
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
)


# -- counter: add, read, cas ---------------------------------------------------------

_ADD: Final = 7  # (kind, delta, total or None): the state plus delta, which is total


def _prepare_counter(op: Operation) -> Prepared:
    if op.f == "read":
        return (_READ, op.output) if op.outcome == OK else (_NOTHING,)
    if op.f == "add":
        if op.outcome == FAIL:
            return (_NOTHING,)
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
    if op.f == "add" and not _is_int(op.input):
        return "an add's value is an integer (the delta)"
    if op.f == "add" and op.outcome == OK and op.output is not None and not _is_int(op.output):
        return "an ok add's value is the new total, an integer"
    if op.f == "cas" and not (_pair(op.input) and all(_is_int(v) for v in op.input)):
        return "a cas's value is [from, to], integers"
    if op.f == "read" and op.outcome == OK and not _is_int(op.output):
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
)


# -- mutex and semaphore: acquire (ok: the token), release, lost ---------------------
#
# The state: the holds (a frozenset of (token, count)), the last token granted and
# the limit. Tokens strictly increase per key. A loss (`lost`) is invoked at the
# holder's last confirmation and completed when it heard: the hold ends once, in
# between; a holder that vanished unheard (killed) ends with a `lost` never completed
# (info), or it holds for ever. An acquire whose outcome is unknown may have been
# granted to a client that never learned of it; that hold ends by itself (its lease
# expires) at a time nobody observes, so it constrains nobody: the model leaves it out.
# A `holders` read (the tokens holding, as a describe of the owners shows them) must
# show every hold the model has and no more than the limit allows; a token it shows
# that the model does not have can only be such an unknown grant. On a mutex that is
# the one seen before (the state's fourth field: it may hold until a read shows
# nobody or the next grant), or one after every token the model has (an earlier one
# ended before the next grant), which is then the last token; on a semaphore of more,
# any (it is not told from a stale hold there: a weaker check).

_GRANT: Final = 8  # (kind, token, count)
_END: Final = 9  # (kind, token): the hold of token ends (released or lost)
_END_MAYBE: Final = 10  # (kind, token): it ends if held (unknown outcome)
_NOT_HELD: Final = 11  # (kind, token): a release that failed: token held nothing
_HOLDERS: Final = 14  # (kind, tokens): the holds are these (a frozenset of tokens)


def _prepare_hold(op: Operation) -> Prepared:
    if op.f == "holders":
        return (_HOLDERS, frozenset(op.output)) if op.outcome == OK else (_NOTHING,)
    if op.f == "acquire":
        if op.outcome != OK:
            return (_NOTHING,)
        return (_GRANT, op.output, 1 if op.input is None else op.input)
    if op.outcome == INFO:
        return (_END_MAYBE, op.input)
    if op.outcome == FAIL:
        return (_NOT_HELD, op.input)
    return (_END, op.input)


def _hold_step(state: State, prepared: Prepared) -> tuple[bool, State]:
    kind = prepared[0]
    if kind == _NOTHING:
        return True, state
    held, last, limit, unheard = state
    if kind == _HOLDERS:
        return _holders_seen(state, prepared[1])
    if kind == _GRANT:
        token, count = prepared[1], prepared[2]
        if token <= last or sum(c for _, c in held) + count > limit:
            return False, state
        # (an unknown grant seen holding a mutex ended before this one, unobserved)
        return True, (held | {(token, count)}, token, limit, None)
    token = prepared[1]
    holding = next((item for item in held if item[0] == token), None)
    if kind == _NOT_HELD:
        return holding is None, state
    if holding is None:
        return kind == _END_MAYBE, state
    return True, (held - {holding}, last, limit, unheard)


def _holders_seen(state: State, seen: frozenset[int]) -> tuple[bool, State]:
    """A ``holders`` read of ``seen`` in ``state`` (the section's comment)."""
    held, last, limit, unheard = state
    mine = {token for token, _ in held}
    if not mine <= seen or len(seen) > limit:
        return False, state
    unknown = seen - mine
    if limit > 1:
        return True, state
    if not unknown:
        return True, (held, last, limit, None)  # (an unknown grant seen before ended)
    token = next(iter(unknown))  # (a mutex: the one holder, an unknown grant)
    if token == unheard:
        return True, state
    if token <= last:
        return False, state
    return True, (held, token, limit, token)


def _hold_validate(op: Operation) -> str | None:
    if op.f == "holders":
        if op.outcome == OK and not (
            isinstance(op.output, list) and all(_is_int(token) for token in op.output)
        ):
            return "an ok holders' value is the list of the tokens holding"
        return None
    if op.f == "acquire":
        if op.input is not None and not (_is_int(op.input) and op.input > 0):
            return "an acquire's value is its count, a positive integer (or null: 1)"
        if op.outcome == OK and not _is_int(op.output):
            return "an ok acquire's value is the fencing token, an integer"
        return None
    if not _is_int(op.input):
        return f"a {op.f}'s value is the token, an integer"
    if op.f == "lost" and op.outcome == FAIL:
        return "a loss is ok (the holder was told) or info (never told), not fail"
    return None


def _show_holds(state: State) -> str:
    held, last, limit, unheard = state
    tokens = ", ".join(f"{t}" if c == 1 else f"{t}x{c}" for t, c in sorted(held))
    shown = f"held by [{tokens}] of {limit}, last token {last}"
    return shown if unheard is None else f"{shown}, {unheard} seen holding unheard of"


def _initial_token(header: Mapping[str, Any]) -> int:
    # A history may start after grants were made (a header's "token": the last one).
    return int(header.get("token", 0))


def _semaphore_init(header: Mapping[str, Any], key: str | None) -> State:
    limit: object = header.get("limit")
    if isinstance(limit, dict):  # a limit per key: {"limit": {"k1": 3}}
        limit = limit.get(key)
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise ValueError(
            f"the semaphore model needs the limit of key {key!r}: --limit N, or the "
            'history\'s first line {"limit": N} (or {"limit": {"KEY": N}})'
        )
    return (frozenset(), _initial_token(header), limit, None)


_HOLD_OPERATIONS: Final = {
    "release": "value: the token; ok if it released, fail if it held nothing",
    "lost": "value: the token; invoked at its last confirmation, ok when told",
    "holders": "value null; ok value: the tokens of the holds seen (a list)",
}

MUTEX: Final = Model(
    "mutex",
    "a lock with fencing tokens: at most one holder; tokens strictly increase",
    {
        "acquire": "value null; ok value: the fencing token; fail: not granted (a try)",
        **_HOLD_OPERATIONS,
    },
    lambda header, key: (frozenset(), _initial_token(header), 1, None),
    _prepare_hold,
    _hold_step,
    _hold_validate,
    _show_holds,
)

SEMAPHORE: Final = Model(
    "semaphore",
    "a counting semaphore: held counts never above its limit (the header's or --limit)",
    {"acquire": "value: the count (null: 1); ok value: the fencing token", **_HOLD_OPERATIONS},
    _semaphore_init,
    _prepare_hold,
    _hold_step,
    _hold_validate,
    _show_holds,
)


# -- membership: join, leave, members ------------------------------------------------

_JOIN: Final = 12  # (kind, id, known): id is added; known (ok): it was not there
_LEAVE: Final = 13  # (kind, id, known): id is removed; known (ok): it was there


def _prepare_membership(op: Operation) -> Prepared:
    if op.f == "members":
        if op.outcome == OK:
            return (_READ, frozenset(freeze(op.output)))
        return (_NOTHING,)
    if op.outcome == FAIL:
        return (_NOTHING,)
    return (_JOIN if op.f == "join" else _LEAVE, freeze(op.input), op.outcome == OK)


def _membership_step(state: State, prepared: Prepared) -> tuple[bool, State]:
    kind = prepared[0]
    if kind == _NOTHING:
        return True, state
    if kind == _READ:
        return prepared[1] == state, state
    member, known = prepared[1], prepared[2]
    present = member in state
    if kind == _JOIN:
        return (False, state) if present and known else (True, state | {member})
    return (False, state) if not present and known else (True, state - {member})


def _membership_validate(op: Operation) -> str | None:
    if op.f == "members" and op.outcome == OK and not isinstance(op.output, list):
        return "an ok members' value is the list of member ids"
    if op.f in ("join", "leave") and op.input is None:
        return f"a {op.f}'s value is the member's id"
    return None


MEMBERSHIP: Final = Model(
    "membership",
    "a set of member ids per key (a group): join adds one, leave removes it",
    {
        "join": "value: the member's id; ok: it joined (it was not a member)",
        "leave": "value: the member's id; ok: it left (it was a member)",
        "members": "value null; ok value: the list of member ids",
    },
    lambda header, key: frozenset(),
    _prepare_membership,
    _membership_step,
    _membership_validate,
    lambda state: repr(sorted(state, key=repr)),
    lambda value: frozenset(freeze(value)),
)

#: Every model by name (``--model NAME``).
MODELS: Final[dict[str, Model]] = {
    model.name: model for model in (REGISTER, KV, COUNTER, MUTEX, SEMAPHORE, MEMBERSHIP)
}
