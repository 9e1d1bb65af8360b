/**
 * A backing of effect-distributed-lock's `DistributedSemaphore` over tenure:
 * `TenureBacking.layer(client, { node, keyPrefix })`, in place of its Redis one.
 *
 * Each key is a persistent tenure semaphore `keyPrefix + key` of the node, created
 * with the first `limit` asked (a later `make` of the key with another limit gets
 * the one created: a count above it is a `SemaphoreBackingError`). Each holder is
 * one hold of the layer's session with the holder's id as its owner data and the
 * semaphore's `ttl` as its lease: `tryAcquire` is an Acquire that does not wait,
 * `refresh` a Renew, `release` a Release, `getCount` a DescribeSemaphore, and
 * `onPermitsReleased` a watch of the owners, pushed by the server. Every grant
 * carries a fencing token (greater than every earlier one), and the session's
 * recovery window also ends the holds of a process that died.
 *
 * What tenure does not do as Redis does: `acquiredExternally` finds only holds of
 * this layer's session (a hold is its session's; another process takes a whole
 * session over, by its ticket, not one permit by its id): elsewhere `refresh` says
 * the permits are lost.
 */
import { Duration, Effect, Layer, Stream } from "effect";
import { DistributedSemaphoreBacking, SemaphoreBackingError } from "effect-distributed-lock";
import { AlreadyExistsError, LeaseLostError, NotFoundError, type Client, type Lease, type Session } from "tenure-client";

/** What the layer takes. */
export interface TenureBackingOptions {
  /** The node the semaphores live in (created if missing). */
  readonly node: string;
  /** The prefix of every semaphore's name (default `"semaphore:"`, as the Redis backing's). */
  readonly keyPrefix?: string;
  /** The layer session's recovery window, ms (default: the node's). */
  readonly recoveryWindow?: number;
}

const utf8 = new TextEncoder();

/** The backing over an open tenure `session` (the layer's, or one of your own). */
export function make(session: Session, keyPrefix = "semaphore:"): DistributedSemaphoreBacking {
  const holds = new Map<string, Lease>();
  const holdOf = (key: string, holderId: string): string => `${key}\u0000${holderId}`;
  const attempt = <A>(operation: string, run: () => Promise<A>): Effect.Effect<A, SemaphoreBackingError> =>
    Effect.tryPromise({ try: run, catch: (cause) => new SemaphoreBackingError({ operation, cause }) });

  const acquire = async (key: string, holderId: string, ttl: Duration.Duration, limit: number, permits: number): Promise<boolean> => {
    const held = holds.get(holdOf(key, holderId));
    if (held !== undefined && held.held) return Number(held.count) === permits;
    const semaphore = session.semaphore(keyPrefix + key);
    const lease = ttlMs(ttl);
    const options = { count: permits, data: utf8.encode(holderId), ...(lease > 0 ? { leaseTtl: lease } : {}) };
    let granted: Lease | null;
    try {
      granted = await semaphore.tryAcquire(options);
    } catch (error) {
      if (!(error instanceof NotFoundError)) throw error;
      try {
        await semaphore.create({ limit });
      } catch (exists) {
        if (!(exists instanceof AlreadyExistsError)) throw exists;
      }
      granted = await semaphore.tryAcquire(options);
    }
    if (granted === null) return false;
    holds.set(holdOf(key, holderId), granted);
    return true;
  };

  const refresh = async (key: string, holderId: string, ttl: Duration.Duration): Promise<boolean> => {
    const lease = holds.get(holdOf(key, holderId));
    if (lease === undefined) return false;
    if (!lease.held) {
      holds.delete(holdOf(key, holderId));
      return false;
    }
    try {
      const ms = ttlMs(ttl);
      if (ms > 0) await lease.renew(ms);
      return true;
    } catch (error) {
      if (!(error instanceof LeaseLostError)) throw error;
      holds.delete(holdOf(key, holderId));
      return false;
    }
  };

  const release = async (key: string, holderId: string): Promise<number> => {
    const lease = holds.get(holdOf(key, holderId));
    holds.delete(holdOf(key, holderId));
    if (lease === undefined || !lease.held) return 0;
    await lease.release();
    return Number(lease.count);
  };

  const count = async (key: string): Promise<number> => {
    try {
      return Number((await session.semaphore(keyPrefix + key).describe()).count);
    } catch (error) {
      if (error instanceof NotFoundError) return 0;
      throw error;
    }
  };

  return {
    tryAcquire: (key, holderId, ttl, limit, permits) =>
      attempt("tryAcquire", () => acquire(key, holderId, ttl, limit, permits)),
    release: (key, holderId) => attempt("release", () => release(key, holderId)),
    refresh: (key, holderId, ttl) => attempt("refresh", () => refresh(key, holderId, ttl)),
    getCount: (key) => attempt("getCount", () => count(key)),
    // Every change of the owners (a release among them) is pushed by the server; the
    // watch itself outlives lost connections. The stream must not end (the waiter would
    // die), and a waiter whose polling failed waits on it alone: so when the watch fails
    // (its session ended), one more signal makes the waiter try, and its try says why.
    onPermitsReleased: (key) =>
      Stream.fromAsyncIterable(session.semaphore(keyPrefix + key).watch({ owners: true }), (cause) => cause).pipe(
        Stream.map(() => undefined),
        Stream.catchAll(() => Stream.make(undefined)),
        Stream.concat(Stream.never),
      ),
  };
}

/** The backing as a layer: a session of `client` on `options.node` for the layer's life. */
export function layer(client: Client, options: TenureBackingOptions): Layer.Layer<DistributedSemaphoreBacking, SemaphoreBackingError> {
  return Layer.scoped(
    DistributedSemaphoreBacking,
    Effect.acquireRelease(
      Effect.tryPromise({
        try: async () => {
          try {
            await client.createNode(options.node);
          } catch (error) {
            if (!(error instanceof AlreadyExistsError)) throw error;
          }
          const sessionOptions = options.recoveryWindow === undefined ? {} : { recoveryWindow: options.recoveryWindow };
          return client.session(options.node, { description: "effect-distributed-lock", ...sessionOptions });
        },
        catch: (cause) => new SemaphoreBackingError({ operation: "session", cause }),
      }),
      (session) => Effect.promise(() => session.close()),
    ).pipe(Effect.map((session) => make(session, options.keyPrefix))),
  );
}

function ttlMs(ttl: Duration.Duration): number {
  const millis = Duration.toMillis(ttl);
  // An infinite TTL is no lease TTL at all: the hold lasts as long as the session.
  return Number.isFinite(millis) && millis > 0 ? millis : 0;
}
