"""The one exception tree (tenure.errors): where each error sits, and what the codes map to."""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path

import pytest

from tenure import errors
from tenure.errors import (
    AcquireCancelledError,
    ClientClosedError,
    ConfigError,
    CorruptLogError,
    ErrorCode,
    InvalidArgumentError,
    LostError,
    SessionClosedError,
    TenureError,
    error_from_code,
)


def test_every_error_class_is_a_documented_tenure_error() -> None:
    classes = [v for v in vars(errors).values() if inspect.isclass(v) and issubclass(v, Exception)]
    assert len(classes) >= 20
    for cls in classes:
        assert issubclass(cls, TenureError), cls.__name__
        assert vars(cls).get("__doc__"), f"{cls.__name__} has no docstring of its own"


def test_cancelled_has_its_own_class_that_is_not_asyncios() -> None:
    error = error_from_code(ErrorCode.CANCELLED, "superseded")
    assert type(error) is AcquireCancelledError
    assert str(error) == "superseded"
    assert not isinstance(error, asyncio.CancelledError | LostError)
    assert errors.code_of(error) is ErrorCode.CANCELLED


def test_a_closed_client_is_a_refinement_of_a_closed_session() -> None:
    assert issubclass(ClientClosedError, SessionClosedError)
    assert ClientClosedError.code is ErrorCode.SESSION_CLOSED
    assert type(error_from_code(ErrorCode.SESSION_CLOSED, "x")) is SessionClosedError


def test_the_server_start_up_errors_are_in_the_tree_and_where_they_were() -> None:
    from tenure import server
    from tenure.server._config import serve_config, settings
    from tenure.server._durability import storage

    assert server.ConfigError is serve_config.ConfigError is settings.ConfigError is ConfigError
    assert server.CorruptLogError is storage.CorruptLogError is CorruptLogError
    assert issubclass(ConfigError, InvalidArgumentError)
    assert issubclass(ConfigError, ValueError)
    assert issubclass(CorruptLogError, TenureError)
    # They never travel: no wire code turns into them.
    assert type(error_from_code(ErrorCode.INVALID_ARGUMENT, "x")) is InvalidArgumentError
    assert type(error_from_code(ErrorCode.INTERNAL, "x")) is TenureError


@pytest.mark.parametrize(
    ("offset", "text"), [(7, "/d/log-1: bad at byte offset 7"), (None, "/d/log-1: bad")]
)
def test_a_corrupt_log_error_names_the_file_and_the_place(offset: int | None, text: str) -> None:
    error = CorruptLogError(Path("/d/log-1"), offset, "bad")
    assert str(error) == text
    assert (error.path, error.offset, error.problem) == (Path("/d/log-1"), offset, "bad")
