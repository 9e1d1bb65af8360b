"""The timeline page's style, script and legend (:mod:`~tenure.testing.lincheck._html`), inline.

The script never parses markup: each tooltip's text is an operation's ``data-tip``
attribute (escaped when written, decoded by the browser), set as ``textContent``.
The page's Content-Security-Policy allows these two texts by their hashes and
nothing else, so both are constants: nothing of a history is ever put in them.
"""

from __future__ import annotations

from typing import Final

#: The page's CSS: colours by role (the legend's), the bars, the tooltip.
STYLE: Final = """
:root { --lin: #d3e6fa; --lin-s: #2f6ea5; --stuck: #fcd2d2; --stuck-s: #c62828;
  --concurrent: #ffe2a0; --concurrent-s: #b97800; --later: #ececec; --later-s: #a0a0a0;
  --plain: #dde8f2; --plain-s: #6d8ba5; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0;
  color: #1d1d1f; }
header { padding: 10px 20px; border-bottom: 1px solid #ddd; background: #fafafa; }
h1 { font-size: 18px; margin: 0 0 2px; }
.facts { margin: 0 0 6px; color: #555; }
.v-ok .verdict { color: #1b6e2a; } .v-bad .verdict { color: #b71c1c; }
.v-unknown .verdict { color: #8a6100; } .v-none .verdict { color: #777; }
.failure { border-left: 4px solid var(--stuck-s); background: #fff5f5; padding: 2px 12px;
  margin: 6px 0; }
.failure ul { margin: 0 0 6px; padding-left: 22px; font: 12px ui-monospace, "DejaVu Sans Mono",
  Menlo, Consolas, monospace; }
.failure a, .stuck-name a { color: #8c1d1d; }
.stuck-name { font-family: ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace; }
.legend { margin: 4px 0 0; color: #444; font-size: 13px; }
.hint { margin: 2px 0 0; color: #666; font-size: 13px; }
.sw { display: inline-block; min-width: 14px; height: 14px; border-radius: 3px;
  vertical-align: -2px; border: 1px solid; font-size: 10px; line-height: 14px;
  text-align: center; margin: 0 3px 0 10px; }
.sw.lin { background: var(--lin-s); border-color: var(--lin-s); color: #fff; }
.sw.stuck { background: var(--stuck); border: 2px solid var(--stuck-s); }
.sw.concurrent { background: var(--concurrent); border-color: var(--concurrent-s); }
.sw.later { background: var(--later); border-color: var(--later-s); }
.sw.plain { background: var(--plain); border-color: var(--plain-s); }
.sw.info { width: 26px; border-style: dashed; border-right: none;
  background: linear-gradient(to right, var(--plain), #fff); border-color: var(--plain-s); }
.zoom { margin-left: 16px; white-space: nowrap; }
section.key { margin: 0 20px; border-bottom: 1px solid #eee; }
summary { cursor: pointer; padding: 7px 0; }
summary .verdict { font-weight: 600; }
summary .meta { color: #666; margin-left: 8px; }
.note { margin: 0 0 6px; color: #6b4e00; }
.timeline { display: flex; align-items: flex-start; margin-bottom: 10px; }
.scroll { overflow-x: auto; flex: 1; border-left: 1px solid #ccc; }
svg { display: block; }
svg text { font: 12px ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace;
  dominant-baseline: central; }
.process { text-anchor: end; fill: #333; }
.lane-bg { fill: #f5f6f8; }
.row:nth-of-type(even) .lane-bg { fill: #fff; }
.op { cursor: default; }
.op .bar { fill: var(--plain); stroke: var(--plain-s); stroke-width: 1; }
.op.lin .bar { fill: var(--lin); stroke: var(--lin-s); }
.op.stuck .bar { fill: var(--stuck); stroke: var(--stuck-s); stroke-width: 2.5; }
.op.concurrent .bar { fill: var(--concurrent); stroke: var(--concurrent-s); stroke-width: 1.5; }
.op.later .bar { fill: var(--later); stroke: var(--later-s); }
.op.later .label { fill: #666; }
.op.info .bar { stroke-dasharray: 5 3; }
.op .fade { fill: url(#lincheck-fade); pointer-events: none; }
.badge { fill: var(--lin-s); }
.badge-n { fill: #fff; font-size: 10px; font-weight: bold; text-anchor: middle; }
.op:hover .bar, .op.near .bar { stroke: #111; stroke-width: 2.5; }
.op.flash .bar { animation: flash 0.45s 4; }
@keyframes flash { 50% { stroke-width: 6; } }
.deadline { stroke: var(--stuck-s); stroke-width: 1.5; stroke-dasharray: 4 3; }
.deadline-text { fill: var(--stuck-s); font-size: 11px; text-anchor: end; }
#tip { position: fixed; z-index: 10; max-width: 560px; white-space: pre-line;
  background: #fff; border: 1px solid #bbb; border-radius: 4px; padding: 6px 9px;
  font: 12px/1.5 ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace;
  box-shadow: 0 2px 8px rgba(0, 0, 0, 0.15); pointer-events: none; }
#tip[hidden] { display: none; }
#tip::first-line { font-weight: bold; }
"""

#: The page's script: the tooltip, the neighbours ringed, the failure shown, the zoom.
SCRIPT: Final = """
'use strict';
(() => {
  const tip = document.getElementById('tip');
  let ringed = [];
  function unring() {
    for (const op of ringed) { op.classList.remove('near'); }
    ringed = [];
  }
  document.addEventListener('mouseover', (event) => {
    const op = event.target.closest && event.target.closest('.op');
    if (!op) { return; }
    unring();
    const section = op.closest('section');
    for (const place of (op.dataset.near || '').split(' ').filter(Boolean)) {
      const other = section.querySelector('.op[data-order="' + place + '"]');
      if (other) { other.classList.add('near'); ringed.push(other); }
    }
    tip.textContent = op.dataset.tip;
    tip.hidden = false;
  });
  document.addEventListener('mouseout', (event) => {
    const op = event.target.closest && event.target.closest('.op');
    if (op && !op.contains(event.relatedTarget)) { tip.hidden = true; unring(); }
  });
  document.addEventListener('mousemove', (event) => {
    if (tip.hidden) { return; }
    const width = tip.offsetWidth;
    const height = tip.offsetHeight;
    tip.style.left = Math.max(4, Math.min(event.clientX + 14, innerWidth - width - 8)) + 'px';
    const below = event.clientY + 18 + height < innerHeight;
    tip.style.top = Math.max(4, below ? event.clientY + 18 : event.clientY - height - 12) + 'px';
  });
  function reveal(op) {
    const details = op.closest('details');
    if (details) { details.open = true; }
    op.scrollIntoView({block: 'nearest', inline: 'center'});
    op.classList.remove('flash');
    void op.getBoundingClientRect();
    op.classList.add('flash');
  }
  for (const link of document.querySelectorAll('a[data-reveal]')) {
    link.addEventListener('click', (event) => {
      const op = document.getElementById('op-' + link.dataset.reveal);
      if (op) { event.preventDefault(); reveal(op); }
    });
  }
  document.getElementById('zoom').addEventListener('change', (event) => {
    const zoom = Number(event.target.value);
    for (const svg of document.querySelectorAll('svg.zoomable')) {
      svg.setAttribute('width', Math.round(svg.dataset.w * zoom));
      svg.setAttribute('height', Math.round(svg.dataset.h * zoom));
    }
  });
  const stuck = document.querySelector('.op.stuck');
  if (stuck) { reveal(stuck); }
})();
"""


def legend(failing: bool) -> str:
    """The legend: the marks (those of a violation only on a page that has one), the
    zoom, and how to read the timeline."""
    marks = '<span class="sw lin">1</span> linearized, in order '
    if failing:
        marks += (
            '<span class="sw stuck"></span> could not be linearized next '
            '<span class="sw concurrent"></span> concurrent with it, not linearized '
            '<span class="sw later"></span> after the failure '
        )
    return (
        f'<p class="legend">{marks}<span class="sw plain"></span> in no order '
        '<span class="sw info"></span> info: no return, may have taken effect'
        '<label class="zoom">zoom <select id="zoom"><option value="1">100%</option>'
        '<option value="0.5">50%</option><option value="0.25">25%</option></select></label>'
        '</p>\n<p class="hint">Time is warped: the order of calls and returns is kept, not '
        "durations. Hover an operation for its times and states (its neighbours in the "
        "order are ringed).</p>\n"
    )
