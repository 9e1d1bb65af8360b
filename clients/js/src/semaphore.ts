/**
 * The handles a session gives out: `Mutex` (every token of an ephemeral semaphore,
 * docs/protocol.md 6.1) and `Semaphore` (create, acquire, describe, update,
 * compare-and-set, delete, and `watch` as an async iterator).
 */
import { commands } from "./commands.js";
import { readBool, readDescribeResult, readNil, type SemaphoreDescription } from "./replies.js";
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
  /**
   * The session's hold number to ask under (default: the lowest free one): a session
   * holding a semaphore more than once numbers its holds; one it holds or waits with
   * already is an `InvalidArgumentError`. For a hold another process must find by its
   * number (a hand-off adopted without the string).
   */
  readonly hold?: number;
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
      hold: options.hold,
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
      hold: options.hold,
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

  /**
   * Replace its data. Not sent again by itself after a lost answer (a
   * `DisconnectedError`: applied or not, unknown): applied, then overwritten by another
   * client's update, a second copy would undo that update (as Python's client).
   */
  async update(data: Uint8Array): Promise<void> {
    readNil(await this.session.call(commands.updateSemaphore(this.session.sessionId, this.name, data), false), "UpdateSemaphore");
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
   * yields `exists: false`. Ends when `signal` aborts or `return()` is called (at
   * once, even while a `next()` waits), or the session ends (then it throws the
   * session's error).
   */
  watch(options: WatchOptions = {}): SemaphoreWatch {
    return new SemaphoreWatch(this.session, this.name, options);
  }
}

/** One watch of a semaphore, as an async iterator (see `Semaphore.watch`). */
export class SemaphoreWatch implements AsyncIterableIterator<SemaphoreDescription> {
  private readonly flags: { owners: boolean; waiters: boolean; watchData: boolean; watchOwners: boolean; watchWaiters: boolean };
  private watchId: number | null = null;
  private first = true;
  private fired = false;
  private done = false;
  private failure: Error | null = null;
  private wake: (() => void) | null = null;
  private readonly handler: WatchHandler = {
    fired: () => this.poke(true),
    rearm: () => this.poke(true), // describe again: reads the latest state, arms a new watch
    end: (error) => {
      this.failure = error;
      this.poke(false);
    },
  };
  private readonly onAbort = (): void => {
    void this.return();
  };

  constructor(
    private readonly session: Session,
    private readonly name: string,
    private readonly options: WatchOptions,
  ) {
    this.flags = {
      owners: options.owners ?? false,
      waiters: options.waiters ?? false,
      watchData: options.data ?? !(options.owners || options.waiters),
      watchOwners: options.owners ?? false,
      watchWaiters: options.waiters ?? false,
    };
    options.signal?.addEventListener("abort", this.onAbort, { once: true });
  }

  private poke(fired: boolean): void {
    if (fired) {
      this.fired = true;
      this.watchId = null; // a fired watch is gone (the session dropped it)
    }
    const wake = this.wake;
    this.wake = null;
    wake?.();
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<SemaphoreDescription> {
    return this;
  }

  async next(): Promise<IteratorResult<SemaphoreDescription, undefined>> {
    if (!this.first) {
      while (!this.fired && this.failure === null && !this.done) {
        await new Promise<void>((resolve) => {
          this.wake = resolve;
        });
      }
    }
    if (this.failure !== null) {
      this.finish();
      throw this.failure;
    }
    if (this.done || this.options.signal?.aborted) return this.finish();
    this.first = false;
    this.fired = false;
    const result = readDescribeResult(
      await this.session.call(commands.describeSemaphore(this.session.sessionId, this.name, this.flags)),
    );
    if (this.done) {
      if (result.watchId !== null) this.session.dropWatch(result.watchId);
      return this.finish();
    }
    this.watchId = result.watchId;
    if (result.watchId !== null) this.session.addWatch(result.watchId, this.handler);
    return { done: false, value: result.description };
  }

  async return(): Promise<IteratorResult<SemaphoreDescription, undefined>> {
    return this.finish();
  }

  private finish(): IteratorResult<SemaphoreDescription, undefined> {
    this.done = true;
    this.options.signal?.removeEventListener("abort", this.onAbort);
    if (this.watchId !== null) this.session.dropWatch(this.watchId);
    this.watchId = null;
    this.poke(false);
    return { done: true, value: undefined };
  }
}
