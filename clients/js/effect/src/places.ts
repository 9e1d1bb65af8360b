/**
 * Arrival order: a waiter's place in tenure's FIFO queue, kept between its tries.
 *
 * effect-distributed-lock waits by trying: `take` races a poll (`tryAcquire` on a
 * schedule) against a push (`tryAcquire` again at each signal of
 * `onPermitsReleased(key)`), and a failed try keeps nothing, so whoever tries first
 * after a release wins. Here a failed try of holder H keeps a *place*: a real queued
 * Acquire for H (its count, owner data, lease TTL), so the queue grants in arrival
 * order, and H's next try finds the grant and claims it (it becomes H's hold).
 *
 * The library never says when a waiter stops waiting, so a place lives by what it
 * does say. The two fibers of one `take` share its `Scope` (withPermits's own, or
 * the caller's for `take`); the push fiber subscribes to `onPermitsReleased(key)` for
 * exactly the time it waits (granted or interrupted, the stream ends), while
 * `tryTake` and `withPermitsIfAvailable` never subscribe. So: a failed try keeps a
 * place only while a stream of its key runs in its scope (a plain `tryTake` keeps
 * none), and when the last stream of a key in a scope ends, every place of that
 * scope on that key is given back at once (withdrawn; released if granted
 * meanwhile). A granted place wakes the streams of its scope, so its holder tries
 * (and claims it) at once; one not claimed within the grace (`placeClaimGrace`) is
 * released, since its holder has stopped trying: a `tryTake` beside a `take` in one
 * scope failed, kept a place, and will never claim it, and the `take` must not wait
 * behind it for ever.
 */
import type { Scope } from "effect";
import type { Lease } from "tenure-client";

/** How long a granted place waits for its holder to claim it before it is released, ms. */
export const DEFAULT_PLACE_CLAIM_GRACE = 5_000;

/** One waiter's place: its queued acquire, then its grant until claimed. */
interface Place {
  readonly scope: Scope.Scope;
  readonly controller: AbortController;
  lease: Lease | null;
  grace: NodeJS.Timeout | null;
  /** Settles once the queued acquire is granted or has ended. */
  settled: Promise<void>;
}

/** The places of one backing, and the streams that keep them. */
export class Places {
  /** Each key's places, by holder id. */
  private readonly places = new Map<string, Map<string, Place>>();
  private readonly streams = new Map<string, Map<Scope.Scope, Set<() => void>>>();
  private closed = false;

  constructor(private readonly graceMs: number) {
    if (typeof graceMs !== "number" || !Number.isFinite(graceMs) || graceMs <= 0) {
      throw new RangeError(`placeClaimGrace must be a finite number of milliseconds above 0; got ${graceMs}`);
    }
  }

  /** Whether a stream of `key` runs in `scope` now. */
  live(key: string, scope: Scope.Scope): boolean {
    return this.streams.get(key)?.has(scope) ?? false;
  }

  /** Whether `holderId` waits in its place on `key` (queued, not yet granted). */
  waiting(key: string, holderId: string): boolean {
    const place = this.places.get(key)?.get(holderId);
    return place !== undefined && place.lease === null;
  }

  /** Whether `holderId` has a place on `key`, granted or not. */
  has(key: string, holderId: string): boolean {
    return this.places.get(key)?.has(holderId) ?? false;
  }

  /**
   * A stream of `key` started in `scope`; `wake` signals it. The function returned
   * ends it: the last of its scope on its key gives that scope's places back (the
   * promise settles once the server has withdrawn or released each).
   */
  open(key: string, scope: Scope.Scope, wake: () => void): () => Promise<void> {
    let scopes = this.streams.get(key);
    if (scopes === undefined) this.streams.set(key, (scopes = new Map()));
    let wakes = scopes.get(scope);
    if (wakes === undefined) scopes.set(scope, (wakes = new Set()));
    wakes.add(wake);
    return async () => {
      wakes.delete(wake);
      if (wakes.size > 0) return;
      scopes.delete(scope);
      if (scopes.size === 0) this.streams.delete(key);
      await this.giveBack(key, (place) => place.scope === scope);
    };
  }

  /**
   * Keep a place for `holderId` on `key` in `scope`: `queue(signal)` sends its waiting
   * acquire (aborted to withdraw it) and resolves with the grant.
   */
  keep(key: string, holderId: string, scope: Scope.Scope, queue: (signal: AbortSignal) => Promise<Lease>): void {
    if (this.closed) return;
    let places = this.places.get(key);
    if (places === undefined) this.places.set(key, (places = new Map()));
    const place: Place = { scope, controller: new AbortController(), lease: null, grace: null, settled: Promise.resolve() };
    places.set(holderId, place);
    const current = (): boolean => this.places.get(key)?.get(holderId) === place;
    place.settled = queue(place.controller.signal).then(
      (lease) => {
        if (!current()) {
          void lease.release().catch(() => undefined); // (given back meanwhile)
          return;
        }
        place.lease = lease;
        place.grace = setTimeout(() => this.lapse(key, holderId, place), this.graceMs);
        this.wake(key, scope);
      },
      () => {
        // Withdrawn, or ended without a grant (its semaphore deleted, the session
        // lost): no place now, and the holder's next try says what is wrong.
        if (!current()) return;
        this.drop(key, holderId);
        this.wake(key, scope);
      },
    );
  }

  /** The grant of `holderId`'s place on `key`, taken by its holder (no longer a place); null if not granted. */
  claim(key: string, holderId: string): Lease | null {
    const place = this.places.get(key)?.get(holderId);
    if (place === undefined || place.lease === null) return null;
    this.drop(key, holderId);
    if (place.grace !== null) clearTimeout(place.grace);
    return place.lease;
  }

  /** Give every place back (the backing's session ends). */
  async close(): Promise<void> {
    this.closed = true;
    await this.giveBack(null, () => true);
  }

  /**
   * Signal the streams of `key` in `scope`: a try of theirs failed. The library races
   * a waiter's poll against its push, and the push's try is skipped while the poll's
   * runs; a push that never tries again would wait for ever after the poll gave up
   * (the backing failing: its session gone), so each failure is one more signal.
   */
  wake(key: string, scope: Scope.Scope): void {
    for (const wake of this.streams.get(key)?.get(scope) ?? []) wake();
  }

  /** A granted place its holder did not claim within the grace: released. */
  private lapse(key: string, holderId: string, place: Place): void {
    if (this.places.get(key)?.get(holderId) !== place) return;
    this.drop(key, holderId);
    void place.lease?.release().catch(() => undefined);
  }

  private drop(key: string, holderId: string): void {
    const places = this.places.get(key);
    places?.delete(holderId);
    if (places?.size === 0) this.places.delete(key);
  }

  private async giveBack(key: string | null, which: (place: Place) => boolean): Promise<void> {
    const ending: Promise<void>[] = [];
    const keys = key === null ? [...this.places.keys()] : [key];
    const chosen = keys.flatMap((k) => [...(this.places.get(k) ?? [])].map(([holderId, place]) => ({ k, holderId, place })));
    for (const { k, holderId, place } of chosen) {
      if (!which(place)) continue;
      this.drop(k, holderId);
      if (place.grace !== null) clearTimeout(place.grace);
      if (place.lease !== null) ending.push(place.lease.release().catch(() => undefined));
      else {
        place.controller.abort(new Error("the waiter stopped waiting"));
        ending.push(place.settled);
      }
    }
    await Promise.all(ending);
  }
}
