"""tools/faults/netns.py and tools/faults/lin_cuts.py without a process: what iproute2
prints, read back; the rules written; names refused; the nemesis's first round in
namespaces (the real thing: tests/faults/test_netns.py)."""

from __future__ import annotations

import os
import shutil

import pytest

from tools.faults import lin_cuts, lin_nemesis, netns_slots
from tools.faults.netns import HOST, Net, NetnsError, connections, rule_lines
from tools.faults.netns_slots import link_names, namespace_names, slot_of
from tools.faults.target import IDLE_TIMEOUT, MEMBERS, REPLICATED


def test_namespaces_and_links_are_read_from_ip_s_listings() -> None:
    listing = "tnr3-hub (id: 0)\ntnr3-t0 (id: 1)\nother\n\n"
    assert namespace_names(listing) == ["tnr3-hub", "tnr3-t0", "other"]
    links = (
        "1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN\\    link/loopback\n"
        "7: tnr3@if2: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP\n"
    )
    assert link_names(links) == ["lo", "tnr3"]


@pytest.mark.parametrize(
    ("name", "slot"),
    [("tnr3", 3), ("tnr12-hub", 12), ("tnr0-w7", 0), ("tnrprobe-41", None), ("tnr3x", None),
     ("eth0", None), ("tnr3-", None)],
)  # fmt: skip
def test_only_the_nets_own_names_have_a_slot(name: str, slot: int | None) -> None:
    assert slot_of(name) == slot


def test_a_cut_is_one_blackhole_rule_per_direction_in_a_stable_order() -> None:
    addresses = {"a": "10.203.4.10", "b": "10.203.4.11"}
    assert rule_lines([("b", "a"), ("a", "b")], addresses, True) == [
        "rule add from 10.203.4.10 to 10.203.4.11 blackhole prio 100",
        "rule add from 10.203.4.11 to 10.203.4.10 blackhole prio 100",
    ]
    assert rule_lines([("a", "b")], addresses, False) == [
        "rule del from 10.203.4.10 to 10.203.4.11 blackhole prio 100"
    ]


def test_connections_are_read_from_ss() -> None:
    listing = (
        "0      0          10.203.4.10:39084   10.203.4.11:9100\n"
        '0      12         10.203.4.10:39090   10.203.4.12:9100 users:(("python",pid=7,fd=3))\n'
    )
    assert connections(listing) == {
        ("10.203.4.10:39084", "10.203.4.11:9100"),
        ("10.203.4.10:39090", "10.203.4.12:9100"),
    }
    assert connections("") == set()


def test_a_member_name_must_fit_a_link_name_and_the_net_must_be_open() -> None:
    net = Net()
    for bad in ("", "W0", "a-b", "abcdefghijk", "hub", HOST, "0a"):
        with pytest.raises(ValueError, match="not a member name"):
            net.add(bad)
    with pytest.raises(NetnsError, match="not open"):
        net.add("w0")
    assert net.command(HOST, ["true"]) == ["true"]
    with pytest.raises(KeyError):
        net.command("w0", ["true"])
    net.close()  # nothing to undo: idempotent


def test_in_namespaces_the_kernels_cuts_come_first_and_replace_the_proxies() -> None:
    cluster = frozenset({IDLE_TIMEOUT, REPLICATED})
    faults = list(lin_nemesis.faults_of(cluster, netns=True))
    assert faults[: len(lin_cuts.FIRST)] == list(lin_cuts.FIRST)
    assert set(faults) == {*lin_nemesis.REPLICATED_FAULTS, *lin_cuts.KERNEL_FAULTS}
    assert (
        lin_nemesis.faults_of(cluster, netns=True)["answers-lost"]
        is not (lin_nemesis.COMMON["answers-lost"])
    )
    # etcd has no cut from etcd: the others keep their order.
    etcd = list(lin_nemesis.faults_of(frozenset({MEMBERS}), netns=True))
    assert etcd == [
        "answers-lost",
        "client-cut-from-leader",
        "isolate-leader",
        *lin_nemesis.MEMBER_FAULTS,
    ]
    # Without namespaces, as before: the target's own, then the proxies'.
    assert list(lin_nemesis.faults_of(cluster)) == [
        *lin_nemesis.REPLICATED_FAULTS,
        *lin_nemesis.COMMON,
    ]


def test_without_root_or_iproute2_it_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    netns_slots.unavailable.cache_clear()
    try:
        assert netns_slots.unavailable() == "network namespaces need root (ip netns add)"
        monkeypatch.setattr(os, "geteuid", lambda: 0)
        monkeypatch.setattr(shutil, "which", lambda *args, **kwargs: None)
        netns_slots.unavailable.cache_clear()
        assert "iproute2's ip is not installed" in (netns_slots.unavailable() or "")
    finally:
        netns_slots.unavailable.cache_clear()
