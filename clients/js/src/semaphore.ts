/**
 * The handles a session gives out: `Mutex` (every token of an ephemeral semaphore,
 * docs/protocol.md 6.1) and `Semaphore` (create, acquire, describe, update,
 * compare-and-set, delete, and `watch` as an async iterator).
 */
import {
  commands,
  readBool,
  readDescribeResult,
  readNil,
  type SemaphoreDescription,
} from "./commands.js";
import { TimeoutError } from "./errors.js";
import type { Lease } from "./lease.js";
import type { Session, WatchHandler } from "./session.js";
import { MAX_COUNT } from "./wire.js";

/** How long to wait: `timeout` in ms (0: only try; absent: for ever), and a signal to give up. */
export interface WaitOptions {
  readonly timeout?: number;
  readonly signal?: AbortSignal;
}

/** An exclusive lock: `lock()` takes every token of the ephemeral semaphore `name`. */
export class Mutex {
  constructor(
    private readonly session: Session,
    /** The mutex's name. */
    readonly name: string,
  ) {}

  /** Wait for the lock; a `TimeoutError` if `timeout` passes first, the signal's reason if it aborts. */
  async lock(options: WaitOptions = {}): Promise<Lease> {
    const lease = await this.session.acquire({
      name: this.name,
      count: MAX_COUNT,
      timeoutMs: options.timeout ?? null,
      ephemeral: true,
      signal: options.signal,
    });
    if (lease === null) throw new TimeoutError(`the mutex ${this.name} is held`);
    return lease;
  }

  /** The lock if it is free now, else null. */
  async tryLock(): Promise<Lease | null> {
    return this.session.acquire({ name: this.name, count: MAX_COUNT, timeoutMs: 0, ephemeral: true });
  }
}

/** What `semaphore.acquire` takes. */
export interface AcquireOptions extends WaitOptions {
  /** Tokens to take (default 1). */
  readonly count?: number | bigint;
  /** Owner data, shown with the hold. */
  readonly data?: Uint8Array;
  /** Create the semaphore (limit 2^64−1) if it is missing; it lives while held or awaited. */
  readonly ephemeral?: boolean;
  /** The grant's lease, ms: it ends unless `lease.renew()` is called within it (default: the node's). */
  readonly leaseTtl?: number;
}

/** What `semaphore.watch` watches. */
export interface WatchOptions {
  readonly data?: boolean;
  readonly owners?: boolean;
  readonly waiters?: boolean;
  readonly signal?: AbortSignal;
}

/** A counting semaphore of the session's node. */
export class Semaphore {
  constructor(
    private readonly session: Session,
    /** The semaphore's name. */
    readonly name: string,
  ) {}

  /** Create it persistent, with `limit` tokens and `data`; AlreadyExistsError if it exists. */
  async create(options: { limit: number | bigint; data?: Uint8Array }): Promise<void> {
    const command = commands.createSemaphore(this.session.sessionId, this.name, BigInt(options.limit), options.data ?? new Uint8Array(0));
    readNil(await this.session.call(command, false), "CreateSemaphore");
  }

  /** Wait for `count` tokens; a `TimeoutError` if `timeout` passes first. */
  async acquire(options: AcquireOptions = {}): Promise<Lease> {
    const lease = await this.session.acquire({
      name: this.name,
      count: BigInt(options.count ?? 1),
      data: options.data,
      timeoutMs: options.timeout ?? null,
      ephemeral: options.ephemeral ?? false,
      signal: options.signal,
      leaseTtlMs: options.leaseTtl,
    });
    if (lease === null) throw new TimeoutError(`the semaphore ${this.name} has not ${options.count ?? 1} tokens free`);
    return lease;
  }

  /** The tokens if free now, else null. */
  async tryAcquire(options: Omit<AcquireOptions, "timeout" | "signal"> = {}): Promise<Lease | null> {
    return this.session.acquire({
      name: this.name,
      count: BigInt(options.count ?? 1),
      data: options.data,
      timeoutMs: 0,
      ephemeral: options.ephemeral ?? false,
      leaseTtlMs: options.leaseTtl,
    });
  }

  /** Its state now, with its owners and waiters (FIFO order) if asked. */
  async describe(options: { owners?: boolean; waiters?: boolean } = {}): Promise<SemaphoreDescription> {
    const command = commands.describeSemaphore(this.session.sessionId, this.name, {
      owners: options.owners ?? false,
      waiters: options.waiters ?? false,
      watchData: false,
      watchOwners: false,
      watchWaiters: false,
    });
    return readDescribeResult(await this.session.call(command)).description;
  }

  /** Replace its data. */
  async update(data: Uint8Array): Promise<void> {
    readNil(await this.session.call(commands.updateSemaphore(this.session.sessionId, this.name, data)), "UpdateSemaphore");
  }

  /** Replace its data with `data` if it is `expected` now; whether it did. */
  async compareAndSet(expected: Uint8Array, data: Uint8Array): Promise<boolean> {
    return readBool(await this.session.call(commands.swapSemaphoreData(this.session.sessionId, this.name, expected, data), false), "SwapSemaphoreData");
  }

  /** Delete it; with `force`, even while held (holders lose it) or awaited. */
  async delete(options: { force?: boolean } = {}): Promise<void> {
    readNil(await this.session.call(commands.deleteSemaphore(this.session.sessionId, this.name, options.force ?? false), false), "DeleteSemaphore");
  }

  /**
   * Its state now, then again after every change of what is watched (data by
   * default), in the order the server made them. Each step re-reads the latest state
   * (a watch fires once and is armed again by describing), so changes between two
   * reads may coalesce, but none after the last read is missed. A missing semaphore
   * yields `exists: false`. Ends when `signal` aborts, `return()` is called or the
   * session ends (then it throws the session's error).
   */
  async *watch(options: WatchOptions = {}): AsyncGenerator<SemaphoreDescription, void, undefined> {
    const flags = {
      owners: options.owners ?? false,
      waiters: options.waiters ?? false,
      watchData: options.data ?? !(options.owners || options.waiters),
      watchOwners: options.owners ?? false,
      watchWaiters: options.waiters ?? false,
    };
    let wake: (() => void) | null = null;
    let failure: Error | null = null;
    let fired = false;
    const handler: WatchHandler = {
      fired: () => {
        fired = true;
        wake?.();
      },
      rearm: () => {
        fired = true; // describe again: reads the latest state, arms a new watch
        wake?.();
      },
      end: (error) => {
        failure = error;
        wake?.();
      },
    };
    const onAbort = (): void => wake?.();
    options.signal?.addEventListener("abort", onAbort);
    let watchId: number | null = null;
    try {
      for (;;) {
        if (options.signal?.aborted) return;
        fired = false;
        const result = readDescribeResult(
          await this.session.call(commands.describeSemaphore(this.session.sessionId, this.name, flags)),
        );
        watchId = result.watchId;
        if (watchId !== null) this.session.addWatch(watchId, handler);
        yield result.description;
        while (!fired && failure === null && !options.signal?.aborted) {
          await new Promise<void>((resolve) => {
            wake = resolve;
          });
          wake = null;
        }
        if (failure !== null) throw failure;
      }
    } finally {
      options.signal?.removeEventListener("abort", onAbort);
      if (watchId !== null && !fired) this.session.dropWatch(watchId);
    }
  }
}
