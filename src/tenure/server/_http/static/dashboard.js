// The tenure dashboard: renders the views the server pushes (server-sent events).
// Every name, description and identity is user input: it only ever becomes text
// (textContent, setAttribute), never markup. The server's CSP forbids inline script.
"use strict";

const API = "/dashboard/api";
let clockOffset = 0; // the server's clock minus this browser's, in seconds
let source = null;
let shownBoard = null; // the board last rendered, as JSON: redrawn only when it changed
let shownCluster = null; // the cluster part last rendered, as JSON (likewise)
let filterText = ""; // the name filter's text, lower case ("": every row)
// The idle nodes' line: one element for the page's life, never taken out of the page
// while shown, so that it stays unfolded across redraws and a click on it is never lost
// (a redraw between the press and the release of a click that replaced the line would
// put them on two elements: the click would go to their common ancestor and fold nothing).
let idleLine = null;
let idleShown = null; // what the line's summary says, as JSON: redrawn only when it changed

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") node.className = value;
    else node.setAttribute(key, String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function serverNow() {
  return Date.now() / 1000 + clockOffset;
}

function duration(seconds) {
  const s = Math.max(0, Math.floor(seconds));
  if (s < 60) return s + "s";
  if (s < 3600) return Math.floor(s / 60) + "m " + String(s % 60).padStart(2, "0") + "s";
  const h = Math.floor(s / 3600);
  if (h < 48) return h + "h " + String(Math.floor((s % 3600) / 60)).padStart(2, "0") + "m";
  return Math.floor(h / 24) + "d " + (h % 24) + "h";
}

function identity(who) {
  const name = who.name || "(no client name)";
  const where = who.host ? who.host + " pid " + who.pid : "unknown host";
  return name + " on " + where;
}

// A time that ages on the page: "held for", "waiting for", "expires in".
function age(at, direction) {
  return el("span", { class: "age", "data-at": at, "data-direction": direction }, ageText(at, direction));
}

function ageText(at, direction) {
  return direction === "until" ? duration(at - serverNow()) : duration(serverNow() - at);
}

function tickAges() {
  for (const span of document.querySelectorAll("span.age")) {
    span.textContent = ageText(Number(span.dataset.at), span.dataset.direction);
  }
  // A rate limiter's level moves with time alone: worked out again from its TAT.
  for (const div of document.querySelectorAll("div.recipe[data-tat]")) {
    const { rate, burst, tat } = div.dataset;
    div.textContent = limiterText({ rate: Number(rate), burst: Number(burst), tat: Number(tat) });
  }
  // A claim's time left too, from its end.
  for (const div of document.querySelectorAll("div.recipe[data-claim]")) {
    div.textContent = claimText(JSON.parse(div.dataset.claim));
  }
}

// Owner data as the server sent it: already escaped (control and invisible
// characters as \xNN) and cut; said so when cut.
function data(info) {
  const shown = info.data_truncated ? info.data + "\u2026 (" + info.data_bytes + " bytes)" : info.data;
  return el("span", { class: "data who" }, shown);
}

// An election is a mutex whose holder leads: its data is the leader's (an address,
// say) and its token the leadership's term. The server cannot tell the two apart, so
// every holder shows its data and token. The client's identity ("(no client name) on
// vm pid N") is said once per session: in its row of the sessions table, when it has
// one there (``listed``), else here.
function holder(info, isOwner, listed) {
  const parts = [el("span", { class: "desc who" }, info.description || "(no description)")];
  // Its client's connection is gone: the server keeps the session, and so this hold
  // or wait, until its recovery window ends, unless the client comes back.
  const gone = info.expires_at !== null && info.expires_at !== undefined;
  if (gone) parts.push(" ", disconnected(info.expires_at));
  if (!listed.has(info.session_id)) parts.push(" · ", el("span", { class: "identity who" }, identity(info.identity)));
  parts.push(" · session ", el("span", { class: "session-id" }, info.session_id));
  // A group's member: its id (and state, weight), its data its own, not its record.
  if (info.member) {
    parts.push(" · member ", el("span", { class: "member-id who" }, info.member.id));
    if (info.member.state === "joining") parts.push(" (joining)");
    if (info.member.weight !== null) parts.push(" · weight " + info.member.weight);
  }
  if (isOwner) {
    parts.push(" · token ", el("span", { class: "token" }, info.token));
    parts.push(" · held for ", age(info.since, "since"));
  } else {
    parts.push(" · waiting for ", age(info.since, "since"));
  }
  if (info.count === null) parts.push(" · count all");
  else if (info.count > 1) parts.push(" · count " + info.count);
  if (info.data_bytes > 0) parts.push(" · data ", data(info));
  const kind = isOwner ? "owner" : "waiter";
  return el(isOwner ? "div" : "li", { class: gone ? kind + " gone" : kind }, ...parts);
}

// The mark of a session whose client is disconnected, and the time left of its window.
function disconnected(expiresAt) {
  return el("span", {
    class: "disconnected",
    title: "its client's connection is gone: the server ends the session, releasing its " +
      "holds, when its recovery window ends, unless the client comes back",
  }, "disconnected \u00b7 ends in ", age(expiresAt, "until"));
}

function more(shown, total, what) {
  return total > shown ? el("div", { class: "more" }, "showing " + shown + " of " + total + " " + what) : null;
}

// The kind column's cell: kindCell, in dashboard_recipes.js (recipes.js).
function semaphoreRow(sem, listed) {
  const tokens = sem.kind === "mutex"
    ? el("span", { class: sem.held ? "held" : "free" }, sem.held ? "held" : "free")
    : el("span", { class: "num" }, (sem.count === null ? "all" : sem.count) + " / " +
      (sem.limit === null ? "no limit" : sem.limit));
  const owners = el("td", { class: "owners" }, ...sem.owners.map((o) => holder(o, true, listed)),
    more(sem.owners.length, sem.owners_total, "owners"));
  if (!sem.owners.length) owners.append(el("span", { class: "muted" }, "nobody"));
  const queue = el("ol", { class: "queue" }, ...sem.waiters.map((w) => holder(w, false, listed)));
  const waiters = el("td", { class: "waiters" }, sem.waiters.length ? queue : el("span", { class: "muted" }, "none"),
    more(sem.waiters.length, sem.waiters_total, "waiters"));
  return el("tr", { class: "semaphore", "data-name": sem.name },
    el("td", { class: "name who" }, sem.name), kindCell(sem), el("td", {}, tokens), owners, waiters);
}

function sessionRow(node, session) {
  const expires = session.expires_at === null
    ? el("span", { class: "muted" }, "connected")
    : disconnected(session.expires_at);
  const actions = el("td", {});
  if (node.can_kill) {
    const button = el("button", { type: "button", class: "kill" }, "end session");
    button.addEventListener("click", () => endSession(node.node, session.session_id));
    actions.append(button);
  }
  const gone = session.expires_at === null ? "session" : "session gone";
  return el("tr", { class: gone, "data-session-id": session.session_id },
    el("td", { class: "num" }, session.session_id),
    el("td", { class: "desc who" }, session.description || "(no description)"),
    el("td", { class: "identity who" }, identity(session.identity)),
    el("td", { class: "num" }, duration(session.timeout)),
    el("td", {}, expires),
    el("td", { class: "num" }, session.holds),
    el("td", { class: "num" }, session.waits),
    actions);
}

// The most contended first (the most waiters), then the longest held (the oldest
// grant), then by name: what an operator of a fleet looks for first.
function contention(a, b) {
  const held = (sem) => Math.min(...sem.owners.map((o) => o.since), Infinity);
  return b.waiters_total - a.waiters_total || held(a) - held(b) || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
}

function nodeSection(node) {
  const head = (...names) => el("tr", {}, ...names.map((n) => el("th", {}, n)));
  const listed = new Set(node.sessions.map((s) => s.session_id));
  const semaphores = node.semaphores.length
    ? el("table", { class: "semaphores" },
      el("thead", {}, head("semaphore", "kind", "tokens", "holders", "waiters (in order)")),
      el("tbody", {}, ...[...node.semaphores].sort(contention).map((sem) => semaphoreRow(sem, listed))))
    : el("p", { class: "muted" }, "no semaphores");
  const sessions = node.sessions.length
    ? el("table", { class: "sessions" },
      el("thead", {}, head("id", "description", "client", "window", "connection", "holds", "waits", "")),
      el("tbody", {}, ...node.sessions.map((s) => sessionRow(node, s))))
    : el("p", { class: "muted" }, "no sessions");
  const parts = [el("div", { class: "node-head" }, el("h2", { class: "who" }, node.name), activityLine(node)),
    el("h3", {}, "Semaphores"), semaphores, more(node.semaphores.length, node.semaphores_total, "semaphores"),
    el("h3", {}, "Sessions"), sessions, more(node.sessions.length, node.sessions_total, "sessions")];
  if (node.deadlocks && node.deadlocks.length) parts.push(...deadlocksPart(node.deadlocks));
  const contended = node.activity && node.activity.waiters ? " contended" : "";
  return el("section", { class: "node" + contended, "data-node": node.name }, ...parts);
}

// How busy a node is (the server's view orders the nodes by it: the most waiters, then
// the most disconnected sessions, then the most holds and grants, then by name).
function activityLine(node) {
  const a = node.activity;
  const facts = [];
  if (a.waiters) facts.push(el("span", { class: "fact waiting" }, a.waiters + " waiting"));
  if (a.disconnected) facts.push(el("span", { class: "fact disconnected" }, a.disconnected + " disconnected"));
  if (a.holds) facts.push(el("span", { class: "fact" }, many(a.holds, "hold")));
  if (a.grants) facts.push(el("span", { class: "fact" }, many(a.grants, "grant") + " in the last minute"));
  else if (!a.idle && a.granted_at !== null) facts.push(el("span", { class: "fact" }, "granted ", age(a.granted_at, "since"), " ago"));
  if (!facts.length) facts.push(el("span", { class: "fact muted" }, "idle"));
  return el("span", { class: "activity" }, ...facts);
}

// The idle nodes (nothing held, waited for or granted lately, no client disconnected):
// one line of their names, unfolded on a click into their full sections.
function idleNodes(nodes) {
  if (!idleLine) idleLine = el("details", { id: "idle-nodes", class: "idle" }, el("summary", {}));
  const summary = idleLine.firstChild;
  const said = JSON.stringify(nodes.map((node) => [node.name, node.semaphores_total, node.sessions_total]));
  if (said !== idleShown) {
    idleShown = said;
    const names = nodes.map((node) => el("span", { class: "idle-name who", title: many(node.semaphores_total, "semaphore") +
      ", " + many(node.sessions_total, "session") }, node.name));
    const list = [];
    names.forEach((name, i) => list.push(...(i ? [", ", name] : [name])));
    summary.replaceChildren(el("b", {}, many(nodes.length, "idle node")), " ",
      el("span", { class: "idle-names" }, ...list));
  }
  while (summary.nextSibling) summary.nextSibling.remove(); // (the summary stays where it is)
  idleLine.append(...nodes.map(nodeSection));
  return idleLine;
}

// Put ``children`` in ``parent``, in order, leaving where it is each one already there
// (the idle nodes' line: see idleLine), the others taken out or put in around it.
function placeChildren(parent, children) {
  for (const old of [...parent.childNodes]) if (!children.includes(old)) old.remove();
  let at = parent.firstChild;
  for (const child of children) {
    if (child === at) at = at.nextSibling;
    else parent.insertBefore(child, at);
  }
}

// The deadlocks the server broke on the node lately, newest first: each an acquire it
// refused at once, with the cycle of tasks that acquire would have closed.
function deadlocksPart(deadlocks) {
  const head = el("tr", {}, ...["ago", "refused session", "task", "cycle it would have closed"]
    .map((n) => el("th", {}, n)));
  const rows = deadlocks.map((d) => el("tr", { class: "deadlock", "data-session-id": d.session_id },
    el("td", {}, d.at === null ? "-" : age(d.at, "since")),
    el("td", { class: "num" }, d.session_id),
    el("td", { class: "num" }, d.task || "?"),
    el("td", { class: "cycle who" }, d.cycle)));
  return [el("h3", {}, "Deadlocks broken lately"),
    el("table", { class: "deadlocks" }, el("thead", {}, head), el("tbody", {}, ...rows))];
}

// A link only to an http(s) URL the server made (a member's dashboard), else text.
function link(url, text, attrs) {
  return url && /^https?:\/\//.test(url) ? el("a", { ...attrs, href: url }, text) : el("span", attrs, text);
}

// A cluster's server (--cluster): its role, the leader, the log, every member. A
// standby says so in a banner: it shows a replica and offers no action.
function renderCluster(cluster) {
  const text = JSON.stringify(cluster);
  if (text === shownCluster) return;
  shownCluster = text;
  const banner = document.getElementById("standby");
  const section = document.getElementById("cluster");
  banner.hidden = !cluster || cluster.role !== "standby";
  section.hidden = !cluster;
  if (!cluster) {
    banner.replaceChildren();
    section.replaceChildren();
    return;
  }
  const leader = cluster.leader;
  const toLeader = leader
    ? ["The leader is ", link(leader.dashboard, leader.name, { id: "leader-link", class: "who" }),
      leader.dashboard ? ": its dashboard is the one to act on." : "."]
    : ["No leader is known right now."];
  banner.replaceChildren(el("b", {}, "Standby. "),
    "This server follows the cluster's log: it shows its replica of the leader's state, " +
    "and offers no action. ", ...toLeader);
  const summary = el("p", {},
    "this server ", el("span", { class: "who" }, cluster.member), " (" + cluster.role + ")",
    " · leader ", leader ? link(leader.dashboard, leader.name, { class: "leader who" }) : el("span", { class: "muted" }, "none known"),
    " · term ", el("b", { id: "cluster-term" }, cluster.term),
    " · log index ", el("b", { id: "cluster-index" }, cluster.index),
    " · applied ", el("b", { id: "cluster-applied" }, cluster.applied),
    " · lag ", el("b", { id: "cluster-lag" }, cluster.lag),
    " · leader changes seen ", el("b", {}, cluster.leader_changes));
  section.replaceChildren(el("h2", {}, "Cluster ", el("span", { class: "who" }, cluster.name)), summary,
    membersTable(cluster.members, {}), ...cellsPart(cluster.cells || []));
}

// A table of a cluster's members (role, address, applied index and lag, the age of
// its record, a link to its dashboard).
function membersTable(members, attrs) {
  const head = el("tr", {}, ...["member", "role", "address", "applied", "lag", "recorded", "dashboard"]
    .map((n) => el("th", {}, n)));
  const rows = members.map((m) => el("tr", { class: m.self ? "member self" : "member", "data-member": m.name },
    el("td", { class: "who" }, m.name),
    el("td", { class: "role" }, m.role),
    el("td", { class: "who" }, m.address),
    el("td", { class: "num applied" }, m.applied),
    el("td", { class: "num lag" }, m.lag),
    el("td", {}, m.recorded_at === null ? el("span", { class: "muted" }, "now") : age(m.recorded_at, "since"),
      m.recorded_at === null ? null : " ago"),
    el("td", {}, m.dashboard ? link(m.dashboard, m.self ? "this one" : "open") : el("span", { class: "muted" }, "none"))));
  return el("table", { ...attrs, class: "members" }, el("thead", {}, head), el("tbody", {}, ...rows));
}

// A service of several cells (--cell): each cell, its leader and its members, as the
// service's directory records them (this server's own cell as its cell's store says).
// One cell (a cluster without --cell) is the cluster shown above: nothing more.
function cellsPart(cells) {
  if (cells.length < 2) return [];
  const parts = [el("h3", { id: "cells" }, "Cells of the service: " + cells.length)];
  for (const cell of cells) {
    const leader = cell.members.find((m) => m.name === cell.leader);
    parts.push(el("p", { class: "cell", "data-cell": cell.name },
      "cell ", el("b", { class: "who" }, cell.name), cell.self ? " (this server's)" : "",
      " · leader ", cell.leader
        ? link(leader ? leader.dashboard : null, cell.leader, { class: "leader who" })
        : el("span", { class: "muted" }, "none known"),
      " · log index ", el("b", {}, cell.index)),
    membersTable(cell.members, { "data-cell": cell.name }));
  }
  return parts;
}

function render(message) {
  clockOffset = message.now - Date.now() / 1000;
  const view = message.view;
  const state = document.getElementById("state");
  state.textContent = view.state;
  state.className = "pill " + view.state;
  document.getElementById("grant-rate").textContent = view.rates.grants.toFixed(2);
  document.getElementById("expiry-rate").textContent = view.rates.expiries.toFixed(2);
  drawHistory(view.history);
  document.getElementById("access").textContent =
    (view.token ? "token " + view.token + " (" + view.access + ")" : view.access);
  document.getElementById("logout").hidden = !view.token;
  // A standby grants nothing and ends nothing: its own rates would only say 0.
  const standby = Boolean(view.cluster && view.cluster.role === "standby");
  for (const id of ["grant-rate", "expiry-rate"]) document.getElementById(id).parentElement.hidden = standby;
  document.getElementById("history").hidden = standby;
  renderCluster(view.cluster);
  const main = document.getElementById("board");
  const boardText = JSON.stringify(view.board);
  if (boardText === shownBoard) return; // rates alone changed: keep the DOM (and focus)
  shownBoard = boardText;
  if (!view.board) {
    main.replaceChildren(el("p", { class: "muted" }, "the server is " + view.state));
    return;
  }
  document.getElementById("node-count").textContent = view.board.nodes_total;
  // In the server's order, the busiest first; the idle ones folded into one line.
  const sections = view.board.nodes.filter((node) => !node.activity.idle).map(nodeSection);
  const idle = view.board.nodes.filter((node) => node.activity.idle);
  if (idle.length) sections.push(idleNodes(idle));
  if (!sections.length) sections.push(el("p", { class: "muted" }, "no nodes"));
  const rest = more(view.board.nodes.length, view.board.nodes_total, "nodes");
  // The view reached --dashboard-max-bytes: what follows was left out (the totals say how much).
  const cut = view.board.cut
    ? el("p", { class: "more cut" }, "the rest is left out: the view reached --dashboard-max-bytes")
    : null;
  placeChildren(main, [...sections, ...(rest ? [rest] : []), ...(cut ? [cut] : [])]);
  applyFilter();
}

// The name filter: a semaphore row shows when its name, or its node's, has the text.
function applyFilter() {
  for (const row of document.querySelectorAll("tr.semaphore")) {
    const node = row.closest("section.node").dataset.node.toLowerCase();
    const name = row.dataset.name.toLowerCase();
    row.hidden = Boolean(filterText) && !name.includes(filterText) && !node.includes(filterText);
  }
}

// The last minute's grants, waits and expiries per second (one point a second,
// oldest first), as three lines of one small chart; its title says the last values.
const SERIES = ["grants", "waits", "expiries"];
function drawHistory(history) {
  const box = document.getElementById("history");
  if (!history || !history.grants.length) {
    box.replaceChildren();
    return;
  }
  const width = 180, height = 28;
  const top = Math.max(1, ...SERIES.flatMap((name) => history[name]));
  const svgNs = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(svgNs, "svg");
  svg.setAttribute("width", width);
  svg.setAttribute("height", height);
  svg.setAttribute("viewBox", "0 0 " + width + " " + height);
  for (const name of SERIES) {
    const values = history[name];
    const step = values.length > 1 ? width / (values.length - 1) : 0;
    const points = values.map((v, i) => (i * step).toFixed(1) + "," + (height - 1 - (v / top) * (height - 2)).toFixed(1));
    const line = document.createElementNS(svgNs, "polyline");
    line.setAttribute("class", "series " + name);
    line.setAttribute("data-series", name);
    line.setAttribute("points", points.join(" "));
    svg.append(line);
  }
  const last = (name) => history[name][history[name].length - 1];
  box.title = "the last minute, per second: grants (now " + last("grants") + "), waits (" + last("waits") +
    "), expiries (" + last("expiries") + "); the chart's top is " + top + "/s";
  box.replaceChildren(svg);
}

function notice(text) {
  const p = document.getElementById("notice");
  p.textContent = text || "";
  p.hidden = !text;
}

async function post(path, body) {
  const response = await fetch(API + path, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
    credentials: "same-origin",
  });
  const answer = await response.json().catch(() => ({}));
  return { ok: response.ok, status: response.status, answer };
}

async function endSession(node, sessionId) {
  if (!window.confirm("End session " + sessionId + " of node " + node + "? Its holds are released.")) return;
  const { ok, answer } = await post("/kill", { node, session_id: sessionId });
  notice(ok ? "" : "could not end session " + sessionId + ": " + (answer.error || "refused"));
}

// Before a login the header has nothing to say of a server it may not see: its
// state, rates, counts and live mark are hidden.
function showLogin(show) {
  document.getElementById("login").hidden = !show;
  document.getElementById("board").hidden = show;
  for (const part of document.querySelectorAll("header .status")) part.hidden = show;
}

// The view the page came with (dashboard_page.py): drawn before the first paint, so
// that a page never shows an empty one while its data is known; undefined if absent.
function firstView() {
  const carried = document.getElementById("first-view");
  try {
    return JSON.parse(carried.textContent);
  } catch {
    return undefined;
  } finally {
    carried.remove(); // (read once: a login starts afresh)
  }
}

// Show ``first`` (a view, or {refused: STATUS, answer}), or else the one the API
// answers now; then follow the event stream.
async function start(first) {
  if (source) source.close();
  source = null;
  shownBoard = null;
  shownCluster = null;
  let message = first;
  if (message === undefined) {
    const response = await fetch(API + "/board", { credentials: "same-origin" });
    const answer = await response.json().catch(() => ({}));
    message = response.ok ? answer : { refused: response.status, answer };
  }
  if (message.refused === 401) {
    showLogin(true);
    return;
  }
  showLogin(false);
  if (message.refused) notice("refused (" + message.refused + "): " + (message.answer.error || "no reason given"));
  else render(message);
  source = new EventSource(API + "/events");
  const live = document.getElementById("live");
  source.onopen = () => live.classList.add("on");
  source.onmessage = (event) => render(JSON.parse(event.data));
  source.onerror = () => live.classList.remove("on"); // EventSource reconnects by itself
}

document.getElementById("login").addEventListener("submit", async (event) => {
  event.preventDefault();
  const { ok, answer } = await post("/login", { secret: document.getElementById("secret").value });
  document.getElementById("login-error").textContent = ok ? "" : (answer.error || "refused");
  if (ok) start();
});
document.getElementById("logout").addEventListener("click", async () => {
  await post("/logout", {});
  if (source) source.close();
  source = null;
  showLogin(true);
});
document.getElementById("filter").addEventListener("input", (event) => {
  filterText = event.target.value.trim().toLowerCase();
  applyFilter();
});
setInterval(tickAges, 1000);
start(firstView());
