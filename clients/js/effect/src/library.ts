/**
 * effect-distributed-lock's own modules, loaded without its index. The package's only
 * entry point (`exports: "."`) re-exports its Redis backing, whose module imports
 * `ioredis` at load: any import of the package would make an app without Redis
 * install ioredis. Its other modules import only `effect` and each other, so they are
 * loaded here by their URLs beside the index (which the package's `exports` does not
 * restrict: it governs bare specifiers only). The same URLs as the index's imports:
 * an app that also imports the package gets the same classes and tags.
 *
 * Written for effect-distributed-lock 0.0.11 (its `dist/Backing.js`,
 * `dist/DistributedSemaphore.js`, `dist/Errors.js`), the version this package's
 * peerDependencies pin.
 */
import type * as Package from "effect-distributed-lock";

const index = import.meta.resolve("effect-distributed-lock");
const beside = (file: string): string => new URL(file, index).href;

/** `Backing.js`: the backing's interface, its Context tag and its error. */
export const Backing: typeof Package.Backing = await import(beside("./Backing.js"));
/** `DistributedSemaphore.js`: `make` and the semaphore's types. */
export const DistributedSemaphore: typeof Package.DistributedSemaphore = await import(beside("./DistributedSemaphore.js"));
/** `Errors.js`: `LockLostError` (and `LockNotAcquiredError`). */
const errors: { readonly LockLostError: typeof Package.LockLostError } = await import(beside("./Errors.js"));

/** The Context tag of the backing (`DistributedSemaphoreBacking`). */
export const DistributedSemaphoreBacking = Backing.DistributedSemaphoreBacking;
/** A backing's failure: its `operation` and `cause` (tag `SemaphoreBackingError`). */
export const SemaphoreBackingError = Backing.SemaphoreBackingError;
/** The permits were lost while held (tag `LockLostError`). */
export const LockLostError = errors.LockLostError;

/** The semaphore's types, under the namespace's name as the package's index gives them. */
export declare namespace DistributedSemaphore {
  export type DistributedSemaphore = Package.DistributedSemaphore.DistributedSemaphore;
  export type DistributedSemaphoreConfig = Package.DistributedSemaphore.DistributedSemaphoreConfig;
  export type AcquireOptions = Package.DistributedSemaphore.AcquireOptions;
}

export type DistributedSemaphoreBacking = Package.DistributedSemaphoreBacking;
export type SemaphoreBackingError = Package.SemaphoreBackingError;
export type LockLostError = Package.LockLostError;
