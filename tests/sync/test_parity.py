"""The sync face cannot drift from the async one: their surfaces are compared here.

``tenure.sync`` is written by hand over ``tenure.client``. This test walks every
public class and function of the async API (``tenure.__all__`` and
``tenure.client.__all__``) and checks its sync counterpart (the tables below):

* every public name of the async class (methods, properties, and the public
  attributes its methods assign to ``self``) exists on the sync class, under the
  same name (``aclose`` is ``close``);
* methods have the same parameters (names, kinds, defaults and annotations) as
  :func:`inspect.signature` reads them; ``async def`` becomes a plain method;
* return types correspond: an async class becomes its sync counterpart, an
  ``Opening[X]`` (awaitable and async context manager) becomes the sync ``X``
  itself (a context manager), an awaitable or coroutine of ``X`` becomes ``X``, an
  async iterator becomes an iterator of the corresponding items, a list of async
  objects a list of their twins, a function passed in (``Callable[[A], Awaitable[R]]``)
  a plain function of the twins (``Callable[[sync A], R]``); every other type is the
  same;
* an async context manager is a context manager, an async iterator an iterator;
* every public name of the sync classes has a docstring.

A new public method or parameter on an async class fails this test until its sync
counterpart exists. Intended differences are listed in ``ALLOWED`` (async names
without a sync twin) and ``SYNC_ONLY`` (sync names without an async twin), each
with its reason; an entry that no longer matches anything fails the test too.
"""

from __future__ import annotations

import ast
import collections.abc
import inspect
import textwrap
import types
import typing
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import tenure
import tenure.client
import tenure.sync
from tenure.client import Opening
from tenure.client._recipes import RECIPES

#: async class -> its sync counterpart.
CLASSES: dict[type, type] = {
    tenure.client.Client: tenure.sync.Client,
    tenure.client.Session: tenure.sync.Session,
    tenure.client.SessionLoop: tenure.sync.SessionLoop,
    tenure.client.GroupMember: tenure.sync.GroupMember,
    tenure.client.Lease: tenure.sync.Lease,
    tenure.client.Lock: tenure.sync.Lock,
    tenure.client.ReadLock: tenure.sync.ReadLock,
    tenure.client.WriteLock: tenure.sync.WriteLock,
    tenure.client.Leadership: tenure.sync.Leadership,
    tenure.client.EndSignal: tenure.sync.EndSignal,
}

#: Each recipe's class -> its sync twin, from the recipe registry (one line per recipe).
CLASSES.update(
    {
        getattr(tenure.client, recipe.cls): getattr(tenure.sync, recipe.cls)
        for recipe in RECIPES
        if recipe.cls is not None
    }
)

#: async function -> its sync counterpart.
FUNCTIONS: dict[Callable[..., Any], Callable[..., Any]] = {
    tenure.client.connect: tenure.sync.connect,
    tenure.client.default_client: tenure.sync.default_client,
    tenure.client.close_default_client: tenure.sync.close_default_client,
    tenure.client.default_session: tenure.sync.default_session,
    tenure.client.locked: tenure.sync.locked,
    tenure.client.current_lock: tenure.sync.current_lock,
}

#: Public async names that the sync face shares as they are (no counterpart needed).
SHARED: dict[str, str] = {
    "Capability": "a value (enum); the sync face uses the same one",
    "SessionTicket": "a value (frozen dataclass) that both faces take and return as is",
    "LeaderState": "a value (frozen dataclass) that sync Election.leader/observe return as is",
    "GroupView": "a value (frozen dataclass) that sync Group.watch yields as is",
    "PartitionView": "a value (frozen dataclass) that sync Partition.view/changes give as is",
    "CacheChange": "a value (frozen dataclass) that both faces' Cache.changes() yield",
    "MAX_COUNT": "a constant",
    "Defaults": "a value (frozen dataclass): the default backend and node, one per process",
    "configure": "one process's settings for both faces (tenure.sync.configure is the same)",
    "configured": "one process's settings for both faces (tenure.sync.configured is the same)",
    "MAX_REENTRANT_DEPTH": "a constant (the default max_depth of a reentrant mutex)",
    "MAX_CLAIM_SECONDS": "a constant (the longest at_least or at_most of a claim)",
    "NodeConfig": "a value, passed to create_node by both faces",
    "NodeDescription": "a value returned by both faces",
    "OwnerInfo": "a value (inside SemaphoreDescription)",
    "SemaphoreDescription": "a value returned by both faces",
    "WaiterInfo": "a value (inside SemaphoreDescription)",
    "ClientIdentity": "a value (a client's, and inside owners, waiters, session summaries)",
    "MutexDescription": "a value returned by both faces' Mutex.describe()",
    "RWLockDescription": "a value returned by both faces' RWLock.describe()",
    "SemaphoreSummary": "a value returned by both faces' list_semaphores()",
    "SessionSummary": "a value returned by both faces' list_sessions()",
    "WhyReport": "a value returned by both faces' why()",
    "WhyHolder": "a value (inside WhyReport)",
    "WhyWait": "a value (inside WhyHolder)",
    "WhyWaiter": "a value (inside WhyReport)",
    "WhyLink": "a value (inside WhyReport)",
    "WhyRoot": "a value (inside WhyReport)",
    "TopReport": "a value returned by both faces' top()",
    "NameStat": "a value (inside TopReport)",
    "Opening": "the sync face returns the opened object itself (checked via return types)",
    "errors": "one error hierarchy for both faces",
    "DeadlockError": "an error of tenure.errors, raised by both faces",
    "BrokenDeadlock": "a value (inside NodeDescription)",
    "__version__": "a string",
    "Observer": "a protocol that both faces' connect(observers=) take (called on the loop)",
    "AttemptObserver": "a protocol an Observer returns, called on the loop by both faces",
    "Attempt": "a value given to observers, the same for both faces",
    "add_observer": "process-wide: it observes the sync face's clients too",
    "remove_observer": "process-wide: it observes the sync face's clients too",
}

#: Async names whose sync twin is spelt otherwise.
RENAMES = {"aclose": "close", "__aenter__": "__enter__", "__aexit__": "__exit__"}

#: Protocols: an async class with the first must have the second in sync.
PROTOCOLS = {
    "__aenter__": "__enter__",
    "__aexit__": "__exit__",
    "__aiter__": "__iter__",
    "__anext__": "__next__",
    "__await__": "wait",
}

#: (async class, name): why the sync class lacks it or differs on purpose.
ALLOWED: dict[tuple[type, str], str] = {
    (tenure.client.Client, "backend"): (
        "the backend object lives on the portal loop and its methods are coroutines; "
        "sync code reaches the loop through client.portal instead"
    ),
    (tenure.client.EndSignal, "end"): (
        "only the async object ends itself; the sync signal mirrors its end"
    ),
    (tenure.client.EndSignal, "wait"): (
        "a blocking wait is threading.Event.wait(timeout) -> bool, since a blocked "
        "thread cannot be cancelled; the reason is then read from .reason"
    ),
    (tenure.client.EndSignal, "__await__"): "blocking code waits with .wait() instead",
}

#: (sync class, name): why the sync class has a name its async twin lacks.
SYNC_ONLY: dict[tuple[type, str], str] = {
    (tenure.sync.Client, "portal"): "the loop thread the async client runs on",
    (tenure.sync.Client, "async_client"): (
        "the async client itself, for coroutines run on the portal (integrations')"
    ),
    (tenure.sync.Client, "closed"): "close() must refuse a second close from another thread",
    (tenure.sync.Session, "portal"): (
        "the loop thread its calls go through (the client's portal), for sync recipes"
    ),
    (tenure.sync.Session, "async_session"): (
        "the async session itself, for coroutines run on the portal (as Client.async_client)"
    ),
    (tenure.sync.Session, "keep_lease"): (
        "a sync recipe's lease kept as its async lease's one twin (the async session "
        "keeps its leases itself)"
    ),
    **{
        (cls, name): reason
        for cls in (
            tenure.sync.Session,
            tenure.sync.Lease,
            tenure.sync.HeldLocks,
            tenure.sync.GroupMember,
            tenure.sync.Partition,
        )
        for name, reason in {
            "ended": "blocking code's `lost.is_set()`, under the name the docs use",
            "on_lost": (
                "loss-only callbacks for blocking code, which cannot await `lost`; "
                "the async face has lost.add_callback for any end"
            ),
        }.items()
    },
    (tenure.sync.EndSignal, "is_set"): "it is a threading.Event (the async one is awaited)",
    (tenure.sync.EndSignal, "set"): "inherited from threading.Event",
    (tenure.sync.EndSignal, "clear"): "inherited from threading.Event",
    (tenure.sync.EndSignal, "isSet"): "inherited from threading.Event",
}


# -- reading a class's surface ---------------------------------------------------------


def assigned_attributes(cls: type) -> set[str]:
    """Public names the methods of ``cls`` (and its tenure bases) assign to ``self``."""
    names: set[str] = set()
    for klass in cls.__mro__:
        if not klass.__module__.startswith("tenure"):
            continue
        tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        for node in ast.walk(tree):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, ast.AnnAssign):
                targets = [node.target]
            for target in targets:
                if (
                    isinstance(target, ast.Attribute)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == "self"
                    and not target.attr.startswith("_")
                ):
                    names.add(target.attr)
    return names


def public_names(cls: type) -> set[str]:
    """The public surface of ``cls``: what ``dir`` shows, plus its instance attributes."""
    return {name for name in dir(cls) if not name.startswith("_")} | assigned_attributes(cls)


def static_member(cls: type, name: str) -> object:
    """The class-level member (function, property...), or None for an instance attribute."""
    try:
        return inspect.getattr_static(cls, name)
    except AttributeError:
        return None


def hints(function: Callable[..., Any]) -> dict[str, Any]:
    """Resolved annotations; names imported only for type checking come from the API."""
    namespace = {**vars(tenure.client), **getattr(function, "__globals__", {})}
    return typing.get_type_hints(function, globalns=namespace)


# -- what an async type becomes in sync ------------------------------------------------

ASYNC_ITERATORS = (
    collections.abc.AsyncGenerator,
    collections.abc.AsyncIterator,
    collections.abc.AsyncIterable,
)


class IteratorOf:
    """The expected sync form of an async iterator type: any iterator of ``item``."""

    def __init__(self, item: object) -> None:
        self.item = item

    def __repr__(self) -> str:
        return f"Iterator[{self.item!r}]"


def to_sync(hint: object, owner: type) -> object:
    """The sync type that corresponds to the async ``hint`` (in a member of ``owner``)."""
    if hint is typing.Self:
        return CLASSES[owner]
    if isinstance(hint, type) and hint in CLASSES:
        return CLASSES[hint]
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Opening:
        return to_sync(args[0], owner)
    if origin in (collections.abc.Coroutine, collections.abc.Awaitable):  # awaited: its result
        result = args[-1]
        return type(None) if result is None else to_sync(result, owner)
    if origin is collections.abc.Callable and args and isinstance(args[0], typing.ParamSpec):
        # A function decorated (``locked``): the same parameters, and plainly what the
        # async one's coroutine gives.
        return collections.abc.Callable[args[0], to_sync(args[1], owner)]
    if origin is collections.abc.Callable and args and isinstance(args[0], list):
        # A function passed in (``lead``'s ``work``): it takes the sync twins and
        # returns plainly what the async one's awaitable gives.
        params = [to_sync(param, owner) for param in args[0]]
        return collections.abc.Callable[params, to_sync(args[1], owner)]
    if origin is type:  # a class passed in (``kind=Lock``): its sync twin
        return type[to_sync(args[0], owner)]
    if origin in ASYNC_ITERATORS:
        return IteratorOf(to_sync(args[0], owner))
    if origin in (types.UnionType, typing.Union):
        return typing.Union[tuple(to_sync(arg, owner) for arg in args)]  # noqa: UP007
    if origin is list:  # a list of async objects (``leases()``): a list of their twins
        return list[to_sync(args[0], owner)]  # type: ignore[misc]
    return hint


def resolved(hint: object, cls: type) -> object:
    """A sync ``hint`` with ``Self`` and the type variables of ``cls``'s bases filled in."""
    if hint is typing.Self:
        return cls
    if isinstance(hint, typing.TypeVar):
        for klass in cls.__mro__:
            for base in getattr(klass, "__orig_bases__", ()):
                origin = typing.get_origin(base)
                parameters = getattr(origin, "__parameters__", ())
                if hint in parameters:
                    return typing.get_args(base)[parameters.index(hint)]
    return hint


def matches(expected: object, actual: object, cls: type) -> bool:
    """Whether the sync type ``actual`` (in a member of ``cls``) is the ``expected`` one."""
    actual = resolved(actual, cls)
    if isinstance(expected, IteratorOf):
        origin = typing.get_origin(actual) or actual
        args = typing.get_args(actual)
        if not (isinstance(origin, type) and issubclass(origin, Iterator)):
            return False
        if args:
            return matches(expected.item, args[0], cls)
        item = typing.get_type_hints(origin.__next__).get("return")
        return matches(expected.item, item, origin)
    return expected == actual


# -- the checks ------------------------------------------------------------------------


def shape(params: list[inspect.Parameter]) -> str:
    """Parameters as a signature reads, without annotations."""
    return str(inspect.Signature([p.replace(annotation=p.empty) for p in params]))


def compare_functions(
    where: str, a_fn: Callable[..., Any], s_fn: Callable[..., Any], a_cls: type | None
) -> list[str]:
    """Differences between an async function and its sync twin."""
    problems: list[str] = []
    if inspect.iscoroutinefunction(s_fn) or inspect.isasyncgenfunction(s_fn):
        problems.append(f"{where}: the sync version is async")
    a_params = list(inspect.signature(a_fn).parameters.values())
    s_params = list(inspect.signature(s_fn).parameters.values())
    a_hints, s_hints = hints(a_fn), hints(s_fn)
    s_cls = CLASSES[a_cls] if a_cls is not None else type(None)
    owner = a_cls if a_cls is not None else type(None)
    # A class as a default (``kind=Lease``) is expected as its sync twin.
    a_shape = [(p.name, p.kind, CLASSES.get(p.default, p.default)) for p in a_params]
    s_shape = [(p.name, p.kind, p.default) for p in s_params]
    if a_shape != s_shape:
        problems.append(
            f"{where}: parameters differ: async {shape(a_params)} vs sync {shape(s_params)}"
        )
    for param in a_params:
        if param.name in a_hints and param.name in s_hints:
            expected = to_sync(a_hints[param.name], owner)
            if not matches(expected, s_hints[param.name], s_cls):
                problems.append(
                    f"{where}: parameter {param.name!r} is {s_hints[param.name]!r}, "
                    f"expected {expected!r}"
                )
    a_return, s_return = a_hints.get("return"), s_hints.get("return")
    if inspect.isasyncgenfunction(a_fn) and typing.get_origin(a_return) is None:
        a_return = collections.abc.AsyncIterator[Any]
    expected = to_sync(a_return, owner)
    if not matches(expected, s_return, s_cls):
        problems.append(f"{where}: returns {s_return!r}, expected {expected!r}")
    return problems


def compare_member(a_cls: type, name: str) -> list[str]:
    """Differences between the async member ``name`` and its sync twin."""
    s_cls = CLASSES[a_cls]
    s_name = RENAMES.get(name, name)
    where = f"{s_cls.__module__}.{s_cls.__qualname__}.{s_name}"
    if s_name not in public_names(s_cls) and not hasattr(s_cls, s_name):
        return [f"{where} is missing (async {a_cls.__qualname__}.{name} has it)"]
    a_member, s_member = static_member(a_cls, name), static_member(s_cls, s_name)
    if isinstance(a_member, property):
        if isinstance(s_member, property):
            expected = to_sync(hints(a_member.fget).get("return"), a_cls)  # type: ignore[arg-type]
            actual = hints(s_member.fget).get("return")  # type: ignore[arg-type]
            if not matches(expected, actual, s_cls):
                return [f"{where}: is {actual!r}, expected {expected!r}"]
        elif s_member is not None:
            return [f"{where}: async has a property, sync a {type(s_member).__name__}"]
        return []
    if inspect.isfunction(a_member):
        if not inspect.isfunction(s_member):
            return [f"{where}: async has a method, sync has {s_member!r}"]
        return compare_functions(where, a_member, s_member, a_cls)
    if a_member is None and inspect.isfunction(s_member):
        return [f"{where}: async has an attribute, sync a method"]
    return []


def doc_problems(cls: type) -> list[str]:
    """Public methods and properties of the sync ``cls`` without a docstring."""
    problems = [] if inspect.getdoc(cls) else [f"{cls.__qualname__} has no docstring"]
    for name in sorted(public_names(cls)):
        member = static_member(cls, name)
        function = member.fget if isinstance(member, property) else member
        if inspect.isfunction(function) and not (function.__doc__ or "").strip():
            problems.append(f"{cls.__qualname__}.{name} has no docstring")
    return problems


def async_exports() -> dict[str, object]:
    """Everything the async API exports, by name."""
    names = set(tenure.__all__) | set(tenure.client.__all__)
    return {name: getattr(tenure, name, None) or getattr(tenure.client, name) for name in names}


# -- the tests -------------------------------------------------------------------------


def test_every_async_export_is_mapped_or_shared() -> None:
    mapped = {cls.__name__ for cls in CLASSES} | {fn.__name__ for fn in FUNCTIONS}
    unmapped = sorted(set(async_exports()) - mapped - set(SHARED))
    assert not unmapped, f"add these to the parity tables (or SHARED, with a reason): {unmapped}"
    stale = sorted(set(SHARED) - set(async_exports()))
    assert not stale, f"SHARED names that are no longer exported: {stale}"


def test_sync_counterparts_are_exported_and_documented() -> None:
    exported = list(tenure.sync.__all__)
    assert exported == sorted(exported)
    counterparts: list[Any] = [*CLASSES.values(), *FUNCTIONS.values()]
    for counterpart in counterparts:
        assert getattr(tenure.sync, counterpart.__name__, None) is counterpart, counterpart
    for name in exported:
        assert inspect.getdoc(getattr(tenure.sync, name)), f"tenure.sync.{name}: no docstring"


@pytest.mark.parametrize("a_cls", list(CLASSES), ids=lambda cls: cls.__name__)
def test_sync_class_has_every_public_name_of_the_async_one(a_cls: type) -> None:
    problems: list[str] = []
    for name in sorted(public_names(a_cls)):
        if (a_cls, name) not in ALLOWED:
            problems += compare_member(a_cls, name)
    assert not problems, "the sync face drifted:\n" + "\n".join(problems)


@pytest.mark.parametrize("a_cls", list(CLASSES), ids=lambda cls: cls.__name__)
def test_protocols_carry_over(a_cls: type) -> None:
    s_cls = CLASSES[a_cls]
    problems: list[str] = []
    for a_name, s_name in PROTOCOLS.items():
        if not hasattr(a_cls, a_name) or (a_cls, a_name) in ALLOWED:
            continue
        if not hasattr(s_cls, s_name):
            problems.append(f"{s_cls.__qualname__} lacks {s_name} (async has {a_name})")
            continue
        a_fn, s_fn = getattr(a_cls, a_name), getattr(s_cls, s_name)
        # What ``async with``/``async for`` give is what ``with``/``for`` give.
        a_returns = to_sync(hints(a_fn).get("return"), a_cls)
        s_returns = hints(s_fn).get("return")
        if a_name in ("__aenter__", "__anext__") and not matches(a_returns, s_returns, s_cls):
            problems.append(
                f"{s_cls.__qualname__}.{s_name} returns {s_returns!r}, not {a_returns!r}"
            )
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("a_fn", list(FUNCTIONS), ids=lambda fn: fn.__name__)
def test_functions_match(a_fn: Callable[..., Any]) -> None:
    problems = compare_functions(f"tenure.sync.{a_fn.__name__}", a_fn, FUNCTIONS[a_fn], None)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("s_cls", list(CLASSES.values()), ids=lambda cls: cls.__name__)
def test_every_public_sync_name_has_a_docstring(s_cls: type) -> None:
    problems = doc_problems(s_cls)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("a_cls", list(CLASSES), ids=lambda cls: cls.__name__)
def test_sync_only_names_are_intended(a_cls: type) -> None:
    s_cls = CLASSES[a_cls]
    a_names = {RENAMES.get(name, name) for name in public_names(a_cls)}
    intended = {name for cls, name in SYNC_ONLY if issubclass(s_cls, cls)}
    extra = sorted(public_names(s_cls) - a_names - intended)
    assert not extra, f"sync {s_cls.__qualname__} has names the async one lacks: {extra}"


def test_allowlists_are_not_stale() -> None:
    stale = [key for key in ALLOWED if key[1] not in public_names(key[0]) | set(PROTOCOLS)]
    stale += [key for key in SYNC_ONLY if key[1] not in public_names(key[0])]
    assert not stale, f"allowlist entries that match nothing any more: {stale}"
