/**
 * `client.top` (TopNames, protocol version 9) against a real `tenure serve`: a name
 * waited on is listed with its wait and grants, the most waited first; every node's;
 * and the refusals, before anything is sent.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { InvalidArgumentError, NotFoundError, TOP_PAGE, connect, type Client, type TopSort } from "../src/index.js";
import { startServer, type Server } from "../src/testing.js";
import { unique, waiters } from "./helpers.js";

let server: Server;
let client: Client;

before(async () => {
  server = await startServer();
  client = await connect(server.url, { name: "top-test" });
});

after(async () => {
  await client?.close();
  await server?.stop();
});

test("a name waited on is listed with its waits; the most waited first", async () => {
  const n = unique("top");
  await client.createNode(n);
  const holder = await client.session(n, { description: "holder" });
  const first = await client.session(n, { description: "first" });
  const second = await client.session(n, { description: "second" });
  // "busy" is waited on twice, each wait begun before "calm"'s one and ended after it: at
  // least as long (not surely longer: the server's heard time stands still while its loop
  // is stalled; on a tie the name sorts "busy" first too).
  const busy = await holder.mutex("busy").lock();
  const busyWaits = [first.mutex("busy").lock()];
  await waiters(holder.semaphore("busy"), 1);
  busyWaits.push(second.mutex("busy").lock());
  await waiters(holder.semaphore("busy"), 2);
  const calm = await holder.mutex("calm").lock();
  const calmWait = first.mutex("calm").lock();
  await waiters(holder.semaphore("calm"), 1);

  const now = await client.top(n, { sort: "queue" });
  assert.deepEqual(now.names.map((s) => [s.name, s.queue, s.holders]), [["busy", 2, 1], ["calm", 1, 1]]);
  assert.ok(now.names[0]!.longestHold !== null && now.names[0]!.longestHold >= 0);

  await calm.release();
  await (await calmWait).release();
  await busy.release();
  for (const wait of busyWaits) await (await wait).release();

  const report = await client.top(n);
  assert.deepEqual([report.node, report.window, report.sort], [n, 60_000, "wait"]);
  assert.deepEqual(report.names.map((s) => [s.node, s.name, s.grants, s.queued]), [[n, "busy", 2, 2], [n, "calm", 1, 1]]);
  assert.ok(report.names[0]!.waited >= report.names[1]!.waited);
  assert.ok(report.names[1]!.waited >= 0);
  assert.ok(report.names[0]!.waitP50 !== null && report.names[0]!.holdP99 !== null);
  assert.ok(report.kept >= 2 && report.kept <= report.capacity);
  const everywhere = await client.top("", { window: 300_000, sort: "grants", limit: 10_000 });
  assert.equal(everywhere.node, "");
  assert.deepEqual(everywhere.names.filter((s) => s.node === n).map((s) => s.name), ["busy", "calm"]);
  for (const session of [holder, first, second]) await session.close();
});

test("top refuses what the server would, before sending", async () => {
  assert.equal(TOP_PAGE, 20);
  await assert.rejects(client.top(unique("no-such-node")), NotFoundError);
  await assert.rejects(client.top("", { window: 30_000 }), InvalidArgumentError);
  await assert.rejects(client.top("", { sort: "names" as TopSort }), InvalidArgumentError);
  await assert.rejects(client.top("", { limit: 0 }), InvalidArgumentError);
  await assert.rejects(client.top("bad\u0000node"), InvalidArgumentError);
});
