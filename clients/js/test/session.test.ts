/** The client against a real `tenure serve`: nodes, mutexes, semaphores, watches, tickets. */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import {
  AlreadyExistsError,
  LeaseLostError,
  MAX_COUNT,
  NotFoundError,
  SessionExpiredError,
  TimeoutError,
  connect,
  type Client,
  type Lease,
} from "../src/index.js";
import { startServer, type Server } from "../src/testing.js";
import { unique, until, waiters } from "./helpers.js";

let server: Server;
let client: Client;
const utf8 = new TextEncoder();

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

test("nodes: create, describe, list, drop, and the errors as classes", async () => {
  const name = unique("node");
  await client.createNode(name, { recoveryWindow: 12_500, maxWaiters: 7 });
  const described = await client.describeNode(name);
  assert.equal(described.config.recoveryWindow, 12_500);
  assert.equal(described.config.maxWaiters, 7);
  assert.ok((await client.listNodes()).includes(name));
  await assert.rejects(client.createNode(name), AlreadyExistsError);
  await client.dropNode(name);
  await assert.rejects(client.describeNode(name), NotFoundError);
  assert.equal(client.protocolVersion, 10);
});

test("a mutex serves its waiters in arrival order, each token greater than the last", async () => {
  const n = await node();
  const sessions = await Promise.all([0, 1, 2, 3].map(() => client.session(n)));
  const first = await sessions[0]!.mutex("job").lock();
  const order: number[] = [];
  const pending: Promise<Lease>[] = [];
  for (const i of [1, 2, 3]) {
    pending.push(
      sessions[i]!.mutex("job")
        .lock()
        .then((lease) => {
          order.push(i);
          return lease;
        }),
    );
    await waiters(sessions[0]!.semaphore("job"), i); // queued before the next asks
  }
  const tokens = [first.token];
  await first.release();
  for (const waiting of pending) {
    const lease = await waiting;
    tokens.push(lease.token);
    await lease.release();
  }
  assert.deepEqual(order, [1, 2, 3]);
  for (let i = 1; i < tokens.length; i += 1) assert.ok(tokens[i]! > tokens[i - 1]!, `tokens ${tokens.join(", ")}`);
  await Promise.all(sessions.map((s) => s.close()));
});

test("tryLock, a timeout, and an abort signal each leave the queue as they say", async () => {
  const n = await node();
  const holder = await client.session(n);
  const other = await client.session(n);
  const lock = await holder.mutex("m").lock();
  assert.equal(await other.mutex("m").tryLock(), null);
  await assert.rejects(other.mutex("m").lock({ timeout: 50 }), TimeoutError);
  const controller = new AbortController();
  const waiting = other.mutex("m").lock({ signal: controller.signal });
  await waiters(holder.semaphore("m"), 1);
  controller.abort(new Error("gave up"));
  await assert.rejects(waiting, /gave up/);
  await waiters(holder.semaphore("m"), 0);
  await lock.release();
  // The released mutex is free: the next lock is granted at once.
  const again = await other.mutex("m").tryLock();
  assert.ok(again !== null && again.token > lock.token);
  await again.release();
});

test("await using releases a lock at the end of its block; its signal fires", async () => {
  const n = await node();
  await using session = await client.session(n);
  let signal: AbortSignal;
  {
    await using lock = await session.mutex("scoped").lock();
    signal = lock.signal;
    assert.equal(signal.aborted, false);
  }
  assert.equal(signal.aborted, true);
  const next = await session.mutex("scoped").tryLock();
  assert.ok(next !== null);
  await next.release();
});

test("a semaphore: create, acquire counts with data, describe, update, compare-and-set", async () => {
  const n = await node();
  const a = await client.session(n, { description: "worker a" });
  const b = await client.session(n);
  const pool = a.semaphore("pool");
  await pool.create({ limit: 3, data: utf8.encode("v1") });
  await assert.rejects(pool.create({ limit: 3 }), AlreadyExistsError);
  const two = await pool.acquire({ count: 2, data: utf8.encode("a-data") });
  const one = await b.semaphore("pool").acquire({ count: 1 });
  assert.equal(await b.semaphore("pool").tryAcquire({ count: 1 }), null);
  const described = await pool.describe({ owners: true });
  assert.equal(described.count, 3n);
  assert.equal(described.limit, 3n);
  const owner = described.owners.find((o) => o.sessionId === a.sessionId)!;
  assert.deepEqual([owner.count, Buffer.from(owner.data).toString(), owner.token, owner.description], [2n, "a-data", two.token, "worker a"]);
  assert.equal(await pool.compareAndSet(utf8.encode("nope"), utf8.encode("v2")), false);
  assert.equal(await pool.compareAndSet(utf8.encode("v1"), utf8.encode("v2")), true);
  await pool.update(utf8.encode("v3"));
  assert.equal(Buffer.from((await pool.describe()).data).toString(), "v3");
  await one.release();
  await two.release();
  await pool.delete();
  await assert.rejects(pool.describe(), NotFoundError);
});

test("a restate changes a hold's data in place: the same token, seen by a describe", async () => {
  const n = await node();
  const a = await client.session(n);
  const lease = await a.semaphore("slots").acquire({ count: 1, ephemeral: true, data: utf8.encode("step 1") });
  await lease.restate(utf8.encode("step 2"));
  assert.ok(lease.held);
  const described = await a.semaphore("slots").describe({ owners: true });
  assert.equal(described.owners.length, 1);
  const owner = described.owners[0]!;
  assert.deepEqual([Buffer.from(owner.data).toString(), owner.token], ["step 2", lease.token]);
  await lease.release();
});

test("watch yields the state now, then each change in the order it was made", async () => {
  const n = await node();
  const watcher = await client.session(n);
  const writer = await client.session(n);
  await writer.semaphore("config").create({ limit: 1, data: utf8.encode("0") });
  const seen: string[] = [];
  for await (const state of watcher.semaphore("config").watch({ data: true })) {
    seen.push(Buffer.from(state.data).toString());
    if (seen.length === 4) break;
    await writer.semaphore("config").update(utf8.encode(String(seen.length)));
  }
  assert.deepEqual(seen, ["0", "1", "2", "3"]);
  // Owners: another session's lock shows up, then its release.
  const states: number[] = [];
  const iterator = watcher.semaphore("config").watch({ owners: true });
  states.push((await iterator.next()).value!.owners.length);
  const lease = await writer.semaphore("config").acquire();
  await until(async () => {
    states.push((await iterator.next()).value!.owners.length);
    return states.at(-1) === 1;
  }, "the owner seen");
  await lease.release();
  await until(async () => {
    states.push((await iterator.next()).value!.owners.length);
    return states.at(-1) === 0;
  }, "the release seen");
  await iterator.return();
  assert.deepEqual([states[0], states.at(-1)], [0, 0]);
});

test("a ticket resumes the live session in another client: its holds, tokens unchanged", async () => {
  const n = await node();
  const first = await client.session(n, { recoveryWindow: 10_000 });
  const lock = await first.mutex("crash-safe").lock();
  const other = await connect(server.url);
  try {
    const resumed = await other.session(n, { resume: first.ticket() });
    assert.equal(resumed.sessionId, first.sessionId);
    const held = resumed.held();
    assert.deepEqual(held.map((l) => [l.name, l.token]), [["crash-safe", lock.token]]);
    // The previous owner is told its session is gone.
    await until(() => first.signal.aborted, "the first client told");
    assert.equal(lock.signal.aborted, true);
    await held[0]!.release();
    await resumed.close();
  } finally {
    await other.close();
  }
});

test("a grant with a lease TTL lives while renewed, and ends when not (LeaseLost)", async () => {
  const n = await node();
  const session = await client.session(n);
  await session.semaphore("ttl").create({ limit: 1 });
  const lease = await session.semaphore("ttl").acquire({ leaseTtl: 5_000 });
  assert.equal(await lease.renew(), 5_000); // its own TTL again, from now
  assert.equal(await lease.renew(300), 300); // then a short one, left to run out
  await until(() => lease.signal.aborted, "the lease ended unrenewed");
  assert.ok(lease.signal.reason instanceof LeaseLostError);
  await assert.rejects(lease.renew(), LeaseLostError);
  // The session lives on, and the semaphore is free again.
  const next = await session.semaphore("ttl").tryAcquire();
  assert.ok(next !== null && next.token > lease.token);
  await next.release();
});

test("return() or the signal ends a watch at once, even while a next() waits", { timeout: 30_000 }, async () => {
  const n = await node();
  const session = await client.session(n);
  await session.semaphore("quiet").create({ limit: 1 });
  const watch = session.semaphore("quiet").watch();
  assert.equal((await watch.next()).done, false);
  const waiting = watch.next(); // nothing changes: it would wait for ever
  await watch.return();
  assert.deepEqual(await waiting, { done: true, value: undefined });
  const controller = new AbortController();
  const watched = session.semaphore("quiet").watch({ signal: controller.signal });
  await watched.next();
  const pending = watched.next();
  controller.abort();
  assert.deepEqual(await pending, { done: true, value: undefined });
  // No watch is left armed: a change now reaches nobody, and the session goes on.
  await session.semaphore("quiet").update(utf8.encode("after"));
  assert.equal(Buffer.from((await session.semaphore("quiet").describe()).data).toString(), "after");
});

test("node admin: alter settings, list semaphores and sessions, kill a session", async () => {
  const n = await node();
  const altered = await client.alterNode(n, { recoveryWindow: 20_000, maxWaiters: 9, defaultLease: null });
  assert.deepEqual([altered.config.recoveryWindow, altered.config.maxWaiters], [20_000, 9]);
  const session = await client.session(n, { description: "to be killed" });
  await session.semaphore("cfg/a").create({ limit: 2 });
  await session.semaphore("cfg/b").create({ limit: 3 });
  await session.semaphore("other").create({ limit: 1 });
  const lock = await session.mutex("cfg/lock").lock();
  const listed = await client.listSemaphores(n, { prefix: "cfg/" });
  assert.deepEqual(listed.map((s) => [s.name, s.limit, s.owners, s.ephemeral]), [
    ["cfg/a", 2n, 0, false],
    ["cfg/b", 3n, 0, false],
    ["cfg/lock", MAX_COUNT, 1, true],
  ]);
  const sessions = await client.listSessions(n);
  assert.deepEqual(sessions.map((s) => [s.sessionId, s.description, s.recoveryWindow, s.holds, s.expiresIn]), [
    [session.sessionId, "to be killed", 20_000, 1, null],
  ]);
  await client.killSession(n, session.sessionId);
  await until(() => lock.signal.aborted, "the kill told");
  assert.ok(session.signal.reason instanceof SessionExpiredError);
  assert.deepEqual(await client.listSessions(n), []);
});

test("client.sessions yields a new session after each one is lost, and closes the last", async () => {
  const n = await node();
  const seen: number[] = [];
  for await (const session of client.sessions(n, { description: "worker" })) {
    seen.push(session.sessionId);
    if (seen.length === 1) {
      // An operator ends it: the loop body sees its signal, and goes on with a new one.
      await client.killSession(n, session.sessionId);
      await until(() => session.signal.aborted, "the first session lost");
      continue;
    }
    break;
  }
  assert.equal(seen.length, 2);
  assert.notEqual(seen[0], seen[1]);
  assert.deepEqual(await client.listSessions(n), []); // leaving the loop closed the second
});
