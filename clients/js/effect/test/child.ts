/**
 * A process of its own for the backing's tests (`helpers.ts`, `ChildTask`): it holds,
 * takes or waits through effect-distributed-lock over a layer of its own client, and
 * says what happens as JSON lines (`holding`, `granted`, `lost`, `released`).
 */
import { createInterface } from "node:readline";
import { Effect, Fiber, Option, Schedule } from "effect";
import { connect } from "tenure-client";
import { DistributedSemaphore, TenureBacking } from "../src/index.js";
import { layerOf, type ChildTask } from "./helpers.js";

const task = JSON.parse(process.argv[2]!) as ChildTask;
const say = (event: string, fields: Record<string, string> = {}): void => console.log(JSON.stringify({ event, ...fields }));
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const client = await connect(task.url);
const layer = layerOf(client, task.recoveryWindow === undefined ? {} : { recoveryWindow: task.recoveryWindow });

const program = Effect.gen(function* () {
  const sem = yield* DistributedSemaphore.make(task.key, {
    limit: 1,
    ...(task.ttl === undefined ? {} : { ttl: `${task.ttl} millis` as const }),
    // Never polls: only the server's push, and the queue's grant, wake a waiter.
    acquireRetryPolicy: Schedule.spaced("1 hour"),
  });
  const token = Effect.map(TenureBacking.fencingToken(sem.key, task.identifier), (t) => String(Option.getOrThrow(t)));
  const options = { identifier: task.identifier, acquiredExternally: task.acquiredExternally ?? false };
  if (task.mode === "hold") {
    yield* Effect.gen(function* () {
      say("holding", { token: yield* token });
      return yield* Effect.never;
    }).pipe(sem.withPermits(1, options));
  } else if (task.mode === "take") {
    const lost = yield* Effect.scoped(
      Effect.gen(function* () {
        const keepAlive = yield* sem.take(1, options);
        say("holding", { token: yield* token });
        return yield* Effect.flip(Fiber.join(keepAlive));
      }),
    );
    say("lost", { tag: lost._tag });
  } else {
    say("asked");
    yield* Effect.gen(function* () {
      say("granted", { token: yield* token });
      yield* Effect.promise(() => lines.next()); // "release"
    }).pipe(sem.withPermits(1, options));
    say("released");
  }
});

await program.pipe(Effect.provide(layer), Effect.runPromise);
await client.close();
process.exit(0);
