"""YDB rate-limiter resources as tenure rate limiters: paths, settings, and the tree.

A resource ``a/b`` of a coordination node is the tenure rate limiter
``ratelimiter/a/b`` of the node (:data:`LIMITER_PREFIX`): a persistent semaphore
whose data is its bucket, ``limiter RATE BURST TAT`` (:mod:`tenure._core.rates`),
so ``session.rate_limiter("ratelimiter/a/b", rate, burst)`` of a tenure client is
the very same limiter. The HDRR settings a YDB client gave it are kept, encoded as
given, in the semaphore ``ydb.ratelimiter/a/b`` (:data:`SETTINGS_PREFIX`): YDB
describes a resource with them, and a child's bucket depends on them. A limiter
made by a tenure client has none: its bucket is its settings.

The bucket of a resource with YDB settings holds its *effective* rate and burst,
as YDB's kesus computes them (``ydb/core/kesus/tablet/quoter_resource_tree.cpp``,
``CalcParameters``): its own ``max_units_per_second``, or its parent's effective
rate when it sets none (0), and never above its parent's; the burst is that rate
times its ``max_burst_size_coefficient`` (1 when 0). Its parent is the nearest
ancestor that is a resource.

An acquire goes when the resource's bucket and each of its ancestors' let it: at
the latest of their turns, which each of them then counts as the time the units
went (:func:`take`). So a parent's limit holds for its children together.

A resource's descendants are read from the range of its name in the node's sorted
names (:mod:`.resource_scan`), never by a walk of every semaphore of the node.
"""

from __future__ import annotations

import math
import string
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

from google.protobuf.message import DecodeError
from google.protobuf.unknown_fields import UnknownFieldSet

from tenure._core.node import Node
from tenure._core.rates import LIMITER_WORD, Bucket, bucket_data, check_rate, parse_bucket, reserve
from tenure._core.semaphore import Semaphore
from tenure._core.values import MAX_NAME_BYTES
from tenure.compat.ydb import _protos as pb
from tenure.compat.ydb.resource_scan import ResourceScan
from tenure.errors import InvalidArgumentError

#: Before a resource's path in the name of its limiter semaphore.
LIMITER_PREFIX: Final = "ratelimiter/"
#: Before a resource's path in the name of the semaphore of its YDB settings.
SETTINGS_PREFIX: Final = "ydb.ratelimiter/"
#: The characters of a resource path (YDB's ``ValidResourcePathSymbols``).
_PATH_SYMBOLS: Final = frozenset(string.ascii_letters + string.digits + "._-/:#")
#: The same, as the bytes :func:`_is_path` deletes.
_PATH_BYTES: Final = "".join(sorted(_PATH_SYMBOLS)).encode()
#: The longest resource path: both its semaphores' names must fit tenure's limit.
MAX_PATH_BYTES: Final = MAX_NAME_BYTES - max(len(LIMITER_PREFIX), len(SETTINGS_PREFIX))
#: The burst of a resource that sets no ``max_burst_size_coefficient``, in seconds of
#: its rate (YDB's documented default).
DEFAULT_BURST_COEFFICIENT: Final = 1.0
#: The start of every bucket's data (a cheap test before parsing one).
_BUCKET_START: Final = LIMITER_WORD + b" "

_BAD_REQUEST: Final = pb.Status.BAD_REQUEST


def check_path(path: str) -> str:
    """``path`` if YDB takes it as a resource path (``a/b/c``), else BAD_REQUEST.

    Raises:
        pb.StatusError: empty, not canonical (a slash at either end, an empty part),
            a character YDB refuses, or too long for tenure's semaphore names.
    """
    if not path:
        raise pb.StatusError(_BAD_REQUEST, "Empty resource path is specified.")
    if "/".join(part for part in path.split("/") if part) != path:
        raise pb.StatusError(_BAD_REQUEST, f"Bad resource path: {path!r}.")
    if not _PATH_SYMBOLS.issuperset(path):
        raise pb.StatusError(_BAD_REQUEST, f"Invalid resource path: {path!r}.")
    if len(path) > MAX_PATH_BYTES:
        raise pb.StatusError(_BAD_REQUEST, f"Resource path is longer than {MAX_PATH_BYTES} bytes.")
    return path


def check_settings(resource: Any) -> Any:
    """The ``HierarchicalDrrSettings`` of a ``Resource`` to create or alter, checked as
    YDB checks them (``ValidateProps``) and refused if this server cannot keep them.

    Raises:
        pb.StatusError: BAD_REQUEST naming what is wrong.
    """
    if resource.WhichOneof("type") != "hierarchical_drr":
        raise pb.StatusError(_BAD_REQUEST, "No resource properties.")
    settings = resource.hierarchical_drr
    # Fields of a newer YDB than the protocol this server speaks (metering, the
    # replicated bucket, immediately_fill_up_to...) arrive unknown: refused, never
    # dropped in silence.
    for message, what in ((resource, "Resource"), (settings, "HierarchicalDrrSettings")):
        unknown = sorted({field.field_number for field in UnknownFieldSet(message)})
        if unknown:
            numbers = ", ".join(map(str, unknown))
            why = f"{what} fields {numbers} are not supported by this server"
            raise pb.StatusError(_BAD_REQUEST, why)
    for name in (
        "max_units_per_second",
        "max_burst_size_coefficient",
        "prefetch_coefficient",
        "prefetch_watermark",
    ):
        if not math.isfinite(getattr(settings, name)):
            raise pb.StatusError(_BAD_REQUEST, f"{name} must be finite.")
    for name in ("max_units_per_second", "max_burst_size_coefficient", "prefetch_watermark"):
        if getattr(settings, name) < 0:
            raise pb.StatusError(_BAD_REQUEST, f"{name} can't be less than 0.")
    if settings.prefetch_watermark > 1:
        raise pb.StatusError(_BAD_REQUEST, "prefetch_watermark can't be greater than 1.")
    kept = pb.rate_limiter.HierarchicalDrrSettings()
    kept.CopyFrom(settings)
    return kept


def effective(settings: Any, parent: Bucket | None) -> tuple[float, float]:
    """The rate and burst of a resource with ``settings`` under a parent whose bucket
    is ``parent`` (None: it has none), as the module docstring says.

    Raises:
        pb.StatusError: BAD_REQUEST: a resource without a parent sets no rate, or
            the rate or burst is outside tenure's range.
    """
    own = settings.max_units_per_second
    if parent is None:
        if not own:
            raise pb.StatusError(_BAD_REQUEST, "No MaxUnitsPerSecond parameter in root resource.")
        rate = own
    else:
        rate = min(own, parent.rate) if own else parent.rate
    coefficient = settings.max_burst_size_coefficient or DEFAULT_BURST_COEFFICIENT
    try:
        return check_rate(rate, rate * coefficient)
    except InvalidArgumentError as error:
        why = (
            f"rate {rate:g} units/s with max_burst_size_coefficient {coefficient:g}: "
            f"{error} (the burst is the rate times the coefficient)"
        )
        raise pb.StatusError(_BAD_REQUEST, why) from None


def take(
    chain: list[Resource], count: float, *, wait: bool, max_wait: float | None, now: float
) -> tuple[float, list[tuple[str, bytes, bytes]] | None]:
    """Take ``count`` units from every bucket of ``chain`` (a resource and its
    ancestors) at ``now``: how long until they go, and the limiters' data to write
    (name, data now, new data); None: they could go only past ``max_wait``.

    ``wait``: the units go when every bucket lets them (``required``), at the latest
    of their turns, which each bucket then counts as the time they went; otherwise
    they go now, however far past the limits (``used``: consumed, not asked for).
    For one bucket this is :func:`tenure._core.rates.reserve`'s rule exactly.

    Raises:
        LimitExceededError: waiting for more units than a bucket's burst (they never could go).
        InvalidArgumentError: so many units that a bucket's TAT would be infinite.
    """
    goes = now
    if wait:
        for resource in chain:
            reply, _ = reserve(LIMITER_PREFIX + resource.path, resource.bucket, count, None, now)
            goes = max(goes, reply.at)
        if max_wait is not None and goes - now > max_wait:
            return goes - now, None
    writes = []
    for resource in chain:
        old = resource.bucket
        # As if the units went at ``goes`` (for one bucket, what ``reserve`` records).
        tat = max(old.tat, goes) + count / old.rate
        if not math.isfinite(tat):  # (a bucket holds a finite TAT, or none at all)
            raise InvalidArgumentError(f"{count:g} units are more than any limiter can count")
        new = Bucket(old.rate, old.burst, tat)
        writes.append((LIMITER_PREFIX + resource.path, resource.data, bucket_data(new)))
    return goes - now, writes


@dataclass(frozen=True, slots=True)
class Resource:
    """One resource as its semaphores hold it now.

    ``data``: its limiter's data (its ``bucket``, encoded); ``settings``: its HDRR
    settings as a YDB client gave them (None: the limiter was made otherwise).
    """

    path: str
    data: bytes
    bucket: Bucket
    settings: Any


class Resources:
    """The resources of one node, read from its semaphores (which this never changes)."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.semaphores = node.semaphores

    def get(self, path: str) -> Resource | None:
        """The resource at ``path`` (None: there is none).

        Raises:
            PreconditionFailedError: its limiter's name is a semaphore that is no limiter.
        """
        name = LIMITER_PREFIX + path
        sem = self.semaphores.get(name)
        if sem is None:
            return None
        bucket = parse_bucket(name, sem.data)
        kept = self.semaphores.get(SETTINGS_PREFIX + path)
        settings = None
        if kept is not None:
            try:
                settings = pb.rate_limiter.HierarchicalDrrSettings.FromString(kept.data)
            except DecodeError:  # (not written by this face): as if there were none
                settings = None
        return Resource(path, sem.data, bucket, settings)

    def ancestors(self, path: str) -> list[Resource]:
        """The resources above ``path``, nearest first (a semaphore there that is no
        limiter is none)."""
        found = []
        for above in _proper_prefixes(path):
            if self._is_resource(above):
                resource = self.get(above)
                assert resource is not None
                found.append(resource)
        return found

    def parent(self, path: str) -> Resource | None:
        """The nearest resource above ``path`` (None: there is none)."""
        for above in _proper_prefixes(path):
            if self._is_resource(above):
                return self.get(above)
        return None

    def scan(self, under: str = "", *, roots: bool = False) -> ResourceScan:
        """A pass over the resources below ``under`` (every one for ``""``; ``roots``:
        those without a resource above them), in path order, read a budget of names at
        a time from the range of their names (:mod:`.resource_scan`).

        Only limiters whose names are resource paths count: a tenure semaphore under
        the prefix that holds no bucket, or whose name YDB could not give, does not.
        """
        return ResourceScan(LIMITER_PREFIX, under, _is_limiter, roots=roots)

    def has_children(self, path: str) -> bool:
        """Whether a resource is below ``path`` (the names below it read up to the first
        resource, in one step)."""
        every = len(self.node.semaphore_index) + 2  # (a budget that ends no step)
        return bool(self.scan(path).step(self.node, every, first=True))

    def described(self, resource: Resource) -> Any:
        """The ``HierarchicalDrrSettings`` DescribeResource answers for ``resource``: as
        given, unless its bucket says otherwise (a tenure client made the limiter or
        reconfigured it): then its bucket's rate and burst."""
        settings = resource.settings
        bucket = resource.bucket
        if settings is not None:
            parent = self.parent(resource.path)
            try:
                expected = effective(settings, None if parent is None else parent.bucket)
            except pb.StatusError:
                expected = None
            if expected == (bucket.rate, bucket.burst):
                return settings
        return pb.rate_limiter.HierarchicalDrrSettings(
            max_units_per_second=bucket.rate,
            max_burst_size_coefficient=bucket.burst / bucket.rate,
        )

    def rebucket(self, resource: Resource, settings: Any) -> list[tuple[str, bytes, bytes]]:
        """The limiters' data to write when ``resource`` takes ``settings``: its own, and
        each descendant's with YDB settings whose rate or burst then changes (name,
        data now, new data); what was reserved stays reserved (the TAT is kept).

        Raises:
            pb.StatusError: BAD_REQUEST: the settings would give it, or a descendant,
                no valid rate or burst (nothing is written then).
        """
        parent = self.parent(resource.path)
        rate, burst = effective(settings, None if parent is None else parent.bucket)
        top = Bucket(rate, burst, resource.bucket.tat)
        writes = [(LIMITER_PREFIX + resource.path, resource.data, top)]
        # Each one's bucket as it is to be: read in path order, a parent comes first.
        buckets: dict[str, Bucket] = {}
        for found in self.scan(resource.path).rest(self.node):
            below = self.get(found.path)
            assert below is not None, "a resource the scan found"
            over = top if found.parent is None else buckets[found.parent.path]
            buckets[found.path] = below.bucket
            if below.settings is None:  # (made otherwise: keeps its own)
                continue
            rate, burst = effective(below.settings, over)
            old = below.bucket
            if (rate, burst) != (old.rate, old.burst):
                buckets[found.path] = Bucket(rate, burst, old.tat)
                writes.append((LIMITER_PREFIX + found.path, below.data, buckets[found.path]))
        return [(name, data, bucket_data(bucket)) for name, data, bucket in writes]

    def _is_resource(self, path: str) -> bool:
        """Whether a limiter is at ``path`` (not another kind of semaphore)."""
        sem = self.semaphores.get(LIMITER_PREFIX + path)
        return sem is not None and _holds_bucket(sem)


def settings_data(settings: Any) -> bytes:
    """What the semaphore of a resource's YDB settings holds: them, encoded as given."""
    return bytes(settings.SerializeToString())


def _holds_bucket(sem: Semaphore) -> bool:
    """Whether ``sem`` looks like a limiter (persistent, its data a bucket's)."""
    return not sem.ephemeral and sem.data.startswith(_BUCKET_START)


def _is_limiter(path: str, sem: Semaphore) -> bool:
    """Whether ``sem``, named ``LIMITER_PREFIX + path``, is a resource's limiter."""
    return _holds_bucket(sem) and _is_path(path)


def _is_path(path: str) -> bool:
    """Whether :func:`check_path` takes ``path``: the same rules, at a small cost per
    byte (a scan asks it of every name it reads)."""
    return (
        0 < len(path) <= MAX_PATH_BYTES
        and path.isascii()
        and not path.encode().translate(None, _PATH_BYTES)
        and path[0] != "/"
        and path[-1] != "/"
        and "//" not in path
    )


def _proper_prefixes(path: str) -> Iterator[str]:
    """The paths above ``path``, nearest first (``a/b/c``: ``a/b``, ``a``)."""
    end = path.rfind("/")
    while end > 0:
        yield path[:end]
        end = path.rfind("/", 0, end)
