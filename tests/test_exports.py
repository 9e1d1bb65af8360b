"""The public namespace is curated: __all__ is sorted, complete and documented."""

from __future__ import annotations

import importlib
import inspect

import pytest

PUBLIC_MODULES = [
    "tenure",
    "tenure.errors",
    "tenure.testing",
    "tenure.client",
    "tenure.fencing",
    "tenure.lowlevel",  # the low level the recipes stand on, the library's and a user's
    "tenure.server.plug",  # public to tenure.compat: the faces' one way into the server
]


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_all_is_sorted_and_resolves(name: str) -> None:
    module = importlib.import_module(name)
    exported = list(module.__all__)
    assert exported == sorted(exported), f"{name}.__all__ is not sorted"
    assert len(set(exported)) == len(exported)
    for attr in exported:
        assert hasattr(module, attr), f"{name}.{attr} is exported but missing"


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_every_public_name_has_a_docstring(name: str) -> None:
    module = importlib.import_module(name)
    for attr in module.__all__:
        value = getattr(module, attr)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert inspect.getdoc(value), f"{name}.{attr} has no docstring"


def test_public_classes_are_not_missing_from_tenure() -> None:
    import tenure
    import tenure.client

    missing = set(tenure.client.__all__) - set(tenure.__all__) - {"Opening"}
    assert not missing, f"tenure does not re-export {sorted(missing)}"


def test_errors_tree_has_one_root() -> None:
    from tenure import errors

    for attr in errors.__all__:
        value = getattr(errors, attr)
        if inspect.isclass(value) and issubclass(value, Exception):
            assert issubclass(value, errors.TenureError), attr
            doc = inspect.getdoc(errors) or ""
            assert attr in doc, f"{attr} is not drawn in the errors docstring"


def test_error_codes_round_trip() -> None:
    from tenure import errors

    for code in errors.ErrorCode:
        error = errors.error_from_code(code, "message")
        assert str(error) == "message"
        if code is errors.ErrorCode.TIMEOUT:
            assert isinstance(error, TimeoutError)
        else:
            assert errors.code_of(error) in (code, errors.ErrorCode.INTERNAL)
    assert type(errors.error_from_code(9999, "new server")) is errors.TenureError
