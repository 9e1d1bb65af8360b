"""How the etcd:// backend's parts are wired: given in constructors, not fetched from a home.

Each part of a session on etcd is given the parts it calls in its constructor
(:func:`tenure.backends.etcd._store.compose` builds them, in one place). A protocol of
the package is left only where a part calls back into what owns it or tells it
something (the store's :class:`~tenure.backends.etcd._store.EtcdHome`, the view's
members, an armed watch): none has a getter handing out another part, as the twelve
"homes" the old locator was cut into did (31 getters in all). These tests failed on
that wiring.
"""

from __future__ import annotations

import ast
from pathlib import Path

import tenure.backends.etcd

PACKAGE = Path(tenure.backends.etcd.__file__).parent

#: Every protocol the package may declare, and who calls whom through it.
CALLBACKS = {
    "EtcdHome": "the store tells the client that made it that it ended",
    "NodeMember": "a node's view tells this client's sessions of the node's news",
    "Armed": "the session's end fails each of its armed watches",
    # (The session each part is bound to, typed with the parts of the store's
    # BoundSession it calls back: SessionView, SessionLosses, SessionWork.)
    "HoldsHome": "the holds tell their session of a grant lost, and read its end",
    "RecordHome": "the record tells its session it was lost, and has its re-attach sent",
    "PrefixWatchHome": "a prefix watch ends with its session, and waits by its work",
}


def _protocols() -> dict[str, ast.ClassDef]:
    found: dict[str, ast.ClassDef] = {}
    for path in sorted(PACKAGE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and any(
                isinstance(base, ast.Name) and base.id == "Protocol" for base in node.bases
            ):
                found[f"{path.name}:{node.name}"] = node
    return found


def test_the_only_protocols_are_calls_back_to_an_owner() -> None:
    names = sorted(name.split(":")[1] for name in _protocols())
    assert names == sorted(CALLBACKS)


def test_no_protocol_hands_out_a_part() -> None:
    getters = [
        f"{where}.{item.name}"
        for where, cls in _protocols().items()
        for item in cls.body
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
        and any(
            isinstance(decorator, ast.Name) and decorator.id == "property"
            for decorator in item.decorator_list
        )
    ]
    assert getters == []
