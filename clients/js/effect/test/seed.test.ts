/**
 * effect-distributed-lock 0.0.11 (the package itself, from the registry) over the
 * tenure backing, on the scenarios of its README (the seed) against a real
 * `tenure serve`: the quick start; withPermits (a mutex across two clients);
 * withPermitsIfAvailable; take and tryTake with their keepalive fiber; custom
 * identifiers; currentCount; the errors' tags (LockLostError through the fiber and
 * through withPermits, SemaphoreBackingError from a closed client and from a server
 * gone); push-based acquisition; the limit; and the fencing tokens. Crashes:
 * crash.test.ts; arrival order: order.test.ts.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { Effect, Exit, Fiber, Layer, Option, Schedule } from "effect";
import { connect, LimitExceededError, SessionExpiredError, type Client, type Session } from "tenure-client";
import { startServer, type Server } from "tenure-client/testing";
import { DistributedSemaphore, DistributedSemaphoreBacking, TenureBacking } from "../src/index.js";
import { NODE, PREFIX, key, layerOf, owners, queued, until } from "./helpers.js";

let server: Server;
let one: Client;
let two: Client;
let watcher: Session;

before(async () => {
  server = await startServer();
  one = await connect(server.url);
  two = await connect(server.url);
  await one.createNode(NODE, { existOk: true });
  watcher = await one.session(NODE);
});

after(async () => {
  await one?.close();
  await two?.close();
  await server?.stop();
});

test("the quick start: 2 of 5 permits around an effect, released after; the semaphore lives in tenure", async () => {
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
    return { during, afterwards: yield* sem.currentCount, limit: sem.limit };
  });
  assert.deepEqual(await program.pipe(Effect.provide(layerOf(one)), Effect.runPromise), { during: 2, afterwards: 0, limit: 5 });
  assert.equal((await watcher.semaphore(PREFIX + name).describe()).limit, 5n);
});

test("withPermits: a mutex (limit 1) excludes across two clients; every task runs", async () => {
  const name = key("job");
  let inside = 0;
  let most = 0;
  let ran = 0;
  const critical = Effect.promise(async () => {
    inside += 1;
    most = Math.max(most, inside);
    await new Promise((resolve) => setImmediate(resolve)); // (others run meanwhile)
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

test("withPermitsIfAvailable: None while another holds the permits, Some when free", async () => {
  const name = key("skip");
  const program = Effect.gen(function* () {
    const sem = yield* DistributedSemaphore.make(name, { limit: 1 });
    const whileHeld = yield* Effect.scoped(Effect.andThen(sem.take(1), Effect.succeed(42).pipe(sem.withPermitsIfAvailable(1))));
    const whenFree = yield* Effect.succeed(42).pipe(sem.withPermitsIfAvailable(1));
    return { whileHeld, whenFree };
  });
  const { whileHeld, whenFree } = await program.pipe(Effect.provide(layerOf(one)), Effect.runPromise);
  assert.ok(Option.isNone(whileHeld));
  assert.deepEqual(whenFree, Option.some(42));
});

test("take and tryTake hold their permits until the scope closes, their keepalive fiber refreshing meanwhile", async () => {
  const name = key("scoped");
  const session = await one.session(NODE);
  const backing = TenureBacking.make(session, { keyPrefix: PREFIX });
  let refreshes = 0;
  const counted = Layer.succeed(DistributedSemaphoreBacking, {
    ...backing,
    refresh: (...args) => Effect.tap(backing.refresh(...args), () => Effect.sync(() => void (refreshes += 1))),
  });
  const program = Effect.gen(function* () {
    const sem = yield* DistributedSemaphore.make(name, { limit: 3, ttl: "1 second", refreshInterval: "100 millis" });
    const counts: number[] = [];
    const fibers = yield* Effect.scoped(
      Effect.gen(function* () {
        const keepAlive = yield* sem.take(2);
        counts.push(yield* sem.currentCount);
        const more = yield* sem.tryTake(1);
        counts.push(yield* sem.currentCount);
        const none = yield* sem.tryTake(1); // all 3 are held
        assert.ok(Option.isSome(more) && Option.isNone(none));
        // 30 refreshes, each at least 100 ms after the one before: past the 1 s ttl
        // several times over, the permits are still held.
        yield* Effect.promise(() => until(() => refreshes >= 30, "30 refreshes"));
        counts.push(yield* sem.currentCount);
        assert.ok(Option.isNone(yield* Fiber.poll(keepAlive)));
        return [keepAlive, more.value] as const;
      }),
    );
    counts.push(yield* sem.currentCount);
    const ended = yield* Effect.all(fibers.map((fiber) => Fiber.await(fiber)));
    return { counts, ended };
  });
  const { counts, ended } = await program.pipe(Effect.provide(counted), Effect.runPromise);
  await session.close();
  assert.deepEqual(counts, [2, 3, 3, 0]);
  assert.ok(ended.every((exit) => Exit.isInterrupted(exit))); // interrupted when the scope closed
});

test("a custom identifier is the holder's owner data (for debugging), and its fencing token is asked by it", async () => {
  const name = key("debug");
  const program = Effect.gen(function* () {
    const sem = yield* DistributedSemaphore.make(name, { limit: 1 });
    const tokens: bigint[] = [];
    for (const identifier of ["worker-1-job-123", "worker-1-job-124"]) {
      yield* Effect.gen(function* () {
        const held = yield* Effect.promise(() => owners(watcher, name));
        assert.deepEqual(held.map((o) => o.id), [identifier]);
        const token = Option.getOrThrow(yield* TenureBacking.fencingToken(sem.key, identifier));
        assert.equal(token, held[0]!.token);
        tokens.push(token);
      }).pipe(sem.withPermits(1, { identifier }));
    }
    const afterwards = yield* TenureBacking.fencingToken(sem.key, "worker-1-job-124");
    return { tokens, afterwards };
  });
  const { tokens, afterwards } = await program.pipe(Effect.provide(layerOf(one)), Effect.runPromise);
  assert.ok(tokens[1]! > tokens[0]!);
  assert.ok(Option.isNone(afterwards));
});

test("acquiredExternally in the same process finds the hold by its identifier; an unknown one gets None", async () => {
  const name = key("external");
  const program = Effect.gen(function* () {
    const sem = yield* DistributedSemaphore.make(name, { limit: 1 });
    return yield* Effect.scoped(
      Effect.gen(function* () {
        yield* sem.take(1, { identifier: "worker-1-job-123" });
        const resumed = yield* Effect.succeed("resumed").pipe(
          sem.withPermitsIfAvailable(1, { identifier: "worker-1-job-123", acquiredExternally: true }),
        );
        const unknown = yield* Effect.succeed("never").pipe(sem.withPermitsIfAvailable(1, { identifier: "someone-else", acquiredExternally: true }));
        return { resumed, unknown };
      }),
    );
  });
  const { resumed, unknown } = await program.pipe(Effect.provide(layerOf(one)), Effect.runPromise);
  assert.deepEqual(resumed, Option.some("resumed"));
  assert.ok(Option.isNone(unknown)); // as for an expired lock: re-acquire normally
});

test("currentCount: the permits held now; limit - held are available", async () => {
  const name = key("count");
  const program = Effect.gen(function* () {
    const sem = yield* DistributedSemaphore.make(name, { limit: 4 });
    const before = yield* sem.currentCount;
    const during = yield* Effect.map(sem.currentCount, (held) => sem.limit - held).pipe(sem.withPermits(3));
    return { before, during };
  });
  assert.deepEqual(await program.pipe(Effect.provide(layerOf(one)), Effect.runPromise), { before: 0, during: 1 });
});

test("LockLostError: permits lost under the holder fail its keepalive fiber, and withPermits (catchTag)", async () => {
  const name = key("lost");
  const remover = await two.session(NODE);
  const program = Effect.gen(function* () {
    const sem = yield* DistributedSemaphore.make(name, { limit: 1, ttl: "2 seconds", refreshInterval: "100 millis" });
    const joined = yield* Effect.scoped(
      Effect.gen(function* () {
        const keepAlive = yield* sem.take(1);
        yield* Effect.promise(() => remover.semaphore(PREFIX + name).delete({ force: true }));
        return yield* Effect.flip(Fiber.join(keepAlive));
      }),
    );
    const caught = yield* Effect.promise(async () => {
      await remover.semaphore(PREFIX + name).delete({ force: true }); // another client takes them away
      return await new Promise<string>(() => undefined); // the work would go on for ever
    }).pipe(
      sem.withPermits(1),
      Effect.catchTag("LockLostError", (e) => Effect.succeed(`lost ${e.key}`)),
    );
    return { joined, caught };
  });
  const { joined, caught } = await program.pipe(Effect.provide(layerOf(one)), Effect.runPromise);
  assert.equal(joined._tag, "LockLostError");
  assert.equal(caught, `lost ${name}`);
  await remover.close();
});

test("SemaphoreBackingError (catchTag) once the retries are spent: a closed client, and a server gone", { timeout: 240_000 }, async () => {
  const closed = await connect(server.url);
  const first = Effect.gen(function* () {
    const sem = yield* DistributedSemaphore.make(key("closed"), { limit: 1, backingFailureRetryPolicy: Schedule.recurs(2) });
    yield* Effect.promise(() => closed.close());
    return yield* Effect.succeed("ran").pipe(
      sem.withPermits(1),
      Effect.catchTag("SemaphoreBackingError", (e) => Effect.succeed(`backing: ${e.operation}`)),
    );
  });
  assert.equal(await first.pipe(Effect.provide(layerOf(closed)), Effect.runPromise), "backing: tryAcquire");

  const doomed = await startServer();
  const client = await connect(doomed.url);
  try {
    const gone = Effect.gen(function* () {
      const sem = yield* DistributedSemaphore.make(key("gone"), { limit: 1, backingFailureRetryPolicy: Schedule.recurs(1) });
      yield* Effect.promise(() => doomed.kill()); // SIGKILL: the session ends with its window
      return yield* Effect.succeed("ran").pipe(
        sem.withPermits(1),
        Effect.catchTag("SemaphoreBackingError", (e) => Effect.succeed(e)),
      );
    });
    const error = await gone.pipe(Effect.provide(layerOf(client, { recoveryWindow: 1_000 })), Effect.runPromise);
    assert.ok(typeof error !== "string" && error._tag === "SemaphoreBackingError");
    assert.ok(error.cause instanceof SessionExpiredError, String(error.cause));
  } finally {
    await client.close();
    await doomed.stop();
  }
});

test("push-based acquisition: a waiter that never polls is woken when the holder releases", async () => {
  const name = key("push");
  const program = (client: Client, hold: Effect.Effect<void>) =>
    Effect.gen(function* () {
      // One try and no polling after it: only the server can wake the waiter.
      const sem = yield* DistributedSemaphore.make(name, { limit: 1, acquireRetryPolicy: Schedule.stop });
      yield* hold.pipe(sem.withPermits(1, { identifier: "second" }));
    }).pipe(Effect.provide(layerOf(client)));
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  let holding!: () => void;
  const holds = new Promise<void>((resolve) => (holding = resolve));
  const first = Effect.runFork(program(one, Effect.promise(async () => (holding(), await held))));
  await holds;
  const second = Effect.runFork(program(two, Effect.void));
  await until(async () => (await queued(watcher, name)).includes("second"), "the second waits");
  release();
  const exits = await Promise.all([Effect.runPromise(Fiber.await(first)), Effect.runPromise(Fiber.await(second))]);
  assert.ok(exits.every(Exit.isSuccess));
});

test("the limit: never more permits held than it; the first make's limit stands; more than it is refused", async () => {
  const name = key("limit");
  let held = 0;
  let most = 0;
  const program = Effect.gen(function* () {
    const sem = yield* DistributedSemaphore.make(name, { limit: 3, acquireRetryPolicy: Schedule.spaced("20 millis") });
    const use = (permits: number) =>
      Effect.promise(async () => {
        held += permits;
        most = Math.max(most, held);
        await new Promise((resolve) => setImmediate(resolve));
        held -= permits;
      }).pipe(sem.withPermits(permits));
    yield* Effect.all([use(2), use(2), use(1), use(3)], { concurrency: "unbounded" });
    const wider = yield* DistributedSemaphore.make(name, { limit: 10, backingFailureRetryPolicy: Schedule.recurs(0) });
    return yield* Effect.flip(Effect.void.pipe(wider.withPermits(4)));
  });
  const refused = await program.pipe(Effect.provide(layerOf(one)), Effect.runPromise);
  assert.equal(most <= 3 && most >= 2, true, `at most 3 held at once: ${most}`);
  assert.equal(refused._tag, "SemaphoreBackingError");
  assert.ok(refused._tag === "SemaphoreBackingError" && refused.cause instanceof LimitExceededError, String(refused));
  assert.equal((await watcher.semaphore(PREFIX + name).describe()).limit, 3n);
});
