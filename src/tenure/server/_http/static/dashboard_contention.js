// The dashboard's contention view: the most contended names (GET /dashboard/api/top,
// what `tenure top` shows), refreshed every two seconds while the board is shown, and,
// for a name clicked, who blocks it (GET /dashboard/api/why, what `tenure why` shows),
// its chain of holders that wait drawn as a graph, the asked name on the left and the
// roots (holders that wait for nothing) on the right. Names and descriptions are user
// input: they only ever become text (textContent), never markup.
"use strict";

const CONTENTION_EVERY = 2000; // ms between two refreshes of the table
const SVG_NS = "http://www.w3.org/2000/svg";
let contentionShown = null; // the table last drawn, as JSON: redrawn only when it changed
let chosen = null; // {node, name} whose chain is drawn, or null

function contentionSort() {
  return document.getElementById("contention-sort").value;
}

// The figures of one row, after its node and name: each a cell's text.
function contentionFigures(stat) {
  const seconds = (s) => (s === null ? "-" : s < 1 ? Math.round(s * 1000) + "ms" : duration(s));
  return [seconds(stat.wait_seconds), String(stat.grants), String(stat.timeouts), String(stat.queue),
    seconds(stat.longest_hold), seconds(stat.wait_p50) + " / " + seconds(stat.wait_p99)];
}

async function refreshContention() {
  const section = document.getElementById("contention");
  if (document.getElementById("board").hidden) return; // (logged out: nothing to ask)
  const window_ = document.getElementById("contention-window").value;
  const sort = contentionSort();
  const query = "?window=" + window_ + "&sort=" + sort + "&limit=10";
  const response = await fetch(API + "/top" + query, { credentials: "same-origin" }).catch(() => null);
  if (!response || !response.ok) return;
  const answer = await response.json();
  if (sort !== contentionSort()) return; // (an answer for the order before a change)
  const text = JSON.stringify(answer.names);
  section.hidden = false;
  if (text === contentionShown) return;
  contentionShown = text;
  const body = document.getElementById("contention-rows");
  const keys = answer.names.map((stat) => JSON.stringify([stat.node, stat.name]));
  const rows = [...body.children];
  if (rows.length === keys.length && rows.every((row, i) => row.dataset.key === keys[i])) {
    // The same names in the same order: only the figures change, in place. A row
    // replaced between a click's press and its release would lose the click (its
    // button gone), and the figures of names still waited for change every refresh.
    answer.names.forEach((stat, i) => {
      const cells = rows[i].querySelectorAll("td.num");
      contentionFigures(stat).forEach((figure, j) => { cells[j].textContent = figure; });
    });
  } else {
    body.replaceChildren(...answer.names.map((stat, i) => {
      const pick = el("button", { type: "button", class: "pick who", "data-node": stat.node, "data-name": stat.name },
        stat.name);
      pick.addEventListener("click", () => showWhy(stat.node, stat.name));
      return el("tr", { class: "contended-name", "data-node": stat.node, "data-name": stat.name, "data-key": keys[i] },
        el("td", { class: "who" }, stat.node), el("td", {}, pick),
        ...contentionFigures(stat).map((figure) => el("td", { class: "num" }, figure)));
    }));
  }
  body.dataset.sort = sort; // (the order drawn: what a test waits for after a change)
  document.getElementById("contention-empty").hidden = answer.names.length > 0;
  if (chosen) showWhy(chosen.node, chosen.name);
}

async function showWhy(node, name) {
  chosen = { node, name };
  const box = document.getElementById("why");
  const query = "?node=" + encodeURIComponent(node) + "&name=" + encodeURIComponent(name);
  const response = await fetch(API + "/why" + query, { credentials: "same-origin" }).catch(() => null);
  const answer = response ? await response.json().catch(() => ({})) : {};
  if (!response || !response.ok) {
    box.replaceChildren(el("p", { class: "muted" }, "who blocks " + name + ": " + (answer.error || "no answer")));
    return;
  }
  box.replaceChildren(el("h3", {}, "Who blocks " + name + " (node " + node + ")"),
    el("p", { class: "muted why-summary" }, answer.waiters_total + " waiting, " + answer.holders_total +
      " holding; " + (answer.roots.length ? "root: " + answer.roots.map((r) => r.name).join(", ") : "no root")),
    chainGraph(answer));
}

// The chain as columns: the asked name's holders first, then what each waits on, to
// the roots; an arrow from a holder to each name it waits for, in its node
// (waits_on) or in another (waits_elsewhere: the same task through another session of
// its process). What lies in a node the viewer may not see comes with node and name
// "" and session 0: drawn as "(hidden)", never named.
function waitsFor(link, other) {
  if (other.node === link.node && link.waits_on.includes(other.name)) return true;
  return link.waits_elsewhere.some((w) => w.node === other.node && w.name === other.name);
}

function chainGraph(report) {
  const links = report.chain;
  const depth = new Map(); // index in the chain -> its column
  links.forEach((link, i) => {
    if (link.node === report.node && link.name === report.name) depth.set(i, 0);
  });
  links.forEach((link, i) => { // (breadth first already: parents come first)
    const d = depth.has(i) ? depth.get(i) : 0;
    depth.set(i, d);
    links.forEach((other, j) => {
      if (!depth.has(j) && waitsFor(link, other)) depth.set(j, d + 1);
    });
  });
  const rootKey = (x) => x.node + "\u0000" + x.name + "\u0000" + x.session_id;
  const roots = new Set(report.roots.map(rootKey));
  const described = new Map(report.holders.map((h) => [h.session_id, h.description]));
  for (const r of report.roots) if (r.session_id) described.set(r.session_id, r.description);
  const width = 230, height = 50, gapX = 70, gapY = 14;
  const rows = new Map();
  const place = new Map();
  links.forEach((link, i) => {
    const d = depth.get(i);
    const row = rows.get(d) || 0;
    rows.set(d, row + 1);
    place.set(i, { x: 10 + d * (width + gapX), y: 10 + row * (height + gapY) });
  });
  const columns = Math.max(1, ...[...depth.values()].map((d) => d + 1));
  const tallest = Math.max(1, ...rows.values());
  const svg = document.createElementNS(SVG_NS, "svg");
  svg.setAttribute("class", "chain");
  svg.setAttribute("width", 20 + columns * (width + gapX));
  svg.setAttribute("height", 20 + tallest * (height + gapY));
  const shape = (tag, attrs, text) => {
    const node = document.createElementNS(SVG_NS, tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
    if (text !== undefined) node.textContent = text;
    return node;
  };
  links.forEach((link, i) => {
    const from = place.get(i);
    links.forEach((other, j) => {
      if (!waitsFor(link, other)) return;
      const to = place.get(j);
      svg.append(shape("line", { class: "waits", x1: from.x + width, y1: from.y + height / 2,
        x2: to.x, y2: to.y + height / 2, "data-from": link.name, "data-to": other.name }));
    });
  });
  links.forEach((link, i) => {
    const at = place.get(i);
    const root = roots.has(rootKey(link));
    const hidden = link.name === "";
    const title = hidden ? "(hidden)" : link.name + (link.node !== report.node ? " (node " + link.node + ")" : "");
    const holder = hidden ? "in a node this token may not see" : "held by session " + link.session_id +
      (described.get(link.session_id) ? ": " + described.get(link.session_id) : "");
    const group = shape("g", { class: "link" + (root ? " root" : "") + (hidden ? " hidden" : ""),
      "data-node": link.node, "data-name": link.name, "data-session-id": link.session_id });
    group.append(shape("rect", { x: at.x, y: at.y, width, height, rx: 5 }),
      shape("text", { x: at.x + 8, y: at.y + 19, class: "name" }, title + (root ? "  (root)" : "")),
      shape("text", { x: at.x + 8, y: at.y + 38, class: "holder" }, holder));
    svg.append(group);
  });
  return svg;
}

for (const id of ["contention-sort", "contention-window"]) {
  document.getElementById(id).addEventListener("change", () => { contentionShown = null; refreshContention(); });
}
setInterval(refreshContention, CONTENTION_EVERY);
refreshContention();
