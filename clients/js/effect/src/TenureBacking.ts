/**
 * A backing of effect-distributed-lock's `DistributedSemaphore` over tenure:
 * `TenureBacking.layer(client, { node, keyPrefix })`, in place of its Redis one.
 *
 * Each key is a persistent tenure semaphore `keyPrefix + key` of the node, created
 * with the first `limit` asked; each holder one hold of the layer's session, with
 * its identifier as owner data and the semaphore's `ttl` as its lease, carrying a
 * fencing token (`fencingToken`). What each method does: `holders.ts`; how waiters
 * keep their places in arrival order: `places.ts`; the pushed signals:
 * `signals.ts`; what an identifier derives: `identity.ts`.
 */
import { Context, Duration, Effect, Layer, Option, Scope } from "effect";
import type { Client, Session } from "tenure-client";
import { DistributedSemaphoreBacking, SemaphoreBackingError } from "./library.js";
import { Holders } from "./holders.js";
import { DEFAULT_PLACE_CLAIM_GRACE, Places } from "./places.js";
import { permitsReleased } from "./signals.js";

export { DEFAULT_PLACE_CLAIM_GRACE } from "./places.js";

/** What `make` takes. */
export interface BackingOptions {
  /** The prefix of every semaphore's name (default `"semaphore:"`, as the Redis backing's). */
  readonly keyPrefix?: string;
  /**
   * How long a waiter's granted place waits for its holder to claim it before it is
   * released, ms (default `DEFAULT_PLACE_CLAIM_GRACE`, 5 s). A waiter whose place is
   * granted is woken at once and claims it within moments; the grace bounds what a
   * place costs the queue once nobody will claim it (`places.ts`).
   */
  readonly placeClaimGrace?: number;
}

/** What the layer takes. */
export interface TenureBackingOptions extends BackingOptions {
  /** The node the semaphores live in (created if missing). */
  readonly node: string;
  /** The layer session's recovery window, ms (default: the node's). */
  readonly recoveryWindow?: number;
}

/** The fencing tokens of this layer's holders (the layer provides it beside the backing). */
export class TenureFencing extends Context.Tag("tenure-effect-distributed-lock/TenureFencing")<
  TenureFencing,
  {
    /** The token of holder `identifier`'s permits on `key` while this process holds them, else null. */
    readonly token: (key: string, identifier: string) => bigint | null;
  }
>() {}

/**
 * The fencing token of the permits `identifier` holds on `key` (a semaphore's
 * `sem.key`) in this process: greater than every token granted before on this
 * service; None unless held. Give your own `identifier` to `withPermits` to ask it.
 */
export const fencingToken = (key: string, identifier: string): Effect.Effect<Option.Option<bigint>, never, TenureFencing> =>
  Effect.map(TenureFencing, (fencing) => Option.fromNullable(fencing.token(key, identifier)));

/** The backing and its fencing tokens over an open session (the layer's, or one of your own). */
export function parts(session: Session, options: BackingOptions = {}): {
  readonly backing: DistributedSemaphoreBacking;
  readonly fencing: TenureFencing["Type"];
  /** Give every waiter's place back (the session is about to end). */
  readonly close: () => Promise<void>;
} {
  const keyPrefix = options.keyPrefix ?? "semaphore:";
  const places = new Places(options.placeClaimGrace ?? DEFAULT_PLACE_CLAIM_GRACE);
  const holders = new Holders(session, keyPrefix, places);
  const attempt = <A>(operation: string, run: () => Promise<A>): Effect.Effect<A, SemaphoreBackingError> =>
    Effect.tryPromise({ try: run, catch: (cause) => new SemaphoreBackingError({ operation, cause }) });
  const backing: DistributedSemaphoreBacking = {
    // Answered at once when it can be (held already, or still waiting in its place):
    // a try that never leaves the fiber cannot make the waiter's other try skip a signal.
    tryAcquire: (key, holderId, ttl, limit, permits) =>
      Effect.suspend(() => {
        const known = holders.known(key, holderId, permits);
        if (known !== null) return Effect.succeed(known);
        return Effect.flatMap(Effect.context<never>(), (context) => {
          const scope = Option.getOrNull(Context.getOption(context, Scope.Scope));
          const tried = attempt("tryAcquire", () => holders.tryAcquire(key, holderId, ttlMs(ttl), limit, permits, scope));
          return scope === null ? tried : Effect.tapError(tried, () => Effect.sync(() => places.wake(key, scope)));
        });
      }),
    release: (key, holderId) => attempt("release", () => holders.release(key, holderId)),
    refresh: (key, holderId, ttl, _limit, permits) => attempt("refresh", () => holders.refresh(key, holderId, ttlMs(ttl), permits)),
    getCount: (key) => attempt("getCount", () => holders.count(key)),
    onPermitsReleased: (key) => permitsReleased(session, places, key, keyPrefix + key),
  };
  return { backing, fencing: { token: (key, identifier) => holders.token(key, identifier) }, close: () => places.close() };
}

/** The backing over an open session (the layer's, or one of your own). */
export function make(session: Session, options: BackingOptions = {}): DistributedSemaphoreBacking {
  return parts(session, options).backing;
}

/**
 * The backing as a layer: a session of `client` on `options.node` (created if missing)
 * for the layer's life, closed with it (what it holds is released then). It provides
 * `TenureFencing` too (`fencingToken`).
 */
export function layer(client: Client, options: TenureBackingOptions): Layer.Layer<DistributedSemaphoreBacking | TenureFencing, SemaphoreBackingError> {
  const open = Effect.tryPromise({
    try: async () => {
      await client.createNode(options.node, { existOk: true });
      const window = options.recoveryWindow === undefined ? {} : { recoveryWindow: options.recoveryWindow };
      const session = await client.session(options.node, { description: "effect-distributed-lock", ...window });
      try {
        return { session, ...parts(session, options) };
      } catch (error) {
        await session.close(); // (a bad option)
        throw error;
      }
    },
    catch: (cause) => new SemaphoreBackingError({ operation: "session", cause }),
  });
  return Layer.scopedContext(
    Effect.map(
      Effect.acquireRelease(open, ({ session, close }) =>
        Effect.promise(async () => {
          await close();
          await session.close();
        }),
      ),
      ({ backing, fencing }) => Context.make(DistributedSemaphoreBacking, backing).pipe(Context.add(TenureFencing, fencing)),
    ),
  );
}

function ttlMs(ttl: Duration.Duration): number {
  const millis = Duration.toMillis(ttl);
  // An infinite TTL is no lease TTL at all: the hold lasts as long as the session.
  return Number.isFinite(millis) && millis > 0 ? millis : 0;
}
