"""Network namespaces for the fault suite: a private network whose links the kernel cuts.

A :class:`Net` is one run's network. Its *hub* is a namespace that routes between the
others and goes nowhere else; the host joins it through a veth pair (the harness
watches the processes from there); every process that must be cut off on its own (a
server, an etcd member, a worker) gets a namespace of its own (:meth:`Net.add`),
joined to the hub by a veth pair, with one address of ``10.203.SLOT.0/24``: the hub
``.1``, the host ``.2``, the members from ``.10``. A namespace routes that subnet to
the hub and nothing else, and the hub has no route out: traffic goes only to the
namespaces made here and the host. A process runs inside one through
``ip netns exec`` (:meth:`Net.command`: ``ip`` execs it, so its PID is the one to
signal).

**Cuts** (:meth:`Net.cut`) are the kernel's: a policy rule in the hub
(``ip rule add from A to B blackhole``) drops every packet from A to B that the hub
forwards. Silently: the hub forwards, so the failed lookup sends no ICMP, and neither
end sees a reset; a TCP connection across the cut stays established on both ends,
its segments retransmitted into nothing (half-open), a new one hangs in its SYN. A
cut has a direction: B's packets still reach A (a UDP datagram shows it; TCP needs
both ways, but a cut of B's answers alone still lets A's requests in, to be applied).
The hub checks no source route (``rp_filter`` 0), or a rule dropping A to B would
also drop B's packets to A. **Resets** (:meth:`Net.reset`) are the kernel's too:
``ss -K`` destroys a namespace's TCP connections (sock_destroy: the process sees
``ECONNABORTED`` at once, the peer a RST, which it takes only if nothing the destroyed
end sent is missing there: else, by RFC 5961, it answers with a challenge ACK and its
end stays half-open), and is checked to have done so (a kernel without
``CONFIG_INET_DIAG_DESTROY`` ignores it silently).

**Slots.** Runs on one machine each take a slot of their own, a lock held while the
net lives, and what a killed run left is swept at the next :meth:`Net.open`
(:mod:`tools.faults.netns_slots`).

Only iproute2 (``ip``, ``ss``): Debian installs neither in its smallest images
(scripts/bootstrap does). Needs root (:func:`unavailable` says what is missing).
Every call is bounded (:data:`~tools.faults.netns_slots.CALL_WAIT`); :meth:`Net.close`
is idempotent, removes everything the net made, and also runs at the interpreter's exit.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import threading
from collections.abc import Iterable, Sequence
from typing import Final

from tools.faults.netns_slots import (
    PREFIX,
    SLOTS,
    NetnsError,
    batch,
    binary,
    host_links,
    ip,
    lock,
    namespaces,
    remove,
    run,
    sweep,
    unavailable,
)

__all__ = [
    "HOST",
    "HUB",
    "Net",
    "NetnsError",
    "connections",
    "net_of",
    "rule_lines",
    "sweep",
    "unavailable",
]

#: The member name of the host (the harness's side), and of the hub.
HOST: Final = "host"
HUB: Final = "hub"
#: The priority of the hub's cut rules (before the main table's lookup, 32766).
RULE_PRIORITY: Final = 100
#: A member's name: short, as the hub's end of its link is ``h-NAME`` (15 bytes at most).
_NAME: Final = re.compile(r"[a-z][a-z0-9]{0,9}")
#: Addresses of the hub, the host, and the first member (the last byte).
_HUB_BYTE, _HOST_BYTE, _FIRST_BYTE, _LAST_BYTE = 1, 2, 10, 250


def rule_lines(pairs: Iterable[tuple[str, str]], addresses: dict[str, str], on: bool) -> list[str]:
    """The hub's ``ip -batch`` lines that add (``on``) or remove the cuts of ``pairs``
    ((from, to) member names; ``addresses`` by name), in a stable order."""
    verb = "add" if on else "del"
    return [
        f"rule {verb} from {addresses[src]} to {addresses[dst]} blackhole prio {RULE_PRIORITY}"
        for src, dst in sorted(pairs)
    ]


def connections(listing: str) -> set[tuple[str, str]]:
    """The (local, peer) ``address:port`` pairs in ``ss -Htn``'s output."""
    found = set()
    for line in listing.splitlines():
        ends = [word for word in line.split() if ":" in word]
        if len(ends) >= 2:
            found.add((ends[0], ends[1]))
    return found


class Net:
    """One run's private network of namespaces (see the module docstring).

    Use it as a context, or call :meth:`open` and, always, :meth:`close`.
    """

    def __init__(self) -> None:
        """Nothing is made until :meth:`open`."""
        self.slot = -1
        self._fd: int | None = None
        self._members: dict[str, str] = {}
        self._cuts: set[tuple[str, str]] = set()
        self._lock = threading.Lock()  # the nemesis and the target act from threads

    # -- the net ----------------------------------------------------------------------

    def open(self) -> Net:
        """Sweep what killed runs left, take a free slot, make the hub and join the host."""
        sweep()
        for slot in range(SLOTS):
            fd = lock(slot)
            if fd is None:
                continue
            subnet = f"{PREFIX}.{slot}.0/24"
            if ip("-4", "-o", "addr", "show", "to", subnet).strip():
                os.close(fd)  # the host has an address there: not ours to route
                continue
            self.slot, self._fd = slot, fd
            break
        else:
            raise NetnsError(f"no free slot among {SLOTS}: {sorted(namespaces())[:10]}")
        _OPEN.add(self)
        try:
            remove(self.slot, namespaces(), host_links())  # a killed run's, under our lock
            self._make_hub()
        except BaseException:
            self.close()
            raise
        return self

    def __enter__(self) -> Net:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _byte(self, last: int) -> str:
        return f"{PREFIX}.{self.slot}.{last}"

    def _make_hub(self) -> None:
        hub, hub_address = self.namespace(HUB), self._byte(_HUB_BYTE)
        ip("netns", "add", hub)
        # Forwarding on, source checks off (module docstring), before any link exists:
        # a new link takes the defaults.
        settings = "conf/all/rp_filter=0 conf/default/rp_filter=0 ip_forward=1"
        script = "; ".join(
            f"echo {value} > /proc/sys/net/ipv4/{key}"
            for key, value in (pair.split("=") for pair in settings.split())
        )
        ip("netns", "exec", hub, "sh", "-c", script)
        host_link, host_address = f"tnr{self.slot}", self._byte(_HOST_BYTE)
        ip("link", "add", host_link, "type", "veth", "peer", "name", "h-host", "netns", hub)
        batch(
            hub,
            [
                "link set lo up",
                f"addr add {hub_address}/32 peer {host_address}/32 dev h-host",
                "link set h-host up",
            ],
        )
        batch(
            None,
            [
                f"addr add {host_address}/32 peer {hub_address}/32 dev {host_link}",
                f"link set {host_link} up",
                f"route add {self._byte(0)}/24 via {hub_address} dev {host_link}",
            ],
        )
        self._members[HOST] = host_address

    def add(self, name: str) -> str:
        """Make member ``name``'s namespace and its link to the hub; its address."""
        if not _NAME.fullmatch(name) or name in (HUB, HOST):
            raise ValueError(f"not a member name: {name!r} (a-z0-9, 10 at most)")
        with self._lock:
            if self._fd is None:
                raise NetnsError("the net is not open")
            if name in self._members:
                return self._members[name]
            last = _FIRST_BYTE + len(self._members) - 1
            if last > _LAST_BYTE:
                raise NetnsError(f"a net has {_LAST_BYTE - _FIRST_BYTE + 1} members at most")
            address, hub_address = self._byte(last), self._byte(_HUB_BYTE)
            namespace, hub = self.namespace(name), self.namespace(HUB)
            ip("netns", "add", namespace)
            link = f"h-{name}"
            ip("link", "add", link, "netns", hub, "type", "veth", "peer", "name", "veth0",
                "netns", namespace)  # fmt: skip
            batch(hub, [f"addr add {hub_address}/32 peer {address}/32 dev {link}",
                         f"link set {link} up"])  # fmt: skip
            batch(
                namespace,
                [
                    "link set lo up",
                    f"addr add {address}/32 peer {hub_address}/32 dev veth0",
                    "link set veth0 up",
                    f"route add {self._byte(0)}/24 via {hub_address} dev veth0",
                ],
            )
            self._members[name] = address
            return address

    def namespace(self, name: str) -> str:
        """The namespace of member ``name`` (the hub's for :data:`HUB`)."""
        return f"tnr{self.slot}-{name}"

    def address(self, name: str) -> str:
        """Member ``name``'s address (the host's for :data:`HOST`)."""
        return self._members[name]

    def name_of(self, address: str) -> str | None:
        """The member whose address is ``address``, None if none is."""
        return next((name for name, own in self._members.items() if own == address), None)

    @property
    def members(self) -> list[str]:
        """Every member's name, the host's first, in the order they were added."""
        return list(self._members)

    def command(self, name: str, argv: Sequence[str]) -> list[str]:
        """``argv`` run in member ``name``'s namespace (``ip`` execs it: same PID)."""
        if name == HOST:
            return list(argv)
        if name not in self._members:
            raise KeyError(f"no member {name!r} in net {self.slot}")
        return [binary("ip") or "ip", "netns", "exec", self.namespace(name), *argv]

    # -- faults -----------------------------------------------------------------------

    @property
    def cuts(self) -> frozenset[tuple[str, str]]:
        """The cuts in place, as (from, to) member names."""
        with self._lock:
            return frozenset(self._cuts)

    def cut(self, pairs: Iterable[tuple[str, str]], on: bool = True) -> None:
        """Drop (``on``) or let through again every packet from A to B, for each (A, B)
        of ``pairs`` (one direction each; module docstring)."""
        with self._lock:
            wanted = {pair for pair in pairs if (pair in self._cuts) != on}
            batch(self.namespace(HUB), rule_lines(wanted, self._members, on))
            self._cuts = self._cuts | wanted if on else self._cuts - wanted

    def cut_between(self, a: Iterable[str], b: Iterable[str], on: bool = True) -> None:
        """Cut (``on``) or heal both directions between every member of ``a`` and of ``b``."""
        firsts, seconds = list(a), list(b)
        pairs = [(x, y) for x in firsts for y in seconds if x != y]
        self.cut([*pairs, *((y, x) for x, y in pairs)], on)

    def heal(self) -> None:
        """Remove every cut."""
        self.cut(self.cuts, False)

    def reset(self, name: str, peers: Iterable[str]) -> int:
        """Destroy member ``name``'s TCP connections to ``peers`` (``ss -K``); how many.

        NetnsError if one survives: the kernel cannot destroy sockets.
        """
        addresses = [self._members[peer] for peer in peers]
        if not addresses:
            return 0
        expression = " or ".join(f"dst {address}" for address in addresses).split()
        ss = [binary("ss") or "ss", "-N", self.namespace(name), "-Htn"]
        before = self._connections(ss, expression)
        if before:
            run([*ss, "-K", "state", "connected", *expression])
            left = before & self._connections(ss, expression)
            if left:
                raise NetnsError(
                    f"ss -K left {sorted(left)} of {name}: this kernel cannot destroy "
                    "sockets (CONFIG_INET_DIAG_DESTROY)"
                )
        return len(before)

    @staticmethod
    def _connections(ss: list[str], expression: list[str]) -> set[tuple[str, str]]:
        """The established connections ``ss`` lists."""
        return connections(run([*ss, "state", "established", *expression]))

    # -- teardown ---------------------------------------------------------------------

    def close(self) -> None:
        """Kill what still runs in the net's namespaces, remove them and the host's
        link, and free the slot (bounded; idempotent)."""
        with self._lock:
            fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            remove(self.slot, namespaces(), host_links())
        finally:
            os.close(fd)
            _OPEN.discard(self)
            self._members.clear()
            self._cuts.clear()


def net_of(target: object) -> Net | None:
    """The :class:`Net` a fault-suite target runs in (its ``net``), None if none."""
    net = getattr(target, "net", None)
    return net if isinstance(net, Net) else None


#: The nets open in this process, closed at its exit if their owner did not.
_OPEN: set[Net] = set()


@atexit.register
def _close_all() -> None:
    for net in list(_OPEN):
        with contextlib.suppress(NetnsError, OSError):
            net.close()
