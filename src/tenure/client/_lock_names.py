"""The lock name of a ``@tenure.locked`` function: a template formatted from each call.

``@tenure.locked("report-{report.id}")`` names its mutex per call with
:meth:`str.format` syntax: each field is a parameter of the decorated function, with
attribute and index access after it (``{report.id}``, ``{ids[0]}``, ``{opts[kind]}``),
a conversion and a format spec (``{day:%Y-%m-%d}``, ``{name!r}``). The call's
arguments are bound to the function's signature, defaults applied, so a field names
a parameter however the caller passed it (by position, by keyword, or not at all).

A field that names no parameter is refused when the function is decorated; a value
that cannot be read or formatted when it is called (a missing attribute or key, a
bad spec), with InvalidArgumentError naming the template and the field, before
anything is sent. Numbered and automatic fields (``{0}``, ``{}``) are refused: a
name says what it is.

The rest of what the decorators share is here too: :class:`LockSpec`, their checked
arguments, and how a function is described in its lock's owner data.
"""

from __future__ import annotations

import inspect
import re
import string
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tenure.client import _args
from tenure.errors import InvalidArgumentError

__all__ = ["LockName", "LockSpec", "lock_spec"]

#: The parameter a field starts with: up to its first attribute or index.
_ROOT = re.compile(r"[^.\[]*")


class LockName:
    """A lock name template, checked against the function it names the locks of."""

    def __init__(self, template: str, fn: Callable[..., object]) -> None:
        self.template = template
        self.function = _describe(fn)
        self._signature = inspect.signature(fn)
        parameters = self._signature.parameters
        self.fields = tuple(_fields(template))
        for field in self.fields:
            root = _ROOT.match(field)[0]  # type: ignore[index]  # (matches any string)
            if not root or root.isdigit():
                raise InvalidArgumentError(
                    f"lock name {template!r}: field {{{field}}} is positional; name a "
                    f"parameter of {self.function} instead"
                )
            if root not in parameters:
                raise InvalidArgumentError(
                    f"lock name {template!r}: field {{{field}}} names no parameter of "
                    f"{self.function}{self._signature}"
                )
        # A constant name ("{{" is a brace): made and checked now, once.
        self._constant = None if self.fields else _args.semaphore_name(template.format())

    def format(self, args: Sequence[object], kwargs: Mapping[str, object]) -> str:
        """The lock name of the call ``fn(*args, **kwargs)``.

        Raises:
            TypeError: the arguments do not fit the function (as its call would).
            InvalidArgumentError: a field cannot be read or formatted, or the name
                made is not a valid semaphore name (too long, empty...).
        """
        if self._constant is not None:
            return self._constant
        try:
            bound = self._signature.bind(*args, **kwargs)
        except TypeError as error:
            raise TypeError(f"{self.function}(): {error}") from None
        bound.apply_defaults()
        name = _Formatter(self).vformat(self.template, (), bound.arguments)
        try:
            return _args.semaphore_name(name)
        except InvalidArgumentError as error:
            raise InvalidArgumentError(
                f"lock name {self.template!r} of {self.function} made {name!r:.80}: {error}"
            ) from None


class _Formatter(string.Formatter):
    """``str.format`` that says which field of which template it could not format."""

    def __init__(self, name: LockName) -> None:
        self._name = name
        self._field = ""

    def get_field(self, field_name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        self._field = field_name
        try:
            return super().get_field(field_name, args, kwargs)
        except Exception as error:
            raise self._refusal("cannot read", error) from error

    def convert_field(self, value: Any, conversion: str | None) -> Any:
        try:
            return super().convert_field(value, conversion)
        except Exception as error:
            raise self._refusal("cannot convert", error) from error

    def format_field(self, value: Any, format_spec: str) -> Any:
        try:
            return super().format_field(value, format_spec)
        except Exception as error:
            raise self._refusal("cannot format", error) from error

    def _refusal(self, what: str, error: Exception) -> InvalidArgumentError:
        return InvalidArgumentError(
            f"lock name {self._name.template!r} of {self._name.function}: {what} "
            f"field {{{self._field}}}: {type(error).__name__}: {error}"
        )


def _fields(template: str) -> Iterator[str]:
    """The field names of ``template``, those nested in format specs included."""
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as error:  # a lone brace, an unclosed field
        raise InvalidArgumentError(
            f"lock name {template!r} is not a format string: {error}"
        ) from None
    for _literal, field, spec, conversion in parsed:
        if field is not None:
            yield field
        if conversion not in (None, "r", "s", "a"):
            raise InvalidArgumentError(
                f"lock name {template!r}: field {{{field}!{conversion}}} has an unknown "
                "conversion (!r, !s and !a are)"
            )
        if spec:
            yield from _fields(spec)


def _describe(fn: Callable[..., object]) -> str:
    """``module.qualname`` of ``fn``: how messages and the lock's owner data name it."""
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None) or repr(fn)
    return f"{module}.{qualname}" if module else qualname


@dataclass(frozen=True, slots=True)
class LockSpec:
    """A decorator's checked arguments (see ``tenure.locked``)."""

    template: str
    #: None waits forever; 0 with ``blocking`` False only tries.
    timeout: float | None
    blocking: bool
    node: str | None
    reentrant: bool
    #: The owner data; None: the decorated function's name.
    data: bytes | None

    def wait(self) -> float | None:
        """The acquire's timeout: 0 (a try) when not blocking."""
        return self.timeout if self.blocking else 0

    def owner_data(self, name: LockName) -> bytes:
        """What the lock's holder shows (``tenure describe``): ``data``, or the function."""
        return name.function.encode() if self.data is None else self.data


def lock_spec(
    name: object,
    timeout: object,
    blocking: object,
    node: object,
    reentrant: object,
    data: object,
) -> LockSpec:
    """The decorator's arguments, checked when it is made (InvalidArgumentError naming one)."""
    if not isinstance(name, str) or not name:
        raise InvalidArgumentError(f"the lock name must be a non-empty str, got {name!r:.80}")
    wait = _args.timeout(timeout)
    blocking = _args.flag("blocking", blocking)
    if not blocking and wait is not None:
        raise InvalidArgumentError(
            "timeout= with blocking=False: blocking=False only tries (as threading.Lock "
            "refuses both); to wait a while and then skip, catch the TimeoutError"
        )
    return LockSpec(
        template=name,
        timeout=wait,
        blocking=blocking,
        node=None if node is None else _args.node_name(node),
        reentrant=_args.flag("reentrant", reentrant),
        data=None if data is None else _args.as_data(data),
    )
