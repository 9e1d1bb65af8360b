"""Hypothesis strategies and fixed samples for every value the protocol carries.

Both are derived from the dataclasses' type hints, so a field added to a
``tenure._core`` dataclass is generated here without a change (and then fails the
schema tests until the wire layout lists it).
"""

from __future__ import annotations

import ast
import dataclasses
import enum
import inspect
import sys
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from tenure._core import claims, commands, effects, values
from tenure._core.top_report import TopReport
from tenure._core.why_report import WhyReport
from tenure._protocol.admin import FilesReloaded, ReadBackup, ReloadFiles
from tenure._protocol.cluster import ClusterStatus, ClusterView
from tenure._protocol.messages import (
    PROTOCOL_VERSION,
    Failure,
    GoingAway,
    Hello,
    Message,
    Ping,
    Pong,
    Push,
    Refused,
    Reply,
    Request,
    Welcome,
)
from tenure._protocol.payloads import REPLY_TYPES
from tenure._protocol.wire import MAX_UINT, MIN_INT
from tenure.errors import ErrorCode

#: Every command class of tenure._core.commands, and the server's own (ClusterStatus;
#: ReadBackup and ReloadFiles).
COMMAND_TYPES: tuple[type, ...] = (
    *(
        cls
        for _, cls in inspect.getmembers(commands, inspect.isclass)
        if issubclass(cls, commands.Command) and cls is not commands.Command
    ),
    ClusterStatus,
    ReadBackup,
    ReloadFiles,
)
#: Every effect class of the Effect union.
EFFECT_TYPES: tuple[type, ...] = typing.get_args(effects.Effect)
#: The dataclasses a reply can be.
REPLY_RECORD_TYPES: tuple[type, ...] = (
    commands.SessionInfo,
    commands.AcquireResult,
    values.NodeDescription,
    commands.DescribeResult,
    commands.SessionState,
    commands.NodePage,
    commands.SemaphorePage,
    commands.SessionPage,
    ClusterView,
    commands.RateReservation,
    commands.AcquireAllResult,
    commands.WatchArmed,
    claims.ClaimRecord,
    FilesReloaded,
    WhyReport,
    TopReport,
)
MESSAGE_TYPES: tuple[type, ...] = (
    Hello,
    Request,
    Ping,
    Welcome,
    Refused,
    Reply,
    Failure,
    Push,
    Pong,
    GoingAway,
)

uints = st.integers(0, MAX_UINT)
finite_floats = st.floats(allow_nan=False, allow_infinity=False)
text = st.text(st.characters(codec="utf-8"), max_size=12)
scalars = st.one_of(st.none(), st.booleans(), st.integers(MIN_INT, MAX_UINT), finite_floats, text)


def for_hint(hint: Any) -> st.SearchStrategy[Any]:
    """A strategy for values of the type ``hint`` that the wire can carry."""
    origin = typing.get_origin(hint)
    if hint is int:
        return uints
    if hint is float:
        return finite_floats
    if hint is bool:
        return st.booleans()
    if hint is str:
        return text
    if hint is bytes:
        return st.binary(max_size=12)
    if hint is type(None):
        return st.none()
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return st.sampled_from(list(hint))
    if origin in (typing.Union, types.UnionType):
        return st.one_of(*(for_hint(arg) for arg in typing.get_args(hint)))
    if origin is tuple:
        return st.lists(for_hint(typing.get_args(hint)[0]), max_size=3).map(tuple)
    if origin is Mapping or origin is dict:
        return st.dictionaries(text, scalars, max_size=4)
    if hint is commands.Command or origin is commands.Command:
        return st.one_of(*(builds(cls) for cls in COMMAND_TYPES))
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return builds(hint)
    raise NotImplementedError(f"no strategy for {hint!r}")


def type_hints(cls: type) -> dict[str, Any]:
    """The type hints of the dataclass ``cls``'s fields, as its source writes them.

    Not ``typing.get_type_hints(cls)``: a class that mypyc compiled (the compiled
    build, ``scripts/compile``) keeps in ``__annotations__`` the types it checks at
    run time (``str | None`` is no type it can check), not the source's. So the
    annotations are read from the module's ``.py`` (beside its extension when
    compiled) and evaluated in the module, which holds the same names in either build.
    """
    hints: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):  # a base's fields first, as dataclasses orders them
        if not dataclasses.is_dataclass(klass):
            continue
        module = sys.modules[klass.__module__]
        assert module.__file__ is not None
        path = Path(module.__file__)
        source = path.with_name(path.name.split(".")[0] + ".py")
        tree = ast.parse(source.read_text())
        (body,) = (
            node
            for node in tree.body
            if isinstance(node, ast.ClassDef) and node.name == klass.__name__
        )
        for stmt in body.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                hints[stmt.target.id] = eval(ast.unparse(stmt.annotation), vars(module))
    return hints


def builds(cls: type) -> st.SearchStrategy[Any]:
    """Instances of the dataclass ``cls``, every field drawn from its type hint."""
    hints = type_hints(cls)
    if cls is Hello:  # only a version we speak round-trips whole (see decode_message)
        return st.builds(
            Hello,
            version=st.just(PROTOCOL_VERSION),
            client_name=text,
            token=st.none() | text,
            max_frame_size=uints,
        )
    return st.builds(cls, **{f.name: for_hint(hints[f.name]) for f in dataclasses.fields(cls)})


commands_ = st.one_of(*(builds(cls) for cls in COMMAND_TYPES))
effects_ = st.one_of(*(builds(cls) for cls in EFFECT_TYPES))
reply_values = for_hint(type_hints(Reply)["value"])
messages: st.SearchStrategy[Message] = st.one_of(*(builds(cls) for cls in MESSAGE_TYPES))


@st.composite
def command_and_reply(draw: st.DrawFn) -> tuple[Any, Any]:
    """A command and a reply value of a type that command replies."""
    command = draw(commands_)
    reply_type = draw(st.sampled_from(REPLY_TYPES[type(command)]))
    if reply_type is int and float in REPLY_TYPES[type(command)]:
        # A whole number of seconds may travel as an int and is read back as a float:
        # only ints a float holds exactly come back equal.
        return command, draw(st.integers(0, 2**53))
    return command, draw(for_hint(reply_type))


def sample(hint: Any) -> Any:
    """One fixed, valid, non-empty value of the type ``hint`` (None only if nothing else)."""
    origin = typing.get_origin(hint)
    fixed: dict[Any, Any] = {int: 7, float: 1.5, bool: True, str: "s", bytes: b"b"}
    if hint in fixed:
        return fixed[hint]
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return next(iter(hint))
    if origin in (typing.Union, types.UnionType):
        args = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        return sample(args[0]) if args else None
    if origin is tuple:
        return (sample(typing.get_args(hint)[0]),)
    if origin is Mapping or origin is dict:
        return {"max_sessions": 5}
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        hints = type_hints(hint)
        return hint(**{f.name: sample(hints[f.name]) for f in dataclasses.fields(hint)})
    raise NotImplementedError(f"no sample for {hint!r}")


def sample_messages() -> list[Message]:
    """At least one sample of every message, every command, every reply and every effect."""
    out: list[Message] = [Hello(), Ping(7), Welcome(), Pong(7)]
    out += [Welcome(role="standby", leader="t3:6390")]  # (at their defaults, left out)
    out += [Welcome(deadlock_detection=False)]  # (role and leader sent at their defaults)
    out += [Refused(sample(ErrorCode), "no"), GoingAway(sample(ErrorCode), "bye")]
    out += [Request(7, sample(cls)) for cls in COMMAND_TYPES]
    out += [Reply(7, sample(cls)) for cls in REPLY_RECORD_TYPES]
    out += [Reply(7, None), Reply(7, True), Reply(7, 2.5)]
    # (A read a standby may answer, and its answer: the trailing fields of version 11.)
    out += [
        Request(7, commands.DescribeNode("n"), max_staleness=0.5, min_index=3),
        Reply(7, None, index=9),
    ]
    out += [Failure(7, sample(ErrorCode), "bad")]
    out += [Push(sample(cls)) for cls in EFFECT_TYPES]
    return out
