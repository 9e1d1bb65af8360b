// The tenure dashboard's kind column: the kind of each semaphore, and the recipe its
// shape tells with its facts (loaded before app.js, whose el, duration and serverNow
// these use when the page draws). Every fact is a number or an escaped id: text only.
"use strict";

const KINDS = {
  mutex: ["mutex / election", "a mutex, or an election: its holder is the leader, the holder's " +
    "data the leader's data and its token the leadership's term"],
  ephemeral: ["semaphore, ephemeral", "gone once nobody holds or waits for it"],
  semaphore: ["semaphore", "created, and deleted, by a client"],
};

// The recipes a semaphore's shape tells (the server's tenure._core.kinds: numbers
// only, never data), as docs/recipes.md names them.
const RECIPES = {
  rwlock: ["readers-writer lock", "readers hold 1 token each, a writer all of them"],
  rate_limiter: ["rate limiter", "GCRA: its data is 'limiter RATE BURST TAT'"],
  barrier: ["barrier", "its data is 'ROUND LAST'; each arrival holds 1 token"],
  counter: ["counter / latch", "a counter's value, or a latch's count left: stored alike"],
  group: ["group", "its data is 'group'; each member holds 1 token, its owner data its record"],
  claim: ["claim", "a name claimed once per slot: its data is the claim's record; the " +
    "server deletes it when the claim ends"],
};

function num(value) {
  return String(Math.round(value * 100) / 100);
}

function many(count, what) {
  return count + " " + what + (count === 1 ? "" : "s");
}

// GCRA, as tenure._core.kinds.LimiterKind.level: units that may go now, or the
// time until every reservation made has gone.
function limiterText(recipe) {
  const ahead = Math.max(0, recipe.tat - serverNow());
  const available = Math.max(0, recipe.burst - recipe.rate * ahead);
  const backlog = Math.max(0, ahead - recipe.burst / recipe.rate);
  const level = backlog > 0 ? "backlog " + backlog.toFixed(1) + " s (none available)"
    : num(available) + " available now";
  return num(recipe.rate) + "/s, burst " + num(recipe.burst) + ", " + level;
}

// A claim, as tenure._core.kind_render.kind_text: its token, whether it was released, and
// the time left until it ends (at its at_most, or after a release at the later of the
// release and its at_least), by the server's clock.
function claimText(recipe) {
  const left = recipe.ends_at - serverNow();
  const text = "token " + recipe.token + (recipe.released_at === null ? "" : ", released");
  if (left <= 0) return text + ", ended";
  const least = recipe.granted_at + recipe.at_least - serverNow();
  return text + ", " + duration(left) + " left" +
    (recipe.released_at === null && least > 0 ? " (at least " + duration(least) + ")" : "");
}

function recipeText(recipe) {
  if (recipe.kind === "rwlock") {
    const holding = recipe.readers ? [many(recipe.readers, "reader")] : [];
    if (recipe.writer) holding.push("a writer");
    const waiting = recipe.writers_waiting ? [many(recipe.writers_waiting, "writer")] : [];
    if (recipe.readers_waiting) waiting.push(many(recipe.readers_waiting, "reader"));
    return (holding.length ? holding.join(" and ") + " holding" : "nobody holding") +
      (waiting.length ? ", " + waiting.join(" and ") + " waiting" : "");
  }
  if (recipe.kind === "rate_limiter") return limiterText(recipe);
  if (recipe.kind === "barrier") {
    return recipe.arrived + "/" + (recipe.parties === null ? "?" : recipe.parties) +
      " arrived, " + many(recipe.rounds, "round") + " passed";
  }
  if (recipe.kind === "counter") return "value " + recipe.value;
  if (recipe.kind === "group") {
    const more = recipe.members > recipe.ids.length ? ", " + (recipe.members - recipe.ids.length) + " more" : "";
    return recipe.members + " of at most " + recipe.max_members + " members" +
      (recipe.ids.length ? ": " + recipe.ids.join(", ") + more : "") +
      (recipe.partition_members ? ", " + recipe.partition_members + " in its partition" : "") +
      (recipe.joining ? ", " + recipe.joining + " joining" : "");
  }
  if (recipe.kind === "claim") return claimText(recipe);
  return "";
}

// The kind cell: the recipe and its facts when the shape tells one, else the
// semaphore's kind.
function kindCell(sem) {
  const recipe = sem.recipe;
  const named = recipe && RECIPES[recipe.kind];
  if (!named) {
    const [kindText, kindTitle] = KINDS[sem.kind] || [sem.kind, ""];
    return el("td", {}, el("span", { class: "kind", title: kindTitle }, kindText));
  }
  const among = "among the first " + recipe.scanned + " of " + (sem.owners_total + sem.waiters_total);
  const facts = recipeText(recipe) + (recipe.counted_all ? "" : " (" + among + " holders and waiters)");
  const attrs = { class: "recipe", "data-kind": recipe.kind };
  if (recipe.kind === "rate_limiter") {
    Object.assign(attrs, { "data-rate": recipe.rate, "data-burst": recipe.burst, "data-tat": recipe.tat });
  }
  if (recipe.kind === "claim") attrs["data-claim"] = JSON.stringify(recipe);
  return el("td", {}, el("span", { class: "kind", title: named[1] }, named[0]), el("div", attrs, facts));
}
