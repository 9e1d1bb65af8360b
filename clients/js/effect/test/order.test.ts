/**
 * Arrival order through the backing (`places.ts`): waiters in several processes and
 * in one process are granted in the order they came, each keeping its place in
 * tenure's queue while it waits (never polling here: `acquireRetryPolicy` of an hour);
 * a waiter that stops waiting (interrupted, timed out) gives its place back at once;
 * a plain tryTake keeps none and does not pass the queue; and a place granted but
 * never claimed (a tryTake beside a take in one scope) is released after the grace.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { Effect, Exit, Fiber, Option, Schedule } from "effect";
import { connect, type Client, type Session } from "tenure-client";
import { startServer, type Server } from "tenure-client/testing";
import { DistributedSemaphore, TenureBacking } from "../src/index.js";
import { Child, NODE, PREFIX, key, layerOf, owners, queued, until } from "./helpers.js";

let server: Server;
let client: Client;
let holder: Session;

before(async () => {
  server = await startServer();
  client = await connect(server.url);
  await client.createNode(NODE, { existOk: true });
  holder = await client.session(NODE);
});

after(async () => {
  await client?.close();
  await server?.stop();
});

/** A semaphore of limit 1 held by `holder` as "H" (outside the library): its lease. */
async function heldByH(name: string) {
  await holder.semaphore(PREFIX + name).create({ limit: 1 });
  return holder.semaphore(PREFIX + name).acquire({ data: new TextEncoder().encode("H") });
}

const NEVER_POLL = { limit: 1, acquireRetryPolicy: Schedule.spaced("1 hour") } as const;

test("waiters in three processes are granted in arrival order, each keeping its place while it waits", { timeout: 240_000 }, async () => {
  const name = key("processes");
  const lease = await heldByH(name);
  const children: Child[] = [];
  try {
    for (const id of ["B", "C", "D"]) {
      const child = new Child({ mode: "wait", url: server.url, key: name, identifier: id });
      children.push(child);
      await child.next("asked");
      const expected = children.map((_, i) => ["B", "C", "D"][i]!);
      await until(async () => JSON.stringify(await queued(holder, name)) === JSON.stringify(expected), `${expected} queued`);
    }
    await lease.release();
    const tokens: bigint[] = [lease.token];
    for (const child of children) {
      tokens.push(BigInt((await child.next("granted"))["token"]!));
      // Nobody else was granted meanwhile: the others still wait, in order.
      assert.equal((await owners(holder, name)).length, 1);
      child.tell("release");
      await child.next("released");
      assert.equal(await child.exited(), 0);
    }
    assert.deepEqual([...tokens].sort((a, b) => (a < b ? -1 : 1)), tokens); // each greater than the last
  } finally {
    await Promise.all(children.map((child) => child.kill()));
  }
});

test("waiters in one process are granted in arrival order; the backing keeps their places", async () => {
  const name = key("fibers");
  const lease = await heldByH(name);
  const granted: string[] = [];
  const program = Effect.gen(function* () {
    const sem = yield* DistributedSemaphore.make(name, NEVER_POLL);
    const fibers: Fiber.RuntimeFiber<unknown, unknown>[] = [];
    for (const id of ["B", "C", "D"]) {
      fibers.push(yield* Effect.fork(Effect.sync(() => void granted.push(id)).pipe(sem.withPermits(1, { identifier: id }))));
      const expected = ["B", "C", "D"].slice(0, fibers.length);
      yield* Effect.promise(() => until(async () => JSON.stringify(await queued(holder, name)) === JSON.stringify(expected), `${expected} queued`));
    }
    yield* Effect.promise(() => lease.release());
    for (const fiber of fibers) yield* Fiber.join(fiber);
  });
  await program.pipe(Effect.provide(layerOf(client)), Effect.runPromise);
  assert.deepEqual(granted, ["B", "C", "D"]);
});

test("an interrupted waiter gives its place back at once; a timed-out one too", async () => {
  const name = key("interrupted");
  const lease = await heldByH(name);
  const program = Effect.gen(function* () {
    const sem = yield* DistributedSemaphore.make(name, NEVER_POLL);
    const waiter = yield* Effect.fork(Effect.void.pipe(sem.withPermits(1, { identifier: "B" })));
    yield* Effect.promise(() => until(async () => (await queued(holder, name)).includes("B"), "B queued"));
    yield* Fiber.interrupt(waiter);
    const afterInterrupt = yield* Effect.promise(() => queued(holder, name)); // at once: no wait
    const timed = yield* Effect.fork(Effect.void.pipe(sem.withPermits(1, { identifier: "C" }), Effect.timeout("5 seconds")));
    yield* Effect.promise(() => until(async () => (await queued(holder, name)).includes("C"), "C queued"));
    const exit = yield* Fiber.await(timed);
    const afterTimeout = yield* Effect.promise(() => queued(holder, name));
    return { afterInterrupt, exit, afterTimeout };
  });
  const { afterInterrupt, exit, afterTimeout } = await program.pipe(Effect.provide(layerOf(client)), Effect.runPromise);
  assert.deepEqual(afterInterrupt, []);
  assert.ok(Exit.isFailure(exit) && String(exit.cause).includes("TimeoutException"));
  assert.deepEqual(afterTimeout, []);
  await lease.release();
});

test("a plain tryTake keeps no place, and takes nothing while others wait in the queue", async () => {
  const name = key("try");
  const lease = await heldByH(name);
  const program = Effect.gen(function* () {
    const sem = yield* DistributedSemaphore.make(name, NEVER_POLL);
    const none = yield* Effect.scoped(sem.tryTake(1, { identifier: "T" }));
    const noPlace = yield* Effect.promise(() => queued(holder, name));
    const waiter = yield* Effect.fork(Effect.void.pipe(sem.withPermits(1, { identifier: "B" })));
    yield* Effect.promise(() => until(async () => (await queued(holder, name)).includes("B"), "B queued"));
    // Freed while B waits: B's place is served, not a later try.
    yield* Effect.promise(() => lease.release());
    const late = yield* Effect.succeed("ran").pipe(sem.withPermitsIfAvailable(1, { identifier: "L" }));
    yield* Fiber.join(waiter);
    return { none, noPlace, late };
  });
  const { none, noPlace, late } = await program.pipe(Effect.provide(layerOf(client)), Effect.runPromise);
  assert.ok(Option.isNone(none));
  assert.deepEqual(noPlace, []);
  assert.ok(Option.isNone(late)); // the release served B's place at once
});

test("a place granted and never claimed (a tryTake beside takes in one scope) is released after the grace", async () => {
  const name = key("grace");
  await holder.semaphore(PREFIX + name).create({ limit: 2 });
  const both = await holder.semaphore(PREFIX + name).acquire({ count: 2, data: new TextEncoder().encode("H") });
  const program = Effect.gen(function* () {
    const sem = yield* DistributedSemaphore.make(name, { ...NEVER_POLL, limit: 2 });
    return yield* Effect.scoped(
      Effect.gen(function* () {
        const a = yield* Effect.fork(sem.take(1, { identifier: "A" }));
        yield* Effect.promise(() => until(async () => (await queued(holder, name)).includes("A"), "A queued"));
        // A's stream runs in this scope: the failed try keeps a place, which it will never claim.
        const tried = yield* sem.tryTake(1, { identifier: "T" });
        yield* Effect.promise(() => until(async () => (await queued(holder, name)).includes("T"), "T queued"));
        const b = yield* Effect.fork(sem.take(1, { identifier: "B" }));
        yield* Effect.promise(() => until(async () => (await queued(holder, name)).join() === "A,T,B", "A, T, B queued"));
        yield* Effect.promise(() => both.release()); // A and T are granted; B waits behind T's grant
        yield* Fiber.join(a);
        yield* Fiber.join(b); // T's grant released after the grace: B's turn
        return { tried, holders: (yield* Effect.promise(() => owners(holder, name))).map((o) => o.id).sort() };
      }),
    );
  });
  const layer = layerOf(client, { placeClaimGrace: 200 });
  const { tried, holders } = await program.pipe(Effect.provide(layer), Effect.runPromise);
  assert.ok(Option.isNone(tried));
  assert.deepEqual(holders, ["A", "B"]);
});

test("placeClaimGrace is checked, and its default is named", async () => {
  assert.equal(TenureBacking.DEFAULT_PLACE_CLAIM_GRACE, 5_000);
  for (const bad of [0, -1, Number.NaN, Number.POSITIVE_INFINITY]) {
    const exit = await Effect.runPromiseExit(Effect.void.pipe(Effect.provide(layerOf(client, { placeClaimGrace: bad }))));
    assert.ok(Exit.isFailure(exit) && String(exit.cause).includes("placeClaimGrace must be a finite number"), String(bad));
  }
});
