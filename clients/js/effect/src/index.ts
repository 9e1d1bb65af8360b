/**
 * tenure-effect-distributed-lock: effect-distributed-lock's `DistributedSemaphore`
 * over tenure (`TenureBacking.layer(client, { node, keyPrefix })`).
 *
 * effect-distributed-lock's own names are re-exported from its modules, without its
 * index, whose Redis backing would need `ioredis` (`library.ts`): import
 * `DistributedSemaphore` from here and an app without Redis needs no ioredis.
 */
export * as TenureBacking from "./TenureBacking.js";
export type { BackingOptions, TenureBackingOptions } from "./TenureBacking.js";
export { Backing, DistributedSemaphore, DistributedSemaphoreBacking, LockLostError, SemaphoreBackingError } from "./library.js";
