"""The models of holds (mutex, semaphore: acquire, release, lost, holders) and of
membership (join, leave, members). What a model is: :mod:`tenure.testing.lincheck._model`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from tenure.testing.lincheck._history import FAIL, INFO, OK, Operation
from tenure.testing.lincheck._model import NOTHING, READ, Model, Prepared, State, freeze, is_int

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
        return (_HOLDERS, frozenset(op.output)) if op.outcome == OK else (NOTHING,)
    if op.f == "acquire":
        if op.outcome != OK:
            return (NOTHING,)
        return (_GRANT, op.output, 1 if op.input is None else op.input)
    if op.outcome == INFO:
        return (_END_MAYBE, op.input)
    if op.outcome == FAIL:
        return (_NOT_HELD, op.input)
    return (_END, op.input)


def _hold_step(state: State, prepared: Prepared) -> tuple[bool, State]:
    kind = prepared[0]
    if kind == NOTHING:
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
            isinstance(op.output, list) and all(is_int(token) for token in op.output)
        ):
            return "an ok holders' value is the list of the tokens holding"
        return None
    if op.f == "acquire":
        if op.input is not None and not (is_int(op.input) and op.input > 0):
            return "an acquire's value is its count, a positive integer (or null: 1)"
        if op.outcome == OK and not is_int(op.output):
            return "an ok acquire's value is the fencing token, an integer"
        return None
    if not is_int(op.input):
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
            return (READ, frozenset(freeze(op.output)))
        return (NOTHING,)
    if op.outcome == FAIL:
        return (NOTHING,)
    return (_JOIN if op.f == "join" else _LEAVE, freeze(op.input), op.outcome == OK)


def _membership_step(state: State, prepared: Prepared) -> tuple[bool, State]:
    kind = prepared[0]
    if kind == NOTHING:
        return True, state
    if kind == READ:
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
