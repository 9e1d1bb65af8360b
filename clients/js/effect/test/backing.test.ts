/**
 * effect-distributed-lock 0.0.11 (the package itself, from the registry) over the
 * tenure backing, on the scenarios of its README against a real `tenure serve`:
 * the quick start, mutual exclusion across two processes' worth of layers,
 * withPermitsIfAvailable, take/tryTake in a scope, custom identifiers,
 * acquiredExternally, currentCount, LockLostError and SemaphoreBackingError.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { Effect, Exit, Fiber, Option, Schedule } from "effect";
import { DistributedSemaphore } from "effect-distributed-lock";
import { connect, type Client } from "tenure-client";
import { startServer, type Server } from "tenure-client/testing";
import { TenureBacking } from "../src/index.js";

let server: Server;
let one: Client;
let two: Client;
let counter = 0;

before(async () => {
  server = await startServer();
  one = await connect(server.url);
  two = await connect(server.url);
});

after(async () => {
  await one?.close();
  await two?.close();
  await server?.stop();
});

/** A key of this test alone. */
function key(name: string): string {
  counter += 1;
  return `${name}-${counter}`;
}

const NODE = "effect";
const layerOf = (client: Client) => TenureBacking.layer(client, { node: NODE, keyPrefix: "my-app:" });

test("the quick start: 2 of 5 permits around an effect, released after", async () => {
  const name = key("my-resource");
  const program = Effect.gen(function* () {
    const sem = yield* DistributedSemaphore.make(name, {
      limit: 5,
      ttl: "10 seconds",
      refreshInterval: "3 seconds",
      acquireRetryPolicy: Schedule.spaced("500 millis"),
      backingFailureRetryPolicy: Schedule.exponential("100 millis"),
    });
    const during = yield* sem.currentCount.pipe(sem.withPermits(2));
    const afterwards = yield* sem.currentCount;
    return { during, afterwards, limit: sem.limit };
  });
  const result = await program.pipe(Effect.provide(layerOf(one)), Effect.runPromise);
  assert.deepEqual(result, { during: 2, afterwards: 0, limit: 5 });
  // The permits lived in tenure: a semaphore of the node, under the key prefix.
  const session = await one.session(NODE);
  assert.equal((await session.semaphore(`my-app:${name}`).describe()).limit, 5n);
  await session.close();
});

test("a mutex (limit 1) excludes across two clients; every task runs", async () => {
  const name = key("job");
  let inside = 0;
  let most = 0;
  let ran = 0;
  const critical = Effect.promise(async () => {
    inside += 1;
    most = Math.max(most, inside);
    await new Promise((resolve) => setTimeout(resolve, 5));
    inside -= 1;
    ran += 1;
  });
  const worker = (client: Client) =>
    Effect.gen(function* () {
      const mutex = yield* DistributedSemaphore.make(name, { limit: 1, acquireRetryPolicy: Schedule.spaced("20 millis") });
      yield* Effect.all(Array.from({ length: 4 }, () => critical.pipe(mutex.withPermits(1))), { concurrency: "unbounded" });
    }).pipe(Effect.provide(layerOf(client)));
  await Effect.runPromise(Effect.all([worker(one), worker(two)], { concurrency: "unbounded" }));
  assert.equal(ran, 8);
  assert.equal(most, 1);
});

test("withPermitsIfAvailable: None while another holds it, Some when free", async () => {
  const name = key("skip");
  const program = Effect.gen(function* () {
    const sem = yield* DistributedSemaphore.make(name, { limit: 1 });
    const whileHeld = yield* Effect.scoped(
      Effect.gen(function* () {
        yield* sem.take(1);
        return yield* Effect.succeed(42).pipe(sem.withPermitsIfAvailable(1));
      }),
    );
    const whenFree = yield* Effect.succeed(42).pipe(sem.withPermitsIfAvailable(1));
    return { whileHeld, whenFree };
  });
  const { whileHeld, whenFree } = await program.pipe(Effect.provide(layerOf(one)), Effect.runPromise);
  assert.ok(Option.isNone(whileHeld));
  assert.deepEqual(whenFree, Option.some(42));
});

test("take and tryTake hold their permits until the scope closes; currentCount follows", async () => {
  const name = key("scoped");
  const program = Effect.gen(function* () {
    const sem = yield* DistributedSemaphore.make(name, { limit: 3 });
    const counts: number[] = [];
    yield* Effect.scoped(
      Effect.gen(function* () {
        yield* sem.take(2);
        counts.push(yield* sem.currentCount);
        const more = yield* sem.tryTake(1);
        counts.push(yield* sem.currentCount);
        const none = yield* sem.tryTake(1); // all 3 are held
        assert.ok(Option.isSome(more) && Option.isNone(none));
      }),
    );
    counts.push(yield* sem.currentCount);
    return counts;
  });
  assert.deepEqual(await program.pipe(Effect.provide(layerOf(one)), Effect.runPromise), [2, 3, 0]);
});

test("a custom identifier is the holder's owner data; acquiredExternally finds a hold by it", async () => {
  const name = key("handoff");
  const watcher = await one.session(NODE);
  const program = Effect.gen(function* () {
    const sem = yield* DistributedSemaphore.make(name, { limit: 1 });
    return yield* Effect.scoped(
      Effect.gen(function* () {
        yield* sem.take(1, { identifier: "worker-1-job-123" });
        const owners = yield* Effect.promise(() => watcher.semaphore(`my-app:${name}`).describe({ owners: true }));
        const data = owners.owners.map((o) => Buffer.from(o.data).toString());
        const resumed = yield* Effect.succeed("resumed").pipe(
          sem.withPermitsIfAvailable(1, { identifier: "worker-1-job-123", acquiredExternally: true }),
        );
        const unknown = yield* Effect.succeed("never").pipe(
          sem.withPermitsIfAvailable(1, { identifier: "someone-else", acquiredExternally: true }),
        );
        return { data, resumed, unknown };
      }),
    );
  });
  const { data, resumed, unknown } = await program.pipe(Effect.provide(layerOf(one)), Effect.runPromise);
  assert.deepEqual(data, ["worker-1-job-123"]);
  assert.deepEqual(resumed, Option.some("resumed"));
  assert.ok(Option.isNone(unknown)); // as for an expired lock: re-acquire normally
  await watcher.close();
});

test("permits lost under the holder are a LockLostError (catchTag)", async () => {
  const name = key("lost");
  const remover = await two.session(NODE);
  const program = Effect.gen(function* () {
    const sem = yield* DistributedSemaphore.make(name, { limit: 1, ttl: "2 seconds", refreshInterval: "100 millis" });
    return yield* Effect.promise(async () => {
      // Another client deletes the semaphore by force: its holder loses the permit.
      await remover.semaphore(`my-app:${name}`).delete({ force: true });
      return await new Promise<string>(() => undefined); // the work would go on for ever
    }).pipe(
      sem.withPermits(1),
      Effect.catchTag("LockLostError", (e) => Effect.succeed(`lost ${e.key}`)),
    );
  });
  assert.equal(await program.pipe(Effect.provide(layerOf(one)), Effect.runPromise), `lost ${name}`);
  await remover.close();
});

test("a failing backing is a SemaphoreBackingError (catchTag) once its retries are spent", async () => {
  const closed = await connect(server.url);
  const layer = layerOf(closed);
  const program = Effect.gen(function* () {
    const sem = yield* DistributedSemaphore.make(key("gone"), { limit: 1, backingFailureRetryPolicy: Schedule.recurs(2) });
    yield* Effect.promise(() => closed.close());
    return yield* Effect.succeed("ran").pipe(
      sem.withPermits(1),
      Effect.catchTag("SemaphoreBackingError", (e) => Effect.succeed(`backing: ${e.operation}`)),
    );
  });
  assert.equal(await program.pipe(Effect.provide(layer), Effect.runPromise), "backing: tryAcquire");
});

test("a waiter is woken by the server's push when the holder releases", { timeout: 60_000 }, async () => {
  const name = key("push");
  const program = (client: Client, hold: Effect.Effect<void>) =>
    Effect.gen(function* () {
      // One try and no polling after it: only the pushed release can wake the waiter.
      const sem = yield* DistributedSemaphore.make(name, { limit: 1, acquireRetryPolicy: Schedule.stop });
      yield* hold.pipe(sem.withPermits(1));
    }).pipe(Effect.provide(layerOf(client)));
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  let holding!: () => void;
  const holds = new Promise<void>((resolve) => (holding = resolve));
  const first = Effect.runFork(program(one, Effect.promise(async () => (holding(), await held))));
  await holds;
  const second = Effect.runFork(program(two, Effect.void));
  await new Promise((resolve) => setTimeout(resolve, 200)); // (most likely) the second tried once and waits
  release();
  const exits = await Promise.all([Effect.runPromise(Fiber.await(first)), Effect.runPromise(Fiber.await(second))]);
  assert.ok(exits.every(Exit.isSuccess));
});
