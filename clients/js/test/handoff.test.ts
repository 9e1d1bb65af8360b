/**
 * Hand-offs (protocol version 7: OfferHold, AdoptHold) against a real `tenure serve`:
 * one hold moved between sessions of two clients in one step, with a greater token;
 * adopted once, only the latest string; the refusals; a secret of the caller's own;
 * explicit hold numbers; and `createNode`'s `existOk`, `maxHold` and `longHold`.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import {
  InvalidArgumentError,
  LeaseLostError,
  connect,
  formatHandoff,
  parseHandoff,
  type Client,
} from "../src/index.js";
import { startServer, type Server } from "../src/testing.js";
import { unique, until, waiters } from "./helpers.js";

let server: Server;
let producer: Client;
let worker: Client;
const utf8 = new TextEncoder();

before(async () => {
  server = await startServer();
  producer = await connect(server.url);
  worker = await connect(server.url);
});

after(async () => {
  await producer?.close();
  await worker?.close();
  await server?.stop();
});

async function node(): Promise<string> {
  const name = unique("handoff");
  await producer.createNode(name);
  return name;
}

test("a hold handed to another client's session: the offer ends lost, the adopter holds it with a greater token", async () => {
  const n = await node();
  const [from, to, waiting] = [await producer.session(n), await worker.session(n), await worker.session(n)];
  await from.semaphore("gpus").create({ limit: 2 });
  const lease = await from.semaphore("gpus").acquire({ count: 2, data: utf8.encode("job-7") });
  const queued = waiting.semaphore("gpus").acquire({ count: 1 });
  await waiters(from.semaphore("gpus"), 1);

  const text = await lease.handoff();
  assert.match(text, /^h1\./);
  assert.equal(lease.held, true); // offered, not yet adopted
  const permit = await to.adopt(text);

  await until(() => lease.signal.aborted, "the offering lease told it is lost"); // (a push to the other client)
  assert.ok(lease.signal.reason instanceof LeaseLostError);
  assert.match((lease.signal.reason as Error).message, /handed off/);
  assert.ok(permit.token > lease.token);
  assert.equal(permit.count, 2n);
  const state = await to.semaphore("gpus").describe({ owners: true, waiters: true });
  assert.deepEqual(
    state.owners.map((o) => [o.sessionId, o.count, Buffer.from(o.data).toString(), o.token]),
    [[to.sessionId, 2n, "job-7", permit.token]],
  );
  assert.deepEqual(state.waiters.map((w) => w.sessionId), [waiting.sessionId]); // kept its place
  await permit.release();
  const next = await queued;
  assert.ok(next.token > permit.token);
  await next.release();
});

test("a hand-off adopts once, only the latest string, and never a hold that ended", async () => {
  const n = await node();
  const [from, to] = [await producer.session(n), await worker.session(n)];
  const lock = await from.mutex("once").lock();
  const first = await lock.handoff();
  const second = await lock.handoff();
  assert.notEqual(first, second);
  await assert.rejects(to.adopt(first), LeaseLostError); // offered again since
  const adopted = await to.adopt(second);
  await assert.rejects(to.adopt(second), LeaseLostError); // adopted already
  await assert.rejects(lock.handoff(), LeaseLostError); // the producer's lease ended
  const text = await adopted.handoff();
  await adopted.release();
  await assert.rejects(from.adopt(text), /cannot be adopted/);
});

test("a string that is not a hand-off, or one of another node, is refused before anything is sent", async () => {
  const n = await node();
  const session = await worker.session(n);
  const lock = await session.mutex("m").lock();
  const text = await lock.handoff();
  for (const garbled of ["", "h1.", text.slice(0, -30), text.replace("h1.", "h2."), `${text}.x`, text.replace(/\.(\d+)\./, ".x1.")]) {
    await assert.rejects(session.adopt(garbled), InvalidArgumentError, garbled);
  }
  const elsewhere = formatHandoff({ ...parseHandoff(text), node: "another-node" });
  await assert.rejects(session.adopt(elsewhere), /hold in node "another-node"; this session is of/);
  const etcd = formatHandoff({ ...parseHandoff(text), scheme: "etcd" });
  await assert.rejects(session.adopt(etcd), /a etcd:\/\/ hold; this is a tenure:\/\/ session/);
  await assert.rejects(lock.handoff({ secret: new Uint8Array(8) }), /secret must be 16 to 64 bytes/);
  assert.equal(lock.held, true); // nothing happened to it
  assert.deepEqual(parseHandoff(` ${text}\n`), parseHandoff(text));
});

test("a secret of the caller's own and chosen hold numbers: another process finds the hold without the string", async () => {
  const n = await node();
  const [from, to] = [await producer.session(n), await worker.session(n)];
  await from.semaphore("slots").create({ limit: 5 });
  const lease = await from.semaphore("slots").acquire({ count: 1, data: utf8.encode("worker-1"), hold: 77 });
  assert.equal(lease.hold, 77);
  await assert.rejects(from.semaphore("slots").acquire({ count: 1, hold: 77 }), /holds or waits for slots as hold 77 already/);
  await assert.rejects(from.semaphore("slots").acquire({ count: 1, hold: -1 }), InvalidArgumentError);
  const secret = utf8.encode("a secret both sides derive");
  await lease.handoff({ secret });
  // The adopter reads the holder and token from a describe; the hold number it knew.
  const owner = (await to.semaphore("slots").describe({ owners: true })).owners[0]!;
  const text = formatHandoff({ scheme: "tenure", node: n, name: "slots", holder: owner.sessionId, holderHold: 77, token: owner.token, secret });
  const adopted = await to.adopt(text, { hold: 5 });
  assert.equal(adopted.hold, 5);
  assert.ok(adopted.token > lease.token);
  await until(() => !lease.held, "the offering lease told it is lost");
  await adopted.release();
});

test("createNode: existOk leaves an existing node as it is; maxHold is a node setting; unknown names are refused", async () => {
  const name = unique("node");
  await producer.createNode(name, { recoveryWindow: 12_000, maxHold: 60_000 });
  await producer.createNode(name, { existOk: true, recoveryWindow: 99_000 });
  const described = await producer.describeNode(name);
  assert.equal(described.config.recoveryWindow, 12_000);
  assert.equal(described.config.maxHold, 60_000);
  await assert.rejects(producer.createNode(name), /exists/);
  await assert.rejects(producer.createNode(unique("node"), { existOK: true } as never), /existOK is not a node setting/);
  assert.equal((await producer.alterNode(name, { maxHold: null })).config.maxHold, null);
});

test("createNode and alterNode: longHold is a node setting, 0 and null kept apart; a negative one is refused", async () => {
  const name = unique("node");
  await producer.createNode(name, { longHold: 300_000 });
  assert.equal((await producer.describeNode(name)).config.longHold, 300_000);
  assert.equal((await producer.describeNode(name)).config.maxHold, null); // (sent as nil before it)
  assert.equal((await producer.alterNode(name, { longHold: 0 })).config.longHold, 0);
  assert.equal((await producer.alterNode(name, { longHold: null })).config.longHold, null);
  const both = unique("node");
  await producer.createNode(both, { maxHold: 60_000, longHold: 1_500 });
  const described = await producer.describeNode(both);
  assert.deepEqual([described.config.maxHold, described.config.longHold], [60_000, 1_500]);
  await assert.rejects(producer.createNode(unique("node"), { longHold: -1 }), /longHold must be a finite number of milliseconds/);
  await assert.rejects(producer.alterNode(name, { longHold: Number.NaN }), /longHold must be a finite number of milliseconds/);
});
