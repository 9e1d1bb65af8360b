/** What the server tests share: a unique name, and waiting on a condition (bounded). */
import type { Semaphore } from "../src/index.js";

let counter = 0;

/** A name no other test of this process uses. */
export function unique(prefix: string): string {
  counter += 1;
  return `${prefix}-${process.pid}-${counter}`;
}

/** Until `check()` is true: polled, failing after `limitMs` (a bound, not a measurement). */
export async function until(check: () => Promise<boolean> | boolean, what: string, limitMs = 15_000): Promise<void> {
  const end = Date.now() + limitMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`never happened: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** Until `semaphore` has `count` waiters queued. */
export async function waiters(semaphore: Semaphore, count: number): Promise<void> {
  await until(async () => {
    try {
      return (await semaphore.describe({ waiters: true })).waiters.length === count;
    } catch {
      return false;
    }
  }, `${count} waiters on ${semaphore.name}`);
}
