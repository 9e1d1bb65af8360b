"""What a model is: a sequential specification as a pure step function (porcupine's way).

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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from tenure.testing.lincheck._history import Operation

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
    must have taken effect, where that is earlier than its return; ``stale_reads`` are
    the ``f`` a history may give ``max_staleness`` (reads whose step changes nothing:
    the search, not the model, says where a stale one may take effect,
    :mod:`tenure.testing.lincheck._stale`).
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
    stale_reads: frozenset[str] = frozenset()


def is_int(value: object) -> bool:
    """Whether ``value`` is an integer of JSON (not a boolean)."""
    return isinstance(value, int) and not isinstance(value, bool)


def freeze(value: Any) -> Any:
    """A JSON value made hashable (lists to tuples, objects to sorted item tuples)."""
    if isinstance(value, list | tuple):
        return tuple(freeze(item) for item in value)
    if isinstance(value, dict):
        return tuple(sorted((str(k), freeze(v)) for k, v in value.items()))
    return value


# What every prepared operation starts with: its kind of step (an int, compared fast;
# each model's own kinds are in its module, numbered apart).
NOTHING: Final = 0  # observed and changed nothing (a failed or unknown read...)
#: What ``prepare`` gives an operation that is legal in every state and changes none
#: (a failed or unknown read, a failed write, an acquire not granted): the search
#: leaves it out, as it could go anywhere.
INERT: Final = (NOTHING,)
READ: Final = 1  # (kind, value): the state must be value


#: The ``f`` of an item a watcher saw, checked as a read of that value.
WATCH: Final = "watch"


def watch_step(model: Model, value: Any) -> Prepared:
    """What a watcher seeing ``value`` asks of ``model``'s state: to be it."""
    if model.observe is None:
        raise ValueError(f"model {model.name} has no state a watch can see")
    return (READ, model.observe(value))
