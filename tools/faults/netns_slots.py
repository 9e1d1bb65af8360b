"""The slots of the fault suite's private networks on one machine, and iproute2's calls.

Runs on one machine (test workers, developers) each take a *slot*, 0 to
:data:`SLOTS` - 1: a lock file ``LOCKS/SLOT.lock`` held (``flock``, released by the
kernel when its holder dies) while its net lives; the net's names are ``tnrSLOT-NAME``
(namespaces) and ``tnrSLOT`` (the host's end of its link), its addresses
``10.203.SLOT.0/24``. A slot with a namespace or a link whose lock nobody holds was
left by a run that was killed: :func:`sweep` kills what still runs in its namespaces
(by PID: that run's servers and members) and removes them, and the namespaces of
:func:`unavailable`'s probes whose process is gone.

Every call of ``ip`` or ``ss`` is bounded (:data:`CALL_WAIT`), its failure a
:class:`NetnsError` saying the command and what it printed.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Final

__all__ = [
    "CALL_WAIT",
    "LOCKS",
    "PREFIX",
    "SLOTS",
    "NetnsError",
    "batch",
    "binary",
    "host_links",
    "ip",
    "link_names",
    "lock",
    "namespace_names",
    "namespaces",
    "remove",
    "run",
    "slot_of",
    "sweep",
    "unavailable",
]

#: Bound of one ``ip`` or ``ss`` call, in seconds.
CALL_WAIT: Final = 15.0
#: The first two bytes of every net's addresses (a private range: RFC 1918).
PREFIX: Final = "10.203"
#: Slots (the third byte of the addresses): nets that may exist at once.
SLOTS: Final = 250
#: Where the slots' lock files live.
LOCKS: Final = Path("/run/tenure-netns")
_PROBE: Final = re.compile(r"tnrprobe-(\d+)")
_OURS: Final = re.compile(r"tnr(\d+)(?:-[a-z][a-z0-9]*)?")


class NetnsError(RuntimeError):
    """An ``ip`` or ``ss`` call failed or took too long (its command and output say why)."""


def binary(name: str) -> str | None:
    """Where iproute2's ``name`` (``ip``, ``ss``) is, None if it is not installed."""
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin:/usr/bin:/bin")


def run(argv: Sequence[str], stdin: str | None = None, *, check: bool = True) -> str:
    """Run ``argv`` (bounded); its output; NetnsError if it fails and ``check``."""
    try:
        done = subprocess.run(
            list(argv), input=stdin, capture_output=True, text=True, timeout=CALL_WAIT
        )
    except subprocess.TimeoutExpired:
        raise NetnsError(f"{' '.join(argv)}: no answer within {CALL_WAIT}s") from None
    if check and done.returncode != 0:
        raise NetnsError(f"{' '.join(argv)}: {done.stderr.strip() or done.returncode}")
    return done.stdout


def ip(*args: str, stdin: str | None = None, check: bool = True) -> str:
    """``ip ARGS`` (see :func:`run`)."""
    return run([binary("ip") or "ip", *args], stdin, check=check)


def batch(namespace: str | None, lines: Iterable[str]) -> None:
    """Several ``ip`` commands in one call (in ``namespace``; None: the host's)."""
    text = "".join(f"{line}\n" for line in lines)
    if text:
        ip(*(("-n", namespace) if namespace else ()), "-batch", "-", stdin=text)


@functools.cache
def unavailable() -> str | None:
    """Why no network namespace can be made here (to skip, or fail in CI), or None."""
    if os.geteuid() != 0:
        return "network namespaces need root (ip netns add)"
    for tool in ("ip", "ss"):
        if binary(tool) is None:
            return f"iproute2's {tool} is not installed (scripts/bootstrap test installs iproute2)"
    probe = f"tnrprobe-{os.getpid()}"
    try:
        ip("netns", "add", probe)
        ip("netns", "del", probe)
    except (NetnsError, OSError) as error:
        return f"ip netns does not work here: {error}"
    return None


def namespace_names(listing: str) -> list[str]:
    """The names in ``ip netns list``'s output (``NAME`` or ``NAME (id: N)`` a line)."""
    return [line.split()[0] for line in listing.splitlines() if line.strip()]


def link_names(listing: str) -> list[str]:
    """The names in ``ip -o link show``'s output (``N: NAME[@PEER]: ...`` a line)."""
    lines = [line.split(":") for line in listing.splitlines()]
    return [parts[1].strip().split("@")[0] for parts in lines if len(parts) > 2]


def slot_of(name: str) -> int | None:
    """The slot of one of the nets' namespaces or host links (``tnrSLOT-...``,
    ``tnrSLOT``), None for any other name."""
    found = _OURS.fullmatch(name)
    return int(found.group(1)) if found else None


def namespaces() -> list[str]:
    """Every network namespace's name."""
    return namespace_names(ip("netns", "list"))


def host_links() -> list[str]:
    """The names of the host's links."""
    return link_names(ip("-o", "link", "show"))


def lock(slot: int) -> int | None:
    """The descriptor holding ``slot``'s lock, or None if a live process holds it."""
    LOCKS.mkdir(parents=True, exist_ok=True)
    fd = os.open(LOCKS / f"{slot}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def remove(slot: int, names: Iterable[str], links: Iterable[str]) -> list[str]:
    """Remove slot ``slot``'s link and namespaces, killing what runs in them (its lock
    held by the caller); the names removed."""
    removed = []
    for link in links:
        if link == f"tnr{slot}":
            ip("link", "del", link, check=False)
            removed.append(link)
    for name in names:
        if slot_of(name) != slot:
            continue
        for pid in ip("netns", "pids", name, check=False).split():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), signal.SIGKILL)  # a process of this net's run, by PID
        ip("netns", "del", name, check=False)
        removed.append(name)
    return removed


def sweep() -> list[str]:
    """Remove the namespaces and links of slots no live process holds (killed runs),
    and the probes of :func:`unavailable` whose process is gone; the names removed."""
    names, links = namespaces(), host_links()
    removed: list[str] = []
    for name in names:
        probe = _PROBE.fullmatch(name)
        if probe and not Path(f"/proc/{probe.group(1)}").exists():
            ip("netns", "del", name, check=False)
            removed.append(name)
    slots = {slot_of(name) for name in [*names, *links]}
    for slot in sorted(s for s in slots if s is not None):
        fd = lock(slot)
        if fd is None:
            continue
        try:
            removed += remove(slot, names, links)
        finally:
            os.close(fd)
    return removed
