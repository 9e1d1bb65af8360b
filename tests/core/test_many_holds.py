"""A session's table of holds past MANY names: kept sorted and compact, with the same
answers as the dict it replaces (:mod:`tenure._core.many_holds`)."""

from __future__ import annotations

import random
import sys

from tenure._core import Release
from tenure._core.many_holds import MANY, ManyHolds, Numbers
from tenure._core.session import Session
from tenure._core.snapshot import dump, load
from tenure._core.sorted_keys import SortedKeys

from .support import NODE, acquire, make_engine, open_session


def _session() -> Session:
    return Session(1, NODE, 10.0, "", b"k", 1)


def _model_add(model: dict[str, set[int]], name: str, hold: int) -> None:
    model.setdefault(name, set()).add(hold)


def _model_discard(model: dict[str, set[int]], name: str, hold: int) -> None:
    numbers = model.get(name)
    if numbers is not None:
        numbers.discard(hold)
        if not numbers:
            del model[name]


def test_a_session_past_many_names_answers_as_a_set_of_its_holds_does() -> None:
    rng = random.Random(51)
    session = _session()
    model: dict[str, set[int]] = {}
    shapes = set()
    for step in range(20_000):
        # Grow past MANY, shrink below half of it, grow again: both shapes, both ways.
        growing = (step // 2_500) % 2 == 0
        name = f"s{rng.randrange(MANY * 2)}"
        hold = rng.choice((0, 0, 0, 1, 2))
        if rng.random() < (0.7 if growing else 0.3):
            session.add_hold(name, hold)
            _model_add(model, name, hold)
        else:
            session.discard_hold(name, hold)
            _model_discard(model, name, hold)
        shapes.add(type(session._holds).__name__)
        if step % 97 == 0 or step > 19_900:
            assert set(session.held) == set(model)
            assert len(session.held) == len(model)
            for each in {name, "s0", f"s{MANY}"}:
                assert set(session.holds_on(each)) == model.get(each, set())
                assert (each in session.held) == (each in model)
    assert {"dict", "ManyHolds"} <= shapes


def test_many_holds_keeps_names_in_order_and_only_unusual_numbers() -> None:
    many = ManyHolds([("b", 0), ("a", 3), ("c", {0, 2})])
    assert list(many) == ["a", "b", "c"]
    assert many._numbers == {"a": 3, "c": {0, 2}}  # (hold 0 alone: not kept)
    assert (many.get("a"), many.get("b"), many.get("zz")) == (3, 0, None)
    assert many.discard("c", 2)
    assert many._numbers == {"a": 3}  # back to hold 0 alone
    assert not many.discard("c", 2)
    assert many.add("b", 5)
    assert many.get("b") == {0, 5}
    assert not many.add("b", 5)
    table: dict[str, Numbers] = {"a": 3, "b": {0, 5}, "c": 0}
    assert many == table  # (either side: a dict of the same holds)
    assert table == many
    assert many == ManyHolds(table.items())
    assert many != {"a": 3}
    assert many == {"a", "b", "c"}  # (as the set of names ``Session.held`` reads it as)
    assert many != {"a", "b"}


def test_a_session_of_many_holds_ends_releasing_each_and_restores_equal() -> None:
    engine = make_engine()
    sid = open_session(engine)
    names = [f"m{i:04}" for i in range(MANY + 10)]
    for name in reversed(names):
        acquire(engine, sid, name, ephemeral=True)
    session = engine.sessions[sid]
    assert isinstance(session._holds, ManyHolds)
    assert list(session.held) == names  # (in order: what the session's end walks)
    restored = load(dump(engine))
    again = restored.sessions[sid]
    assert again._holds == session._holds
    assert list(again.held) == names
    for name in names[: MANY - MANY // 2 + 11]:
        engine.apply(Release(sid, name), 1.0)
    assert isinstance(session._holds, dict)  # below half of MANY: a dict again
    assert again._holds != session._holds


def test_many_names_cost_less_than_a_dict_of_them() -> None:
    """About 9 bytes a name (a pointer in a run) where the dict took about 31."""
    table: dict[str, Numbers] = {f"lock-{i}": 0 for i in range(100_000)}
    many = ManyHolds(table.items())
    runs = many._names.runs
    compact = sys.getsizeof(runs) + sum(map(sys.getsizeof, runs)) + sys.getsizeof(many._numbers)
    assert compact < sys.getsizeof(table) / 2


def test_the_sorted_index_says_whether_it_changed_and_what_it_has() -> None:
    keys: SortedKeys[str] = SortedKeys(["b", "d"])
    assert (keys.add("c"), keys.add("c"), keys.add("a")) == (True, False, True)
    assert (keys.has("c"), keys.has("e"), keys.has("0")) == (True, False, False)
    assert (keys.discard("c"), keys.discard("c"), keys.discard("z")) == (True, False, False)
    assert keys.keys == ["a", "b", "d"]
    assert not SortedKeys[str]().has("a")
