"""Histories made by running a real object: linearizable by construction.

:func:`generate` runs ``processes`` clients against a sequential object (one of
:data:`OBJECTS`, each the plain implementation a model specifies). Every operation
is called, takes effect at one instant (its linearization point, chosen at random
between its call and its return) and returns; some are abandoned after their call
(``info``: taken effect or not, at random). The events come out in real-time order,
so the history is linearizable: the order of the linearization points is a witness.
:func:`plant` then breaks one operation's result in a way the model must catch.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final


@dataclass
class Call:
    """One operation in flight: what it asks, and (once applied) what it answered."""

    process: int
    f: str
    key: str | None
    value: Any
    applied: bool = False
    outcome: str = "ok"
    output: Any = None
    abandoned: bool = False


class SequentialObject:
    """A real object the model specifies; ``apply`` runs one call on it."""

    def choose(self, rng: random.Random, process: int) -> tuple[str, Any]:
        """A random operation for ``process``: its ``f`` and input."""
        raise NotImplementedError

    def apply(self, call: Call) -> None:
        """Take effect: set ``call.outcome`` and ``call.output``."""
        raise NotImplementedError

    def key_of(self, process: int) -> str | None:
        """The key ``process``'s next operation must be on (None: any)."""
        return None


@dataclass
class Register(SequentialObject):
    """read, write, cas over small values."""

    values: dict[str | None, Any] = field(default_factory=dict)

    def choose(self, rng: random.Random, process: int) -> tuple[str, Any]:
        f = rng.choice(("read", "write", "cas"))
        if f == "read":
            return f, None
        if f == "write":
            return f, rng.randrange(5)
        return f, [rng.randrange(5), rng.randrange(5)]

    def apply(self, call: Call) -> None:
        current = self.values.get(call.key)
        if call.f == "read":
            call.output = current
        elif call.f == "write":
            self.values[call.key] = call.value
        elif current == call.value[0]:
            self.values[call.key] = call.value[1]
        else:
            call.outcome = "fail"


@dataclass
class Counter(SequentialObject):
    """add (answering the new total), read, cas."""

    totals: dict[str | None, int] = field(default_factory=dict)

    def choose(self, rng: random.Random, process: int) -> tuple[str, Any]:
        f = rng.choice(("add", "add", "read", "cas"))
        if f == "add":
            return f, rng.randrange(1, 4)
        if f == "read":
            return f, None
        return f, [rng.randrange(6), rng.randrange(6)]

    def apply(self, call: Call) -> None:
        current = self.totals.get(call.key, 0)
        if call.f == "add":
            self.totals[call.key] = call.output = current + call.value
        elif call.f == "read":
            call.output = current
        elif current == call.value[0]:
            self.totals[call.key] = call.value[1]
        else:
            call.outcome = "fail"


@dataclass
class Semaphore(SequentialObject):
    """acquire (a try: granted a token if there is room), release, lost; ``limit`` 1 is
    a mutex. A process holds at most one token at a time."""

    limit: int = 1
    held: dict[str | None, dict[int, int]] = field(default_factory=dict)  # token -> count
    last: dict[str | None, int] = field(default_factory=dict)
    holding: dict[int, tuple[str | None, int]] = field(default_factory=dict)  # process's

    def choose(self, rng: random.Random, process: int) -> tuple[str, Any]:
        mine = self.holding.get(process)
        if mine is None:
            return "acquire", None if self.limit == 1 else rng.randrange(1, self.limit + 1)
        return rng.choice(("release", "release", "lost")), mine[1]

    def apply(self, call: Call) -> None:
        held = self.held.setdefault(call.key, {})
        if call.f == "acquire":
            count = call.value or 1
            if sum(held.values()) + count > self.limit:
                call.outcome = "fail"
                return
            token = self.last.get(call.key, 0) + 1
            self.last[call.key] = token
            held[token] = count
            call.output = token
            self.holding[call.process] = (call.key, token)
            return
        if call.value in held:
            del held[call.value]
        elif call.f == "release":
            call.outcome = "fail"
        self.holding.pop(call.process, None)

    def key_of(self, process: int) -> str | None:
        """A holder's next operation is on the key it holds."""
        mine = self.holding.get(process)
        return None if mine is None else mine[0]


@dataclass
class Membership(SequentialObject):
    """join, leave (each process its own id), members."""

    sets: dict[str | None, set[int]] = field(default_factory=dict)

    def choose(self, rng: random.Random, process: int) -> tuple[str, Any]:
        f = rng.choice(("join", "leave", "members"))
        return f, None if f == "members" else process

    def apply(self, call: Call) -> None:
        members = self.sets.setdefault(call.key, set())
        if call.f == "members":
            call.output = sorted(members)
        elif call.f == "join":
            if call.value in members:
                call.outcome = "fail"
            members.add(call.value)
        else:
            if call.value not in members:
                call.outcome = "fail"
            members.discard(call.value)


#: A fresh object for each model name.
OBJECTS: Final[dict[str, Callable[[], SequentialObject]]] = {
    "register": Register,
    "counter": Counter,
    "mutex": Semaphore,
    "semaphore": lambda: Semaphore(limit=3),
    "membership": Membership,
}


def generate(
    model: str,
    operations: int,
    processes: int,
    seed: int,
    keys: int = 1,
    info: float = 0.02,
) -> list[dict[str, Any]]:
    """The events of a linearizable history (module docstring), timed by their order."""
    rng = random.Random(seed)
    obj = OBJECTS[model]()
    events: list[dict[str, Any]] = []
    if model == "semaphore":
        events.append({"limit": 3})
    open_calls: dict[int, Call] = {}
    next_id = processes  # a process that abandoned a call goes on under a new id
    ids = list(range(processes))
    started = 0
    while started < operations or open_calls:
        slot = rng.randrange(processes)
        process = ids[slot]
        call = open_calls.get(process)
        if call is None:
            if started >= operations:
                continue
            f, value = obj.choose(rng, process)
            key = obj.key_of(process) or (f"k{rng.randrange(keys)}" if keys > 1 else None)
            call = Call(process, f, key, value)
            open_calls[process] = call
            started += 1
            events.append(_event(call, "invoke", value))
        elif not call.applied:
            if rng.random() < info:  # abandoned before taking effect: maybe never does
                call.abandoned = True
                if rng.random() < 0.5:
                    obj.apply(call)
                _abandon(events, open_calls, call)
                ids[slot], next_id = next_id, next_id + 1
                continue
            obj.apply(call)
            call.applied = True
        else:
            if rng.random() < info:
                _abandon(events, open_calls, call)
                ids[slot], next_id = next_id, next_id + 1
                continue
            del open_calls[process]
            events.append(_event(call, call.outcome, call.output))
    return events


def _abandon(events: list[dict[str, Any]], open_calls: dict[int, Call], call: Call) -> None:
    del open_calls[call.process]
    events.append(_event(call, "info", None))


def _event(call: Call, kind: str, value: Any) -> dict[str, Any]:
    event: dict[str, Any] = {"process": call.process, "type": kind, "f": call.f}
    if call.key is not None:
        event["key"] = call.key
    event["value"] = value
    return event


def lines(events: list[dict[str, Any]]) -> list[str]:
    """The events as the JSON lines of the format."""
    return [json.dumps(event) for event in events]
