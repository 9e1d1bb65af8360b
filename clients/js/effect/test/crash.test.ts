/**
 * The seed README's "Resuming After Crash" and cross-process hand-off over tenure,
 * with processes really killed (child node processes, SIGKILL): a new process's
 * `acquiredExternally` with the dead one's identifier resumes its permits (adopted,
 * under a greater fencing token) while tenure keeps them; a wrong identifier gets
 * None; a crashed holder's permits go to the next waiter when its ttl runs out,
 * before its session ends; and a live holder whose identifier another process takes
 * over learns it lost them (LockLostError through its keepalive fiber).
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { Effect, Option } from "effect";
import { connect, type Client, type Session } from "tenure-client";
import { startServer, type Server } from "tenure-client/testing";
import { DistributedSemaphore, TenureBacking } from "../src/index.js";
import { Child, NODE, key, layerOf, owners } from "./helpers.js";

let server: Server;
let client: Client;
let watcher: Session;

before(async () => {
  server = await startServer();
  client = await connect(server.url);
  await client.createNode(NODE, { existOk: true });
  watcher = await client.session(NODE);
});

after(async () => {
  await client?.close();
  await server?.stop();
});

/** A child holding `name` as `identifier`, killed with SIGKILL: its token, and its session (which lives on). */
async function crashedHolder(name: string, identifier: string, ttl: number): Promise<{ token: bigint; session: number }> {
  const child = new Child({ mode: "hold", url: server.url, key: name, identifier, ttl, recoveryWindow: 120_000 });
  try {
    const token = BigInt((await child.next("holding"))["token"]!);
    await child.kill();
    const [owner] = await owners(watcher, name);
    assert.equal(owner?.id, identifier);
    assert.equal(owner?.token, token);
    return { token, session: owner.session };
  } finally {
    await child.kill();
  }
}

test("resuming after a crash: the new process's acquiredExternally takes the dead one's permits, token greater", { timeout: 240_000 }, async () => {
  const name = key("job");
  const lockIdentifier = "job-123-lock";
  const crashed = await crashedHolder(name, lockIdentifier, 60_000);
  const program = Effect.gen(function* () {
    const sem = yield* DistributedSemaphore.make(name, { limit: 1, ttl: "60 seconds" });
    const wrong = yield* Effect.succeed("never").pipe(
      sem.withPermitsIfAvailable(1, { identifier: "not-the-lock", acquiredExternally: true }),
    );
    const resumed = yield* Effect.gen(function* () {
      const token = Option.getOrThrow(yield* TenureBacking.fencingToken(sem.key, lockIdentifier));
      const held = yield* Effect.promise(() => owners(watcher, name));
      return { token, held, count: yield* sem.currentCount };
    }).pipe(sem.withPermitsIfAvailable(1, { identifier: lockIdentifier, acquiredExternally: true }));
    return { wrong, resumed, after: yield* sem.currentCount };
  });
  const { wrong, resumed, after } = await program.pipe(Effect.provide(layerOf(client)), Effect.runPromise);
  assert.ok(Option.isNone(wrong));
  assert.ok(Option.isSome(resumed));
  const { token, held, count } = resumed.value;
  assert.ok(token > crashed.token, `${token} > ${crashed.token}`);
  assert.equal(count, 1);
  assert.equal(held.length, 1);
  assert.equal(held[0]!.id, lockIdentifier);
  assert.notEqual(held[0]!.session, crashed.session); // this process's session now
  assert.equal(held[0]!.token, token);
  assert.equal(after, 0); // released at the end of the block
});

test("withPermits with acquiredExternally resumes too, and a resumed hold that crashes again is resumed again", { timeout: 240_000 }, async () => {
  const name = key("twice");
  const identifier = "twice-lock";
  const first = await crashedHolder(name, identifier, 60_000);
  // A second process resumes it, then dies in its turn.
  const second = new Child({ mode: "hold", url: server.url, key: name, identifier, ttl: 60_000, recoveryWindow: 120_000, acquiredExternally: true });
  let secondToken: bigint;
  try {
    secondToken = BigInt((await second.next("holding"))["token"]!);
  } finally {
    await second.kill();
  }
  assert.ok(secondToken > first.token);
  const program = Effect.gen(function* () {
    const sem = yield* DistributedSemaphore.make(name, { limit: 1, ttl: "60 seconds" });
    return yield* Effect.map(TenureBacking.fencingToken(sem.key, identifier), Option.getOrThrow).pipe(
      sem.withPermits(1, { identifier, acquiredExternally: true }),
    );
  });
  const third = await program.pipe(Effect.provide(layerOf(client)), Effect.runPromise);
  assert.ok(third > secondToken, `${third} > ${secondToken}`);
});

test("a wrong identifier gets None; an expired lock gets None, and is re-acquired normally", { timeout: 240_000 }, async () => {
  const name = key("expired");
  const identifier = "short-lived";
  const crashed = await crashedHolder(name, identifier, 1_000);
  const program = Effect.gen(function* () {
    const sem = yield* DistributedSemaphore.make(name, { limit: 1, ttl: "1 second" });
    // Wait (by the library's own waiting) until the dead holder's ttl ran out.
    const restarted = yield* Effect.gen(function* () {
      const sessions = yield* Effect.promise(() => client.listSessions(NODE));
      return sessions.some((s) => s.sessionId === crashed.session);
    }).pipe(sem.withPermits(1));
    const resumed = yield* Effect.succeed("resumed").pipe(sem.withPermitsIfAvailable(1, { identifier, acquiredExternally: true }));
    return { restarted, resumed };
  });
  const { restarted, resumed } = await program.pipe(Effect.provide(layerOf(client)), Effect.runPromise);
  // The permit came free by its ttl, while the crashed process's session still lived.
  assert.equal(restarted, true);
  assert.ok(Option.isNone(resumed)); // its permits expired: nothing to resume
});

test("cross-process hand-off by identifier: B takes A's permits over, and A's keepalive fiber fails with LockLostError", { timeout: 240_000 }, async () => {
  const name = key("handoff");
  const identifier = "worker-1-job-123";
  // (A short ttl: A's keepalive refreshes every second, and learns of its loss at the next.)
  const a = new Child({ mode: "take", url: server.url, key: name, identifier, ttl: 3_000 });
  try {
    const aToken = BigInt((await a.next("holding"))["token"]!);
    const program = Effect.gen(function* () {
      const sem = yield* DistributedSemaphore.make(name, { limit: 1 });
      return yield* Effect.gen(function* () {
        const token = Option.getOrThrow(yield* TenureBacking.fencingToken(sem.key, identifier));
        const lost = yield* Effect.promise(() => a.next("lost"));
        return { token, lost };
      }).pipe(sem.withPermits(1, { identifier, acquiredExternally: true }));
    });
    const { token, lost } = await program.pipe(Effect.provide(layerOf(client)), Effect.runPromise);
    assert.ok(token > aToken);
    assert.equal(lost["tag"], "LockLostError");
    assert.equal(await a.exited(), 0);
  } finally {
    await a.kill();
  }
});
