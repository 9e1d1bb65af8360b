"""A checked history drawn as one self-contained HTML page (``--html FILE``).

A section per key (the one that is not linearizable first, open; then the unknown,
the linearizable and those not checked, closed), each a timeline
(:mod:`~tenure.testing.lincheck._timeline`): a row per process, each operation a bar
from its call to its return labelled with :meth:`Operation.describe`, an ``info``
one open-ended to the right edge. Of a key that is not linearizable, the longest
linearizable prefix is numbered in order, the operation that could not follow it
(*stuck*) and those concurrent with it are marked, and a line shows where the stuck
one returned; of a linearizable key, the operations are numbered in its
linearization's order (one a search leaves out, legal anywhere and changing nothing,
is said to be in no order). Hovering an operation tells its times, its place in that
order and the states before and after it, and rings its neighbours in the order.

One file, nothing fetched: the CSS, the script and the SVG are inline, and the
page's Content-Security-Policy allows nothing else (the script and the style by
their hashes). Every string of the history is escaped; the script reads the
tooltips' text from attributes and writes it as text. A key is drawn up to
``per_key`` operations (the window around the failure, or its first ones) and the
page up to ``total``; what is left out is said.
"""

from __future__ import annotations

import base64
import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Final

from tenure.testing.lincheck._check import CheckResult
from tenure.testing.lincheck._history import History, Operation
from tenure.testing.lincheck._html_assets import SCRIPT, STYLE, legend
from tenure.testing.lincheck._model import State
from tenure.testing.lincheck._search import LINEARIZABLE, NOT_LINEARIZABLE, UNKNOWN, KeyResult
from tenure.testing.lincheck._timeline import (
    CHAR_W,
    LANE_H,
    LANE_STEP,
    TAIL,
    TOP,
    Bar,
    Row,
    lay_out,
    window,
)

#: How many operations a key's timeline draws, and the whole page.
PER_KEY: Final = 500
TOTAL: Final = 20_000
#: Longer labels and states are cut (the tooltip has the whole label).
LABEL_CHARS: Final = 48
STATE_CHARS: Final = 400
#: How many of the stuck operation's concurrent ones the summary lists.
LISTED: Final = 20
_PAD: Final = 6.0  # between a bar's edge and its text
_NOT_CHECKED: Final = "not checked"
#: What a search leaves out of its order (an operation legal in every state that changes
#: none, such as a failed read) is said so: it is in no linearization and no prefix.
_LEFT_OUT: Final = (
    "in no order: legal in every state and changing none, it could go anywhere in its "
    "interval (the search leaves such an operation out)"
)


def write_html(
    result: CheckResult,
    history: History,
    path: Path | str,
    *,
    per_key: int = PER_KEY,
    total: int = TOTAL,
) -> None:
    """Draw ``history``, checked as ``result``, into the HTML file ``path`` (module
    docstring); at most ``per_key`` operations a key and ``total`` in all."""
    page = render_html(result, history, per_key=per_key, total=total)
    # errors="replace": a lone surrogate from a JSON string cannot be UTF-8
    Path(path).write_text(page, encoding="utf-8", errors="replace")


def render_html(
    result: CheckResult, history: History, *, per_key: int = PER_KEY, total: int = TOTAL
) -> str:
    """The page :func:`write_html` writes, as a string."""
    found = {key.key: key for key in result.keys}
    by_key = history.by_key()
    rank = {NOT_LINEARIZABLE: 0, UNKNOWN: 1, LINEARIZABLE: 2}
    keys = sorted(by_key, key=lambda k: rank[found[k].verdict] if k in found else 3)
    untimed = all(op.call == op.line for op in history.operations)
    budget = total
    sections: list[str] = []
    for number, key in enumerate(keys):
        drawing = _Section(result, key, by_key[key], found.get(key), untimed)
        sections.append(drawing.render(number, min(per_key, budget), total))
        budget -= drawing.drawn
    failed = result.failed()
    failure = _failure(result, failed) if failed is not None else ""
    counts = f"{len(history.operations)} operations on {len(by_key)} key(s)"
    facts = f"{counts}, model {result.model.name}, checked in {result.seconds:.2f} s"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        f"style-src '{_digest(STYLE)}'; script-src '{_digest(SCRIPT)}'\">\n"
        f"<title>lincheck: {escape(result.verdict)}</title>\n<style>{STYLE}</style></head>\n"
        f'<body><header class="{_verdict_class(result.verdict)}">\n'
        f'<h1>lincheck: <span class="verdict">{escape(result.verdict)}</span></h1>\n'
        f'<p class="facts">{escape(facts)}</p>\n{failure}{legend(failed is not None)}</header>\n'
        f"<main>\n{''.join(sections)}</main>\n"
        '<div id="tip" hidden></div>\n'
        '<svg class="defs" width="0" height="0" aria-hidden="true"><defs>'
        '<linearGradient id="lincheck-fade"><stop offset="0" stop-color="#fff" stop-opacity="0"/>'
        '<stop offset="1" stop-color="#fff" stop-opacity="1"/></linearGradient></defs></svg>\n'
        f"<script>{SCRIPT}</script>\n</body></html>\n"
    )


def _digest(text: str) -> str:
    """The CSP source that allows exactly this inline script or style."""
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


def _verdict_class(verdict: str) -> str:
    return {LINEARIZABLE: "v-ok", NOT_LINEARIZABLE: "v-bad", UNKNOWN: "v-unknown"}.get(
        verdict, "v-none"
    )


def _clip(text: str, most: int) -> str:
    return text if len(text) <= most else text[: most - 1] + "\u2026"


def _key_name(key: str | None) -> str:
    return "(every operation: no key)" if key is None else key


def _reveal(op: Operation) -> str:
    """A link that shows ``op`` in its timeline (the script scrolls to it)."""
    text = escape(f"[line {op.line}] {op.describe()}")
    return f'<a href="#op-{op.index}" data-reveal="{op.index}">{text}</a>'


def _failure(result: CheckResult, key: KeyResult) -> str:
    """The page's summary of a violation: the prefix, the stuck operation, the others."""
    blocked = key.blocked
    if blocked is None:
        return ""
    state = escape(_clip(result.model.show(blocked.state), STATE_CHARS))
    others = [op for op in blocked.pending if op is not blocked.stuck]
    items = "".join(f"<li>{_reveal(op)}</li>" for op in others[:LISTED])
    if len(others) > LISTED:
        items += f"<li>and {len(others) - LISTED} more (in the timeline)</li>"
    listed = (
        f", nor any of the {len(others)} operation(s) concurrent with it (each tried):</p>"
        f"<ul>{items}</ul>"
        if others
        else ".</p>"
    )
    return (
        f'<div class="failure"><p>Key <code>{escape(_key_name(key.key))}</code>: the longest '
        f"linearizable prefix has {len(blocked.prefix)} operation(s), numbered in the timeline. "
        f"From the state it leaves, <code>{state}</code>, the operation "
        f'<span class="stuck-name">{_reveal(blocked.stuck)}</span> could not be linearized '
        f"next{listed}</div>\n"
    )


@dataclass
class _Mark:
    """What a key's verdict says of one operation."""

    role: str  # lin, stuck, concurrent, later or plain: its CSS class
    order: int = 0  # its place in the linearization or the prefix, from 1 (0: none)
    notes: tuple[str, ...] = ()  # the tooltip's lines after the times
    near: tuple[int, ...] = ()  # the places in the order to ring on hover


def _ordered(
    pairs: Sequence[tuple[Operation, State]], before: str, what: str, show: Callable[[State], str]
) -> dict[int, _Mark]:
    """The marks of a linearization (or prefix): each operation's place and states."""
    marks: dict[int, _Mark] = {}
    for place, (op, state) in enumerate(pairs, start=1):
        after = show(state)
        notes = (
            f"#{place} {what} ({len(pairs)})",
            f"state before: {before}",
            f"state after: {after}",
        )
        near = tuple(n for n in (place - 1, place + 1) if 1 <= n <= len(pairs))
        marks[op.index] = _Mark("lin", place, notes, near)
        before = after
    return marks


class _Section:
    """One key's section: its marks, the window drawn, and its markup."""

    def __init__(
        self,
        result: CheckResult,
        key: str | None,
        ops: list[Operation],
        found: KeyResult | None,
        untimed: bool,
    ) -> None:
        self.key, self.ops, self.found, self.untimed = key, ops, found, untimed
        self.verdict = found.verdict if found is not None else _NOT_CHECKED
        self.blocked = found.blocked if found is not None else None
        self.drawn = 0
        self._labels: dict[int, str] = {}  # (each label is measured several times)
        model = result.model

        def show(state: State) -> str:
            return _clip(model.show(state), STATE_CHARS)

        try:
            initial = show(model.init(result.header, key))
        except (ValueError, TypeError):  # (check() refuses such a header first)
            initial = "(unknown)"
        self.default = _Mark("plain")
        self.marks: dict[int, _Mark] = {}
        if found is None:
            why = "not checked: the check stops at the first key that is not linearizable"
            self.default = _Mark("plain", notes=(why,))
        elif found.verdict == UNKNOWN:
            self.default = _Mark("plain", notes=(f"this key's verdict is unknown: {found.reason}",))
        elif found.verdict == LINEARIZABLE:
            self.marks = _ordered(found.linearization, initial, "of the linearization", show)
            self.default = _Mark("plain", notes=(_LEFT_OUT,))
        elif self.blocked is not None:
            blocked = self.blocked
            prefix = "of the longest linearizable prefix"
            self.marks = _ordered(blocked.prefix, initial, prefix, show)
            last = len(blocked.prefix)
            when = f"after #{last}" if last else "first"
            near = (last,) if last else ()
            state = f"from state: {show(blocked.state)}"
            for op in blocked.pending:
                why = f"concurrent with the stuck one: tried {when} too, no linearization followed"
                self.marks[op.index] = _Mark("concurrent", 0, (why, state), near)
            why = f"stuck: could not be linearized {when} (and had to be: it returned)"
            self.marks[blocked.stuck.index] = _Mark("stuck", 0, (why, state), near)
            self.default = _Mark("later", notes=("called after the stuck operation returned",))

    def mark(self, op: Operation) -> _Mark:
        """What the verdict says of ``op``."""
        found = self.marks.get(op.index)
        if found is not None:
            return found
        if self.blocked is not None and op.call <= self.blocked.stuck.ret:
            # called before the stuck one returned, yet neither taken nor pending
            return _Mark("plain", notes=(_LEFT_OUT,))
        return self.default

    def label(self, op: Operation) -> str:
        """The text on ``op``'s bar."""
        text = self._labels.get(op.index)
        if text is None:
            text = self._labels[op.index] = _clip(op.describe(), LABEL_CHARS)
        return text

    def width(self, op: Operation) -> float:
        """How wide ``op``'s bar must be for its label (and its place's badge)."""
        order = self.mark(op).order
        badge = _badge_width(order) + 4 if order else 0.0
        return len(self.label(op)) * CHAR_W + 2 * _PAD + badge

    def render(self, number: int, cap: int, total: int) -> str:
        """The section's markup, drawing at most ``cap`` operations."""
        blocked = self.blocked
        focus = blocked.stuck if blocked is not None else None
        pending = blocked.pending if blocked is not None else ()
        drawn, before, after = window(self.ops, max(cap, 0), focus, pending)
        self.drawn = len(drawn)
        processes = len({op.process for op in self.ops})
        seconds = f", searched in {self.found.seconds:.3f} s" if self.found is not None else ""
        meta = f"{len(self.ops)} operations, {processes} process(es){seconds}"
        note = ""
        if cap <= 0:
            note = f"Not drawn: the page draws at most {total} operations in all."
        elif before or after:
            where = "first called"
            if focus is not None:
                where = "around the failure, in call order, and those concurrent with it"
            note = (
                f"{len(drawn)} of {len(self.ops)} operations drawn: the {cap} {where}; "
                f"{before} before them and {after} after them left out. "
                "The numbers count from the first."
            )
        if note:
            note = f'<p class="note">{escape(note)}</p>'
        body = self._timeline(drawn) if drawn else ""
        return (
            f'<section class="key {_verdict_class(self.verdict)}" id="key-{number}" '
            f'data-key="{escape(_key_name(self.key))}" data-verdict="{escape(self.verdict)}">\n'
            f"<details{' open' if number == 0 else ''}><summary>"
            f'<span class="verdict">{escape(self.verdict)}</span> key '
            f"<code>{escape(_key_name(self.key))}</code> "
            f'<span class="meta">{escape(meta)}</span></summary>\n'
            f"{note}{body}</details></section>\n"
        )

    def _timeline(self, drawn: list[Operation]) -> str:
        timeline = lay_out(drawn, self.width)
        labels_w = max(len(f"p{row.process}") for row in timeline.rows) * CHAR_W + 16
        width, height = timeline.width, timeline.height
        names = "".join(
            f'<text class="process" x="{labels_w - 8:.1f}" '
            f'y="{row.y + LANE_H / 2:.1f}">{escape(f"p{row.process}")}</text>'
            for row in timeline.rows
        )
        rows = "".join(self._row(row, width) for row in timeline.rows)
        marker = ""
        if self.blocked is not None and self.blocked.stuck.ret in timeline.places:
            stuck = next(b for r in timeline.rows for b in r.bars if b.op is self.blocked.stuck)
            marker = (
                f'<line class="deadline" x1="{stuck.x1:.1f}" y1="{TOP - 14:.1f}" '
                f'x2="{stuck.x1:.1f}" y2="{height:.1f}"/><text class="deadline-text" '
                f'x="{stuck.x1 - 4:.1f}" y="{TOP - 9:.1f}">the stuck operation returned</text>'
            )
        return (
            f'<div class="timeline">{_svg("labels", labels_w, height, names)}'
            f'<div class="scroll">{_svg("ops", width, height, rows + marker)}</div></div>\n'
        )

    def _row(self, row: Row, width: float) -> str:
        bars = "".join(self._bar(bar, row) for bar in row.bars)
        return (
            f'<g class="row" data-process="{escape(str(row.process))}" data-lanes="{row.lanes}">'
            f'<rect class="lane-bg" x="0" y="{row.y - 3:.1f}" width="{width:.1f}" '
            f'height="{row.height:.1f}"/>{bars}</g>\n'
        )

    def _bar(self, bar: Bar, row: Row) -> str:
        op, mark = bar.op, self.mark(bar.op)
        y = row.y + bar.lane * LANE_STEP
        classes = f"op {mark.role}" + (" info" if bar.open_ended else "")
        tip = "\n".join((op.describe(), self._when(op), *mark.notes))
        attrs = f'data-order="{mark.order}" ' if mark.order else ""
        if mark.near:
            attrs += f'data-near="{" ".join(map(str, mark.near))}" '
        parts = [
            f'<g class="{classes}" id="op-{op.index}" data-op="{op.index}" '
            f'data-x="{bar.x0:.0f}" {attrs}data-tip="{escape(tip)}">'
            f'<rect class="bar" x="{bar.x0:.1f}" y="{y:.1f}" width="{bar.x1 - bar.x0:.1f}" '
            f'height="{LANE_H:.0f}" rx="4"/>'
        ]
        if bar.open_ended:
            parts.append(
                f'<rect class="fade" x="{bar.x1 - TAIL:.1f}" y="{y - 1:.1f}" '
                f'width="{TAIL + 1:.0f}" height="{LANE_H + 2:.0f}"/>'
            )
        x = bar.x0 + _PAD
        if mark.order:
            badge = _badge_width(mark.order)
            parts.append(
                f'<rect class="badge" x="{x - 2:.1f}" y="{y + 4:.1f}" width="{badge:.1f}" '
                f'height="{LANE_H - 8:.0f}" rx="3"/><text class="badge-n" '
                f'x="{x - 2 + badge / 2:.1f}" y="{y + LANE_H / 2:.1f}">{mark.order}</text>'
            )
            x += badge + 4
        parts.append(
            f'<text class="label" x="{x:.1f}" y="{y + LANE_H / 2:.1f}">'
            f"{escape(self.label(op))}</text></g>"
        )
        return "".join(parts)

    def _when(self, op: Operation) -> str:
        if self.untimed:  # times are line numbers
            if op.ret == math.inf:
                return f"line {op.line}, never completed (info)"
            return f"lines {op.line} to {_number(op.ret)}"
        if op.ret == math.inf:
            return f"line {op.line}, called at {_number(op.call)}, never returned (info)"
        took = _number(op.ret - op.call)
        call, ret = _number(op.call), _number(op.ret)
        return f"line {op.line}, called at {call}, returned at {ret} (+{took})"


def _badge_width(order: int) -> float:
    return len(str(order)) * 6.2 + 6


def _number(value: float) -> str:
    return str(int(value)) if value.is_integer() else repr(value)


def _svg(kind: str, width: float, height: float, inside: str) -> str:
    """An SVG the zoom scales: its size is kept in ``data-w``/``data-h``."""
    return (
        f'<svg class="{kind} zoomable" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" data-w="{width:.0f}" data-h="{height:.0f}">'
        f"{inside}</svg>"
    )
