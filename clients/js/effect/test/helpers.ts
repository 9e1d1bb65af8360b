/**
 * What the backing's tests share: a unique key, the layer of a client, waiting on a
 * condition (bounded, never a measurement), the queue of a semaphore as the server
 * shows it, and child node processes (`child.ts`) whose lines are read as they come.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import type { Client, Session } from "tenure-client";
import { TenureBacking } from "../src/index.js";

/** The node every test's semaphores live in, and the prefix of their names. */
export const NODE = "effect";
export const PREFIX = "my-app:";

let counter = 0;

/** A key no other test of this process uses. */
export function key(name: string): string {
  counter += 1;
  return `${name}-${process.pid}-${counter}`;
}

/** The backing's layer over `client` (`options`: the layer's own, besides the node and prefix). */
export function layerOf(client: Client, options: Omit<TenureBacking.TenureBackingOptions, "node"> = {}) {
  return TenureBacking.layer(client, { node: NODE, keyPrefix: PREFIX, ...options });
}

/**
 * Until `check()` is true: polled, failing after `limitMs` (a bound, not a
 * measurement: a child node process took over 20 s to start on a machine under load).
 */
export async function until(check: () => Promise<boolean> | boolean, what: string, limitMs = 90_000): Promise<void> {
  const end = Date.now() + limitMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`never happened: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** The owner data (identifiers) of `key`'s waiters, in queue order ([] while it does not exist). */
export async function queued(session: Session, name: string): Promise<string[]> {
  const state = await session.semaphore(PREFIX + name).describe({ waiters: true });
  return state.waiters.map((w) => Buffer.from(w.data).toString());
}

/** The owners of `key`: identifier, session and token. */
export async function owners(session: Session, name: string): Promise<{ id: string; session: number; token: bigint }[]> {
  const state = await session.semaphore(PREFIX + name).describe({ owners: true });
  return state.owners.map((o) => ({ id: Buffer.from(o.data).toString(), session: o.sessionId, token: o.token }));
}

/**
 * What a child does (`child.ts`), with a layer of its own client on `url`:
 * `hold`: withPermits(1) as `identifier`, then waits for ever (to be killed);
 * `take`: take(1) as `identifier` in a scope, then joins the keepalive fiber until
 * it fails (its permits lost); `wait`: withPermits(1) as `identifier`, polling never
 * (woken by push alone), then holds until told `release`.
 */
export interface ChildTask {
  readonly mode: "hold" | "take" | "wait";
  readonly url: string;
  readonly key: string;
  readonly identifier: string;
  /** The semaphore's ttl, ms (default: the library's, 30 s). */
  readonly ttl?: number;
  /** The layer session's recovery window, ms. */
  readonly recoveryWindow?: number;
  /** `hold` resumes the permits of `identifier` (`acquiredExternally`) instead of acquiring. */
  readonly acquiredExternally?: boolean;
}

/** A child node process running `child.ts`, its JSON lines read in order. */
export class Child {
  readonly process: ChildProcess;
  private readonly lines: string[] = [];
  private stderr = "";

  /** Start `child.ts` with `task` (its JSON argument: what it does, where). */
  constructor(task: ChildTask) {
    const script = fileURLToPath(new URL("./child.js", import.meta.url));
    this.process = spawn(process.execPath, [script, JSON.stringify(task)], { stdio: ["pipe", "pipe", "pipe"] });
    createInterface({ input: this.process.stdout! }).on("line", (line) => this.lines.push(line));
    this.process.stderr!.on("data", (chunk: Buffer) => (this.stderr += chunk.toString()));
  }

  /** The next line, which must be event `event`. */
  async next(event: string): Promise<Record<string, string>> {
    await until(() => this.lines.length > 0 || this.process.exitCode !== null || this.process.signalCode !== null, `the child's ${event}`);
    const line = this.lines.shift();
    if (line === undefined) throw new Error(`the child ended before ${event}: ${this.stderr}`);
    const said = JSON.parse(line) as Record<string, string>;
    if (said["event"] !== event) throw new Error(`expected ${event}, the child said ${line} ${this.stderr}`);
    return said;
  }

  /** Tell it a line. */
  tell(line: string): void {
    this.process.stdin!.write(`${line}\n`);
  }

  /** SIGKILL it (a crash) and wait for its end. */
  async kill(): Promise<void> {
    if (this.process.exitCode === null && this.process.signalCode === null) this.process.kill("SIGKILL");
    await this.exited();
  }

  /** Its exit code, once it ended. */
  async exited(): Promise<number | null> {
    if (this.process.exitCode === null && this.process.signalCode === null) {
      await new Promise<void>((resolve) => this.process.once("exit", () => resolve()));
    }
    return this.process.exitCode;
  }
}
