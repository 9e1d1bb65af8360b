"""No module reads another module's ``_private`` names, outside a declared friend list.

A leading underscore says "this module's own": ``Session._backend_session`` is for the
client's recipes, not for users, and a module that reads another's ``_name`` depends on
what that module is free to change. Where such a read is the design (a package's public
object and the recipes written over it, a cross-check for tests), it is declared here,
in :data:`FRIENDS`: which module (or package) may read which module's private names,
with why. Any other read fails the test, and so does a friend line that no read needs
any more (the list only shrinks as the code gets better).

What counts as a read, in a module ``M`` of ``src/tenure`` (read with :mod:`ast`):

* ``x._name`` (a load or a store; ``_name`` not a dunder) where ``x`` is not ``self``,
  ``cls`` or ``super()``, and ``_name`` is not defined in ``M`` itself (a ``def`` or
  ``class`` of that name, an assignment to it, ``self._name = ...``, a ``__slots__``
  entry): a module may use its own privates on any object of its own classes;
* ``from m import _name`` where ``m._name`` is not a module (private modules are the
  package's layout, which CONTRIBUTING's layer rules govern: ``tests/test_layers.py``).

A read's *owner* is every module of ``src/tenure`` that defines ``_name``; a friend
line ``(reader, owner, why)`` allows the reads in ``reader`` (a module, or a package
and everything under it) of the names ``owner`` defines. :data:`PUBLIC_BY_CONVENTION`
are the standard library's public names spelled with an underscore (a named tuple's
``_replace``, ``os._exit``).
"""

from __future__ import annotations

import ast
import importlib.util
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from tests.imports import SOURCE, absolute, modules, package_of
from tests.parsed import syntax_tree

#: Public names with a leading underscore, by the standard library's convention.
PUBLIC_BY_CONVENTION = frozenset({"_replace", "_asdict", "_fields", "_make", "_exit"})


@dataclass(frozen=True, slots=True)
class Read:
    """One read: module ``reader`` reads ``name`` (``text`` at ``line``), which the
    modules ``owners`` define."""

    reader: str
    name: str
    text: str
    path: Path
    line: int
    owners: frozenset[str]


@dataclass(frozen=True, slots=True)
class Friend:
    """``reader`` (a module, or a package: every module under it) may read the private
    ``names`` that ``owner`` defines, because ``why``."""

    reader: str
    owner: str
    names: tuple[str, ...]
    why: str

    def allows(self, read: Read) -> bool:
        within = read.reader == self.reader or read.reader.startswith(self.reader + ".")
        # (an owner of the standard library's: the reads of its names are the reader's
        # use of its objects, whose type the reading cannot know)
        owned = self.owner in read.owners or not self.owner.startswith("tenure")
        return within and read.name in self.names and owned


#: Who may read whose privates, and why. Readers are modules or packages; every name
#: must be defined by its owner and read by a reader (test_every_friend_is_needed).
FRIENDS: tuple[Friend, ...] = (
    # The simulation runs asyncio's own selector loop and transports (tenure.testing.sim:
    # the code under test runs on what it runs on in production): a crashed process's
    # transports and tasks are left as its death leaves them, which asyncio has no
    # public way to say.
    Friend(
        "tenure.testing.sim._loop",
        "asyncio.selector_events",
        ("_sock", "_closing", "_conn_lost"),
        "a crashed process's transport: its socket gone, nothing to close or warn of, "
        "a write to it dropped as after a lost connection",
    ),
    Friend(
        "tenure.testing.sim._loop",
        "asyncio.events",
        ("_when",),
        "a host's clock moved: its timers, the objects their owners hold, fire by its time",
    ),
    # The public low level (tenure.lowlevel): the one door from a recipe, the library's
    # or a user's, to the session's and its leases' own parts.
    Friend(
        "tenure.lowlevel",
        "tenure.client._session_holds",
        ("_acquire", "_lock_reentrant"),
        "lowlevel.acquire and lock_reentrant are the session's methods taken unbound: the "
        "mutex's block makes no call more (its call budget)",
    ),
    Friend(
        "tenure.lowlevel",
        "tenure.client._recipe_session",
        ("_backend_session",),
        "lowlevel.backend_session: the backend's session, the session's loss error once ended",
    ),
    # The session's own parts: its leases' lives, who asks, its reentrant holds.
    Friend(
        "tenure.client._session_holds",
        "tenure.client._lease",
        ("_grant", "_lose", "_caller"),
        "the session releases, restates and loses its leases by their grants, and keeps "
        "who acquired each",
    ),
    Friend(
        "tenure.client._asking",
        "tenure.client._lease",
        ("_caller",),
        "the session's stakes: a granted lease becomes its caller's stake",
    ),
    Friend(
        "tenure.client._client",
        "tenure.client._session",
        ("_bind", "_close", "_listener", "_claim_releaser"),
        "the client makes, binds and closes its sessions",
    ),
    Friend(
        "tenure.client._client",
        "tenure.client._session_holds",
        ("_adopt",),
        "the client hands a re-attached session its holds",
    ),
    Friend(
        "tenure.client._client",
        "tenure.client._cache",
        ("_start",),
        "the client starts the caches it makes",
    ),
    Friend(
        "tenure.client._session",
        "tenure.client._session_holds",
        ("_end", "_lease_lost"),
        "the session's backend listener tells its base of a loss",
    ),
    # The sync face: a portal over the async objects, never a second implementation.
    Friend(
        "tenure.sync._held",
        "tenure.client._loss",
        ("_end_block",),
        "a sync held thing waits for its async twin's end",
    ),
    Friend(
        "tenure.sync._leases",
        "tenure.client._lease",
        ("_leave",),
        "a sync lease leaves through its async lease",
    ),
    Friend(
        "tenure.sync._objects",
        "tenure.sync._leases",
        ("_lease",),
        "the session keeps one sync wrapper per async lease",
    ),
    # The conformance kit: it tests the backend contract itself.
    Friend(
        "tenure.testing.conformance.test_cache",
        "tenure.client._cache",
        ("_session",),
        "the cache's own session is the one the test disconnects",
    ),
)


def private(name: str) -> bool:
    """``_x`` is private; ``__x__`` is not; nor is a name public by convention."""
    dunder = name.startswith("__") and name.endswith("__")
    return name.startswith("_") and not dunder and name not in PUBLIC_BY_CONVENTION


def defined(tree: ast.AST) -> set[str]:
    """The private names a module defines: its functions, classes, assignments,
    attributes of ``self``/``cls`` and ``__slots__`` entries."""
    return _scan(tree)[0]


def _scan(tree: ast.AST) -> tuple[set[str], list[ast.Attribute | ast.ImportFrom]]:
    """One walk of a module: the private names it defines, and the attributes and
    ``from`` imports that may read another module's."""
    found: set[str] = set()
    candidates: list[ast.Attribute | ast.ImportFrom] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            if isinstance(node.ctx, ast.Store) and _own_object(node.value):
                found.add(node.attr)
            elif private(node.attr) and not _own_object(node.value):
                candidates.append(node)
        elif isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Store):
                found.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found.add(node.name)
        elif isinstance(node, ast.ImportFrom):
            candidates.append(node)
        elif isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "__slots__" for target in node.targets
        ):
            found |= {
                part.value
                for part in ast.walk(node.value)
                if isinstance(part, ast.Constant) and isinstance(part.value, str)
            }
    return {name for name in found if private(name)}, candidates


def _own_object(node: ast.expr) -> bool:
    """``self``, ``cls`` or ``super()``: the object whose class the code is in."""
    if isinstance(node, ast.Name):
        return node.id in ("self", "cls")
    return (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"
    )


@cache
def private_reads(package: Path) -> tuple[Read, ...]:
    """Every read of another module's private name in the modules of ``package``."""
    known = modules(package)
    scans = {name: _scan(syntax_tree(path)) for name, path in known.items()}
    owners_of: dict[str, set[str]] = {}
    for name, (names, _) in scans.items():
        for private_name in names:
            owners_of.setdefault(private_name, set()).add(name)
    found: list[Read] = []
    for name, (own, candidates) in scans.items():
        path = known[name]
        package_name = package_of(name, path)
        for node in candidates:
            if isinstance(node, ast.Attribute):
                if node.attr not in own:
                    owners = frozenset(owners_of.get(node.attr, set()) - {name})
                    text = ast.unparse(node)
                    found.append(Read(name, node.attr, text, path, node.lineno, owners))
                continue
            base = absolute(package_name, node)
            for alias in node.names:
                if private(alias.name) and f"{base}.{alias.name}" not in known:
                    text = f"from {base} import {alias.name}"
                    found.append(Read(name, alias.name, text, path, node.lineno, frozenset({base})))
    return tuple(found)


def unfriendly(reads: tuple[Read, ...], friends: tuple[Friend, ...]) -> list[Read]:
    """The reads no friend line allows."""
    return [read for read in reads if not any(friend.allows(read) for friend in friends)]


def _where(read: Read) -> str:
    return f"{read.path.relative_to(SOURCE.parent).as_posix()}:{read.line}"


def test_no_private_read_outside_the_friend_list() -> None:
    reads = private_reads(SOURCE)
    assert reads  # (the reading finds the declared ones: else it checks nothing)
    found = unfriendly(reads, FRIENDS)
    assert not found, (
        f"{len(found)} read(s) of another module's private names that FRIENDS (in "
        "tests/test_private_reads.py) does not allow; give the owner a public name or "
        "accessor when the reader is meant to use it, or declare the friendship with "
        "why:\n"
        + "\n".join(
            f"{_where(read)}: {read.reader} reads {read.text} "
            f"(defined in {', '.join(sorted(read.owners)) or 'no module of tenure'})"
            for read in found
        )
    )


def _standard_module(name: str) -> Path | None:
    """The source of standard-library module ``name`` (None: not one, or not found)."""
    if name.startswith("tenure"):
        return None
    spec = importlib.util.find_spec(name)
    origin = None if spec is None else spec.origin
    return Path(origin) if origin is not None and origin.endswith(".py") else None


def test_every_friend_is_needed() -> None:
    """A friend's names are its owner's, and each is still read (else the line goes)."""
    reads = private_reads(SOURCE)
    known = modules(SOURCE)
    wrong = []
    for friend in FRIENDS:
        source = known.get(friend.owner) or _standard_module(friend.owner)
        if source is None:
            wrong.append(f"{friend.reader} -> {friend.owner}: no such module")
            continue
        owned = defined(syntax_tree(source))
        for name in friend.names:
            if name not in owned:
                wrong.append(f"{friend.reader} -> {friend.owner}: {name} is not defined there")
            elif not any(friend.allows(read) for read in reads if read.name == name):
                wrong.append(f"{friend.reader} -> {friend.owner}: {name} is read no more")
    assert not wrong, "friend lines to correct or remove:\n" + "\n".join(wrong)


#: The recipes, named (CONTRIBUTING's layout table, docs/recipes.md): the modules of
#: ``tenure.client`` each recipe is written in, over the primitive acquire, the
#: semaphore object and the public low level (a recipe's session is a
#: ``RecipeSession``, reached through ``tenure.lowlevel``), with the parts they are
#: made of; and their sync twins, over the portal. Issue 49 asked that none of them
#: read another module's private names, as a user's recipe could not.
RECIPES = frozenset(
    {
        "tenure.client._semaphore",  # the semaphore object every recipe is over
        "tenure.client._mutex",
        "tenure.client._reentrant",  # a reentrant mutex's shared holds (mutex(reentrant=True))
        "tenure.client._rwlock",
        "tenure.client._lock_all",
        "tenure.client._election",
        "tenure.client._leader",  # Client.lead: the leader runner
        "tenure.client._barrier",
        "tenure.client._latch",
        "tenure.client._counter",
        "tenure.client._rate_limiter",
        "tenure.client._rates_over_core",  # the rate limiter's reservations over the core
        "tenure.client._group",
        "tenure.client._group_member",  # a group's member and views (Group, Partition)
        "tenure.client._partition",
        "tenure.client._claim",
        "tenure.client._cache",
        "tenure.client._cache_changes",  # what a cache's consumers are told
        "tenure.client._recipe_session",  # what a recipe object is made of
        "tenure.sync._semaphore",
        "tenure.sync._mutex",
        "tenure.sync._rwlock",
        "tenure.sync._lock_all",
        "tenure.sync._election",
        "tenure.sync._leader",
        "tenure.sync._barrier",
        "tenure.sync._latch",
        "tenure.sync._counter",
        "tenure.sync._rate_limiter",
        "tenure.sync._group",  # groups and partitions
        "tenure.sync._claim",
        "tenure.sync._cache",
        "tenure.sync._recipe",  # what a sync recipe object is made of
    }
)


def registry_modules() -> set[str]:
    """The module of each class of the recipe registry (``client/_recipes.py``), on
    both faces: the recipes :data:`RECIPES` must name."""
    import tenure.client
    import tenure.sync
    from tenure.client._recipes import RECIPES as REGISTRY

    found: set[str] = set()
    for recipe in REGISTRY:
        if recipe.cls is not None:
            found.add(getattr(tenure.client, recipe.cls).__module__)
            found.add(getattr(tenure.sync, recipe.cls).__module__)
    return found


def test_the_recipes_named_are_the_registrys_and_exist() -> None:
    """:data:`RECIPES` names every module the recipe registry's classes live in (a new
    recipe is named there too), and only modules that exist."""
    known = modules(SOURCE)
    assert known.keys() >= RECIPES, sorted(RECIPES - known.keys())
    missing = registry_modules() - RECIPES
    assert not missing, f"recipe modules RECIPES does not name: {sorted(missing)}"


def test_no_recipe_reads_a_private_name_of_another_module() -> None:
    """The recipes stand on the public low level (``tenure.lowlevel``) and public
    names alone, as a user's recipe would: no friend line lets one in."""
    found = [read for read in private_reads(SOURCE) if read.reader in RECIPES]
    assert not found, "recipes reading another module's private names:\n" + "\n".join(
        f"{_where(read)}: {read.reader} reads {read.text}" for read in found
    )
    friendly = [
        f for f in FRIENDS if f.reader in RECIPES or f.reader in {"tenure.client", "tenure.sync"}
    ]
    assert not friendly, f"friend lines for recipes: {friendly}"


#: The most reads of another module's private names ``src/tenure`` may make (issue 49).
MOST_PRIVATE_READS = 30


def test_at_most_thirty_private_reads() -> None:
    """Issue 49: reads of another module's private names in src/ fell from 109 to at
    most 30, each allowed by a friend line above with its reason."""
    reads = private_reads(SOURCE)
    assert len(reads) <= MOST_PRIVATE_READS, (
        f"{len(reads)} reads of another module's private names (at most "
        f"{MOST_PRIVATE_READS}): give their owners public names\n"
        + "\n".join(f"{_where(read)}: {read.reader} reads {read.text}" for read in reads)
    )


# -- the reading, on a package written for it -------------------------------------------


def test_what_counts_as_a_private_read(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "_helpers.py").write_text("")
    (package / "owner.py").write_text(
        "class Thing:\n"
        "    __slots__ = ('_slot',)\n"
        "    def __init__(self):\n"
        "        self._state = 1\n"
        "    def _hook(self): ...\n"
        "    def same(self, other):\n"
        "        return other._state\n"  # its own module's name: not counted
        "_TABLE = {}\n"
    )
    (package / "reader.py").write_text(
        "from collections import namedtuple\n"
        "from pkg.owner import _TABLE\n"  # a private name of another module: counted
        "from pkg import _helpers\n"  # a private module: the layer rules' business
        "class Mine:\n"
        "    def go(self, thing, point):\n"
        "        self._mine = thing._state\n"  # counted (thing._state)
        "        thing._hook()\n"  # counted
        "        thing._slot = 2\n"  # a store counts too
        "        super()._setup()\n"  # its own class's: not counted
        "        point._replace(x=1).__class__\n"  # public by convention; a dunder
        "        return self._mine, type(self)._mine\n"  # _mine is this module's
    )
    reads = private_reads(package)
    assert sorted((read.reader, read.text, tuple(read.owners)) for read in reads) == [
        ("pkg.reader", "from pkg.owner import _TABLE", ("pkg.owner",)),
        ("pkg.reader", "thing._hook", ("pkg.owner",)),
        ("pkg.reader", "thing._slot", ("pkg.owner",)),
        ("pkg.reader", "thing._state", ("pkg.owner",)),
    ]
    friend = Friend("pkg.reader", "pkg.owner", ("_state", "_hook"), "a test")
    assert [read.text for read in unfriendly(reads, (friend,))] == [
        "from pkg.owner import _TABLE",
        "thing._slot",
    ]
    # A friend covers only its reader (a package: every module under it) and names.
    elsewhere = Friend("pkg.other", "pkg.owner", ("_state", "_hook", "_slot", "_TABLE"), "")
    assert len(unfriendly(reads, (elsewhere,))) == 4
    assert unfriendly(reads, (Friend("pkg", "pkg.owner", elsewhere.names, ""),)) == []
