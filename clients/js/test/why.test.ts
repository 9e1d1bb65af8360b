/**
 * `client.why` (WhyName, protocol version 9) against a real `tenure serve`: a chain of
 * three holders that wait, its root; a page of waiters; a node's maxHold counting
 * down; and the refusals. This client numbers no tasks, so the server counts every
 * request a holder's session has queued as what that hold waits for.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { hostname } from "node:os";
import { InvalidArgumentError, MAX_COUNT, NotFoundError, connect, type Client } from "../src/index.js";
import { startServer, type Server } from "../src/testing.js";
import { unique, waiters } from "./helpers.js";

let server: Server;
let client: Client;

before(async () => {
  server = await startServer();
  client = await connect(server.url, { name: "why-test" });
});

after(async () => {
  await client?.close();
  await server?.stop();
});

async function node(settings: { maxHold?: number } = {}): Promise<string> {
  const name = unique("why");
  await client.createNode(name, settings);
  return name;
}

test("why follows a chain of three to its root: A's holder waits for B, B's for C", async () => {
  assert.equal(client.protocolVersion, 10);
  const n = await node();
  const a = await client.session(n, { description: "job a" });
  const b = await client.session(n, { description: "job b" });
  const c = await client.session(n, { description: "job c" });
  const heldC = await c.mutex("C").lock();
  const heldB = await b.mutex("B").lock();
  const bWaits = b.mutex("C").lock(); // b holds B, then waits for C
  await waiters(c.semaphore("C"), 1);
  const heldA = await a.mutex("A").lock();
  const aWaits = a.mutex("B").lock(); // a holds A, then waits for B
  await waiters(c.semaphore("B"), 1);

  const report = await client.why(n, "A");

  assert.deepEqual([report.node, report.name, report.holdersTotal, report.waitersTotal, report.cut], [n, "A", 1, 0, false]);
  assert.deepEqual(report.waiters, []);
  assert.equal(report.holders.length, 1);
  const holder = report.holders[0]!;
  assert.deepEqual(
    [holder.sessionId, holder.description, holder.count, holder.token, holder.maxHoldEndsIn],
    [a.sessionId, "job a", MAX_COUNT, heldA.token, null],
  );
  assert.deepEqual(holder.identity, { host: hostname(), pid: process.pid, name: "why-test" });
  assert.equal(holder.address, "127.0.0.1"); // (where the server sees the connection)
  assert.ok(holder.heldFor !== null && holder.heldFor >= 0, `heldFor ${holder.heldFor}`);
  assert.deepEqual(holder.waitingFor, [{ node: n, name: "B", position: 1 }]);
  assert.deepEqual(report.chain, [
    { node: n, name: "A", sessionId: a.sessionId, waitsOn: ["B"], waitsElsewhere: [] },
    { node: n, name: "B", sessionId: b.sessionId, waitsOn: ["C"], waitsElsewhere: [] },
    { node: n, name: "C", sessionId: c.sessionId, waitsOn: [], waitsElsewhere: [] },
  ]);
  assert.equal(report.roots?.length, 1);
  const root = report.roots![0]!;
  assert.deepEqual([root.node, root.name, root.sessionId, root.description], [n, "C", c.sessionId, "job c"]);
  assert.ok(root.heldFor >= 0, `heldFor ${root.heldFor}`);

  // From the root's name: its holder waits for nothing; b waits in its queue.
  const atRoot = await client.why(n, "C");
  assert.deepEqual(atRoot.holders.map((h) => [h.sessionId, h.token, h.waitingFor]), [[c.sessionId, heldC.token, []]]);
  assert.deepEqual(atRoot.waiters.map((w) => [w.sessionId, w.description, w.count, w.position]), [[b.sessionId, "job b", MAX_COUNT, 1]]);
  assert.ok(atRoot.waiters[0]!.waitingFor !== null && atRoot.waiters[0]!.waitingFor >= 0);
  assert.deepEqual(atRoot.chain, [{ node: n, name: "C", sessionId: c.sessionId, waitsOn: [], waitsElsewhere: [] }]);
  assert.deepEqual(atRoot.roots?.map((r) => [r.name, r.sessionId]), [["C", c.sessionId]]);

  // The chain unwinds from its root: C to b, then B to a.
  await heldC.release();
  const bGot = await bWaits;
  await bGot.release();
  await heldB.release();
  const aGot = await aWaits;
  assert.ok(aGot.token > heldB.token);
  await aGot.release();
  await heldA.release();
  await assert.rejects(client.why(n, "C"), NotFoundError); // (a mutex is gone with its last holder)
  await Promise.all([a, b, c].map((s) => s.close()));
});

test("why gives a page of waiters: `after` leaves out the first, `limit` bounds each list", async () => {
  const n = await node({ maxHold: 60_000 });
  const sessions = await Promise.all([0, 1, 2, 3].map((i) => client.session(n, { description: `s${i}` })));
  const held = await sessions[0]!.mutex("m").lock();
  const pending = [];
  for (const i of [1, 2, 3]) {
    pending.push(sessions[i]!.mutex("m").lock());
    await waiters(sessions[0]!.semaphore("m"), i); // queued before the next asks
  }

  const whole = await client.why(n, "m");
  assert.deepEqual(whole.waiters.map((w) => [w.sessionId, w.description, w.position]), [
    [sessions[1]!.sessionId, "s1", 1],
    [sessions[2]!.sessionId, "s2", 2],
    [sessions[3]!.sessionId, "s3", 3],
  ]);
  assert.deepEqual([whole.holdersTotal, whole.waitersTotal], [1, 3]);
  // The node's maxHold (60 s) counts down in ms.
  const endsIn = whole.holders[0]!.maxHoldEndsIn;
  assert.ok(endsIn !== null && endsIn > 0 && endsIn <= 60_000, `maxHoldEndsIn ${endsIn}`);

  const page = await client.why(n, "m", { after: 1, limit: 1 });
  assert.deepEqual(page.waiters.map((w) => [w.sessionId, w.position]), [[sessions[2]!.sessionId, 2]]);
  assert.deepEqual(page.holders.map((h) => h.sessionId), [sessions[0]!.sessionId]);
  assert.deepEqual([page.holdersTotal, page.waitersTotal], [1, 3]);
  assert.deepEqual((await client.why(n, "m", { after: 3 })).waiters, []);

  await held.release();
  for (const waiting of pending) await (await waiting).release();
  await Promise.all(sessions.map((s) => s.close()));
});

test("why refuses a missing node or name (NotFoundError) and bad arguments (InvalidArgumentError)", async () => {
  const n = await node();
  await assert.rejects(client.why(n, unique("never-made")), NotFoundError);
  await assert.rejects(client.why(unique("no-node"), "m"), NotFoundError);
  await assert.rejects(client.why(n, "m", { limit: 0 }), InvalidArgumentError);
  await assert.rejects(client.why(n, "m", { limit: 10_001 }), InvalidArgumentError);
  await assert.rejects(client.why(n, "m", { after: -1 }), InvalidArgumentError);
  await assert.rejects(client.why(n, ""), InvalidArgumentError);
  await assert.rejects(client.why(n, "bad\u0001name"), InvalidArgumentError);
  // The connection goes on.
  const session = await client.session(n);
  await using lock = await session.mutex("m").lock();
  assert.deepEqual((await client.why(n, "m", { limit: 1 })).holders.map((h) => h.token), [lock.token]);
});
