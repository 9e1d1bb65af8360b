"""The engine's rules are a table: every command type has exactly one handler."""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import pytest

from tenure._core import commands as c
from tenure._core.engine import HANDLERS, Engine
from tenure._core.state import EngineState
from tenure.errors import InvalidArgumentError


def _command_types() -> set[type[c.Command[object]]]:
    return {
        value
        for value in vars(c).values()
        if inspect.isclass(value) and issubclass(value, c.Command) and value is not c.Command
    }


def test_every_command_type_has_a_handler_and_nothing_else_does():
    assert set(HANDLERS) == _command_types()


def test_handlers_are_plain_functions_of_the_state():
    for command_type, handler in HANDLERS.items():
        assert inspect.isfunction(handler), command_type
        state, command, now = inspect.signature(handler).parameters
        assert (state, command, now) == ("state", "cmd", "now"), command_type


def test_the_engine_is_the_state_and_its_verbs_with_no_handler_methods():
    # No mixin chain: the only base is the state.
    assert Engine.__mro__[1:] == (EngineState, object)


def test_a_subclass_of_a_command_is_not_that_command():
    @dataclass(frozen=True)
    class Sneaky(c.DescribeNode):
        extra: int = 0

    with pytest.raises(InvalidArgumentError, match="unknown command Sneaky"):
        Engine().apply(Sneaky("n"), 0.0)
