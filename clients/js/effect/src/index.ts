/**
 * tenure-effect-distributed-lock: effect-distributed-lock's `DistributedSemaphore`
 * over tenure (`TenureBacking.layer(client, { node, keyPrefix })`).
 */
export * as TenureBacking from "./TenureBacking.js";
export type { TenureBackingOptions } from "./TenureBacking.js";
