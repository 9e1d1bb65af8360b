"""The timeline page (``--html``): what it draws of a checked history, read back with
the standard library's HTML parser (the browser's view: ``test_html_browser.py``)."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from tenure.testing import lincheck
from tenure.testing.lincheck._html import write_html
from tenure.testing.lincheck._html_assets import SCRIPT, STYLE

_VOID = frozenset({"meta", "link", "br", "img", "input", "hr", "source", "wbr"})


@dataclass
class Element:
    """One element of the page: its tag, attributes, children and own text."""

    tag: str
    attrs: dict[str, str]
    children: list[Element] = field(default_factory=list)
    text: str = ""

    def iter(self) -> list[Element]:
        """This element and every one under it, in document order."""
        found = [self]
        for child in self.children:
            found += child.iter()
        return found

    def classes(self) -> set[str]:
        """Its CSS classes."""
        return set(self.attrs.get("class", "").split())

    def find(self, tag: str = "", cls: str = "") -> list[Element]:
        """The elements under it (and itself) with ``tag`` and class ``cls``."""
        return [
            e for e in self.iter() if (not tag or e.tag == tag) and (not cls or cls in e.classes())
        ]

    def all_text(self) -> str:
        """Its text and its children's."""
        return self.text + "".join(child.all_text() for child in self.children)


class _Parser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {name: value or "" for name, value in attrs})
        self.stack[-1].children.append(element)
        if tag not in _VOID:
            self.stack.append(element)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.stack[-1].children.append(Element(tag, {name: value or "" for name, value in attrs}))

    def handle_endtag(self, tag: str) -> None:
        for depth in range(len(self.stack) - 1, 0, -1):
            if self.stack[depth].tag == tag:
                del self.stack[depth:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].text += data


def page_of(path: Path) -> Element:
    """The page in ``path``, parsed."""
    parser = _Parser()
    parser.feed(path.read_text(encoding="utf-8"))
    parser.close()
    return parser.root


def history(
    *events: tuple[Any, ...], timed: bool = False, header: dict[str, Any] | None = None
) -> lincheck.History:
    """A history of ``(process, type, f, value[, key])`` events, one line each (with
    ``timed``, each at 100 + 10 * its line)."""
    lines = [json.dumps(header)] if header else []
    for number, (process, kind, f, value, *key) in enumerate(events, start=1):
        event: dict[str, Any] = {"process": process, "type": kind, "f": f, "value": value}
        if key:
            event["key"] = key[0]
        if timed:
            event["time"] = 100 + 10 * number
        lines.append(json.dumps(event))
    return lincheck.read_jsonl(lines)


#: A stale read: p0 reads 1 after p1's write of 2 was read by p2; p3's read of 1,
#: concurrent with it, cannot follow either.
STALE = (
    (0, "invoke", "write", 1),
    (0, "ok", "write", 1),
    (1, "invoke", "write", 2),
    (2, "invoke", "read", None),
    (1, "ok", "write", 2),
    (2, "ok", "read", 2),
    (0, "invoke", "read", None),
    (3, "invoke", "read", None),
    (0, "ok", "read", 1),
    (3, "ok", "read", 1),
)


def drawn(
    tmp_path: Path, checked: lincheck.History, model: str = "register", **bounds: Any
) -> tuple[lincheck.CheckResult, Element]:
    """``checked`` checked under ``model``, drawn, and the page read back."""
    result = lincheck.check(checked, model)
    path = tmp_path / "timeline.html"
    write_html(result, checked, path, **bounds)
    return result, page_of(path)


def ops_of(page: Element) -> dict[int, Element]:
    """Every operation drawn, by its index in the history."""
    return {int(e.attrs["data-op"]): e for e in page.find("g", "op")}


def label(op: Element) -> str:
    """The text on an operation's bar."""
    return next(t for t in op.find("text") if "label" in t.classes()).all_text()


def test_a_violation_marks_the_stuck_operation_the_concurrent_one_and_numbers_the_prefix(
    tmp_path: Path,
) -> None:
    checked = history(*STALE)
    result, page = drawn(tmp_path, checked)
    failed = result.failed()
    assert failed is not None
    assert failed.blocked is not None
    blocked = failed.blocked
    rows = page.find("g", "row")
    assert [row.attrs["data-process"] for row in rows] == ["0", "1", "2", "3"]
    for row in rows:  # each operation in its process's row
        mine = {
            str(op.index)
            for op in checked.operations
            if str(op.process) == row.attrs["data-process"]
        }
        assert {op.attrs["data-op"] for op in row.find("g", "op")} == mine
    ops = ops_of(page)
    stuck = ops[blocked.stuck.index]
    assert "stuck" in stuck.classes()
    assert label(stuck) == "p0 read() -> ok 1"
    assert "from state: 2" in stuck.attrs["data-tip"]
    assert stuck.attrs["data-near"] == "3"  # the prefix's last operation
    concurrent = [op for op in ops.values() if "concurrent" in op.classes()]
    assert [label(op) for op in concurrent] == ["p3 read() -> ok 1"]
    numbered = sorted(
        (int(op.attrs["data-order"]), index)
        for index, op in ops.items()
        if "data-order" in op.attrs
    )
    assert numbered == [(n, op.index) for n, (op, _) in enumerate(blocked.prefix, start=1)]
    second = ops[blocked.prefix[1][0].index]
    assert "#2 of the longest linearizable prefix (3)" in second.attrs["data-tip"]
    assert "state before: 1" in second.attrs["data-tip"]
    assert "state after: 2" in second.attrs["data-tip"]
    assert "state before: None" in ops[blocked.prefix[0][0].index].attrs["data-tip"]
    # the stuck operation's return is marked, and the summary names it and the other
    assert page.find("line", "deadline")
    assert page.find("span", "stuck")  # (the legend's swatch)
    summary = page.find("div", "failure")[0]
    assert "[line 7] p0 read() -> ok 1" in summary.all_text()
    assert "[line 8] p3 read() -> ok 1" in summary.all_text()
    assert "lines 7 to 9" in stuck.attrs["data-tip"]  # no times: the lines say when


def test_a_linearizable_history_numbers_every_operation_in_the_linearization_s_order(
    tmp_path: Path,
) -> None:
    checked = history(
        (0, "invoke", "write", 1),
        (1, "invoke", "read", None),
        (0, "ok", "write", 1),
        (1, "ok", "read", 1),
        (2, "invoke", "cas", [1, 2]),
        (2, "ok", "cas", [1, 2]),
        timed=True,
    )
    result, page = drawn(tmp_path, checked)
    assert result.ok
    header = page.find("header")[0]
    assert "v-ok" in header.classes()
    assert "linearizable" in header.find("span", "verdict")[0].all_text()
    assert not page.find("g", "stuck")
    assert not page.find("div", "failure")
    assert not page.find("span", "stuck")  # nor its swatch in the legend
    ops = ops_of(page)
    linearization = result.keys[0].linearization
    for place, (op, state) in enumerate(linearization, start=1):
        element = ops[op.index]
        assert "lin" in element.classes()
        assert element.attrs["data-order"] == str(place)
        assert f"state after: {result.model.show(state)}" in element.attrs["data-tip"]
        assert f"#{place} of the linearization (3)" in element.attrs["data-tip"]
    write = ops[checked.operations[0].index]
    assert "called at 110, returned at 130 (+20)" in write.attrs["data-tip"]
    section = page.find("section", "key")[0]
    assert section.attrs["data-verdict"] == "linearizable"
    assert "open" in section.find("details")[0].attrs


def test_every_string_of_the_history_stays_text(tmp_path: Path) -> None:
    evil = '</script><script>window.__x = 1</script><img src=x onerror="alert(1)">'
    key = '<b>k</b> & "q"'
    process = "<img src=y onerror=alert(2)>"
    checked = history(
        (process, "invoke", "write", evil, key),
        (process, "ok", "write", evil, key),
        (1, "invoke", "read", None, key),
        (1, "ok", "read", evil + "!", key),
    )
    result, page = drawn(tmp_path, checked)
    assert result.verdict == lincheck.NOT_LINEARIZABLE
    raw = (tmp_path / "timeline.html").read_text()
    assert raw.count("<script") == 1
    assert "<img" not in raw
    assert "<b>" not in raw
    scripts = page.find("script")
    assert len(scripts) == 1
    assert scripts[0].all_text() == SCRIPT
    assert not page.find("img")
    assert not page.find("b")
    assert not [e for e in page.iter() if any(name.startswith("on") for name in e.attrs)]
    # and the text reads back as written
    assert page.find("section", "key")[0].attrs["data-key"] == key
    assert [row.attrs["data-process"] for row in page.find("g", "row")] == ["1", process]
    assert {t.all_text() for t in page.find("text", "process")} == {"p1", f"p{process}"}
    stuck = page.find("g", "stuck")[0]
    read = checked.operations[1]
    assert stuck.attrs["data-tip"].startswith(read.describe() + "\n")
    assert label(stuck) == read.describe()[:47] + "\u2026"  # cut, the tooltip has it all
    assert read.describe() in page.find("div", "failure")[0].all_text()


def test_the_page_allows_its_own_script_and_style_and_fetches_nothing(tmp_path: Path) -> None:
    _, page = drawn(tmp_path, history(*STALE))
    policy = next(
        m.attrs["content"]
        for m in page.find("meta")
        if m.attrs.get("http-equiv") == "Content-Security-Policy"
    )
    assert policy.startswith("default-src 'none';")
    for text in (SCRIPT, STYLE):
        digest = base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in policy
    assert page.find("style")[0].all_text() == STYLE
    raw = (tmp_path / "timeline.html").read_text()
    assert not re.search(r"(src|href)=\"(https?:|//)", raw)


def test_an_info_operation_runs_to_the_right_edge_and_its_process_s_next_takes_a_lane(
    tmp_path: Path,
) -> None:
    checked = history(
        (0, "invoke", "write", 1),
        (1, "invoke", "write", 2),
        (1, "ok", "write", 2),
        (0, "invoke", "read", None),  # invoked again: the write's outcome is unknown
        (0, "ok", "read", 1),
    )
    result, page = drawn(tmp_path, checked)
    assert result.ok
    svg = page.find("svg", "ops")[0]
    info = page.find("g", "info")
    assert len(info) == 1
    assert "write(1) -> info" in label(info[0])
    bar = info[0].find("rect", "bar")[0]
    right = float(bar.attrs["x"]) + float(bar.attrs["width"])
    assert right == pytest.approx(float(svg.attrs["width"]), abs=1)
    assert info[0].find("rect", "fade")
    row = next(r for r in page.find("g", "row") if r.attrs["data-process"] == "0")
    assert row.attrs["data-lanes"] == "2"
    ys = {op.find("rect", "bar")[0].attrs["y"] for op in row.find("g", "op")}
    assert len(ys) == 2


def test_keys_come_failing_first_and_open_then_unknown_linearizable_unchecked(
    tmp_path: Path,
) -> None:
    events = [(*event, "b") for event in STALE]
    events += [(0, "invoke", "write", 5, "a"), (0, "ok", "write", 5, "a")]
    for n in range(8):  # larger than b: checked after it, so never
        events += [(n % 3, "invoke", "write", n, "c"), (n % 3, "ok", "write", n, "c")]
    _, page = drawn(tmp_path, history(*events))
    sections = page.find("section", "key")
    assert [(s.attrs["data-key"], s.attrs["data-verdict"]) for s in sections] == [
        ("b", "not linearizable"),
        ("a", "linearizable"),
        ("c", "not checked"),
    ]
    assert ["open" in s.find("details")[0].attrs for s in sections] == [True, False, False]
    unchecked = ops_of(sections[2])
    assert len(unchecked) == 8
    assert all("not checked" in op.attrs["data-tip"] for op in unchecked.values())


def test_an_unknown_key_says_why(tmp_path: Path) -> None:
    checked = history(*STALE)
    result = lincheck.check(checked, "register", memory_mb=1e-6)
    write_html(result, checked, tmp_path / "t.html")
    page = page_of(tmp_path / "t.html")
    assert page.find("section", "key")[0].attrs["data-verdict"] == "unknown"
    assert "v-unknown" in page.find("header")[0].classes()
    tips = [op.attrs["data-tip"] for op in page.find("g", "op")]
    assert len(tips) == 5
    assert all("unknown: the memory bound passed" in tip for tip in tips)


def test_a_long_history_draws_the_window_around_the_failure_and_says_so(tmp_path: Path) -> None:
    events: list[tuple[Any, ...]] = []
    for n in range(3000):  # one write and one read at a time, in turn: sequential
        f, value = ("write", n) if n % 2 == 0 else ("read", n - 1)
        if n == 2001:
            value = 0  # a stale read
        events += [(n % 4, "invoke", f, None if f == "read" else value)]
        events += [(n % 4, "ok", f, value)]
    result, page = drawn(tmp_path, history(*events), per_key=200)
    failed = result.failed()
    assert failed is not None
    assert failed.blocked is not None
    blocked = failed.blocked
    assert len(blocked.prefix) == 2001
    ops = ops_of(page)
    assert len(ops) == 200
    assert blocked.stuck.index in ops
    orders = [int(op.attrs["data-order"]) for op in ops.values() if "data-order" in op.attrs]
    assert max(orders) == 2001
    assert min(orders) == 2001 - 149
    note = page.find("p", "note")[0].all_text()
    assert "200 of 3000 operations drawn" in note
    assert "1851 before them and 949 after" in note


def test_the_page_draws_at_most_its_total(tmp_path: Path) -> None:
    events: list[tuple[Any, ...]] = []
    for key in "abcde":
        for n in range(5):
            events += [(n, "invoke", "write", n, key), (n, "ok", "write", n, key)]
    checked = history(*events)
    result = lincheck.check(checked, "register")
    write_html(result, checked, tmp_path / "t.html", per_key=10, total=12)
    page = page_of(tmp_path / "t.html")
    drawn_per_key = [len(ops_of(section)) for section in page.find("section", "key")]
    assert drawn_per_key == [5, 5, 2, 0, 0]
    notes = [p.all_text() for p in page.find("p", "note")]
    assert notes[-1] == "Not drawn: the page draws at most 12 operations in all."


def test_an_operation_in_no_order_is_said_to_be_so_not_after_the_failure(
    tmp_path: Path,
) -> None:
    # A failed read observed nothing: a search may leave it out of its order. Whether
    # it does or not, the page says what the result says of it.
    failed_read = ((5, "invoke", "read", None), (5, "fail", "read", None))
    for events in ((*failed_read, *STALE), (*failed_read, *STALE[:6])):
        checked = history(*events)
        result, page = drawn(tmp_path, checked)
        key = result.keys[0]
        ordered = key.blocked.prefix if key.blocked is not None else key.linearization
        placed = {op.index for op, _ in ordered}
        if key.blocked is not None:
            placed |= {op.index for op in key.blocked.pending}
        read = ops_of(page)[checked.operations[0].index]
        assert label(read) == "p5 read() -> fail"
        if checked.operations[0].index in placed:
            assert "data-order" in read.attrs or "concurrent" in read.classes()
        else:
            assert read.classes() == {"op", "plain"}
            assert "in no order" in read.attrs["data-tip"]
