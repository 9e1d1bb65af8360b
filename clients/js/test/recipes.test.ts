/** Elections, readers-writer locks and claims against a real `tenure serve`. */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { LeaderChangedError, connect, type Client, type LeaderState, type Lease } from "../src/index.js";
import { startServer, type Server } from "../src/testing.js";
import { unique, until, waiters } from "./helpers.js";

let server: Server;
let client: Client;
const utf8 = new TextEncoder();
const text = (bytes: Uint8Array): string => Buffer.from(bytes).toString();

before(async () => {
  server = await startServer();
  client = await connect(server.url);
});

after(async () => {
  await client?.close();
  await server?.stop();
});

async function node(): Promise<string> {
  const name = unique("node");
  await client.createNode(name);
  return name;
}

test("an election: campaign in arrival order, proclaim, resign, observe each change", async () => {
  const n = await node();
  const a = await client.session(n);
  const b = await client.session(n);
  const watcher = await client.session(n);
  const seen: string[] = [];
  const observing = (async () => {
    for await (const state of watcher.election("primary").observe()) {
      seen.push(describe(state));
      if (seen.length === 5) return;
    }
  })();
  await until(() => seen.length === 1, "the first state (nobody)");
  const first = await a.election("primary").campaign(utf8.encode("a:1"));
  await until(() => seen.length === 2, "a leads");
  const second = b.election("primary").campaign(utf8.encode("b:1"));
  await waiters(a.semaphore("primary"), 1);
  await first.proclaim(utf8.encode("a:2"));
  await until(() => seen.length === 3, "a's new data");
  const leader = await b.election("primary").leader();
  assert.deepEqual([leader?.sessionId, leader?.isMe, text(leader!.data), leader?.token], [a.sessionId, false, "a:2", first.token]);
  await first.resign();
  const won = await second;
  assert.ok(won.token > first.token);
  await until(() => seen.length === 4, "b leads");
  await won.resign();
  await observing;
  assert.deepEqual(seen, ["nobody", `${a.sessionId} a:1`, `${a.sessionId} a:2`, `${b.sessionId} b:1`, "nobody"]);
  await assert.rejects(first.proclaim(utf8.encode("late")), /resigned|released/);
});

test("a leadership lost with its session is a LeaderChangedError", async () => {
  const n = await node();
  const a = await client.session(n);
  const leadership = await a.election("lost").campaign();
  const other = await connect(server.url);
  try {
    // Another process takes the session over by its ticket: this one is told it is gone.
    await other.session(n, { resume: a.ticket() });
    await until(() => leadership.signal.aborted, "the leadership lost");
    assert.ok(leadership.signal.reason instanceof LeaderChangedError);
  } finally {
    await other.close();
  }
});

test("an rwlock: readers share, a writer waits for them and readers behind it wait for it", async () => {
  const n = await node();
  const [r1, r2, w, r3] = await Promise.all([0, 1, 2, 3].map(() => client.session(n)));
  const read1 = await r1!.rwlock("doc").read();
  const read2 = await r2!.rwlock("doc").read();
  assert.equal(await w!.rwlock("doc").tryWrite(), null);
  const order: string[] = [];
  const writing = w!.rwlock("doc").write().then((lease) => (order.push("writer"), lease));
  await waiters(r1!.semaphore("doc"), 1);
  assert.equal(await r3!.rwlock("doc").tryRead(), null); // a writer waits: no barging
  const reading = r3!.rwlock("doc").read().then((lease) => (order.push("reader"), lease));
  await waiters(r1!.semaphore("doc"), 2);
  const described = await r1!.rwlock("doc").describe();
  assert.deepEqual([described.writer, described.readers.length, described.waiting], [null, 2, 2]);
  await read1.release();
  await read2.release();
  const write: Lease = await writing;
  assert.ok(write.token > read2.token);
  assert.equal((await r1!.rwlock("doc").describe()).writer?.sessionId, w!.sessionId);
  await write.release();
  await (await reading).release();
  assert.deepEqual(order, ["writer", "reader"]);
});

test("a claim: once per slot, refused while held, released by its id from another client", async () => {
  const n = await node();
  const a = await client.session(n);
  const b = await client.session(n);
  const claim = await a.claim("nightly", { atLeast: 0, atMost: 60_000, data: utf8.encode("job-1") });
  assert.ok(claim !== null);
  assert.match(claim.id, /^[0-9a-f]{32}$/);
  assert.equal(text(claim.record.data), "job-1");
  assert.equal(await b.claim("nightly", { atLeast: 0, atMost: 60_000 }), null);
  const other = await connect(server.url);
  try {
    assert.equal(await other.releaseClaim(n, "nightly", claim.id), true);
    assert.equal(await other.releaseClaim(n, "nightly", claim.id), false);
  } finally {
    await other.close();
  }
  const next = await b.claim("nightly", { atLeast: 0, atMost: 60_000 });
  assert.ok(next !== null && next.token > claim.token);
  assert.equal(await next.release(), true);
});

function describe(state: LeaderState): string {
  return state.sessionId === null ? "nobody" : `${state.sessionId} ${text(state.data)}`;
}
