/**
 * A real `tenure serve` for the tests: on a free loopback port (`--port 0`, read
 * back from its "listening" log line) and a temporary data directory, stopped by
 * its PID. The interpreter is `$TENURE_PYTHON`, else the repository's `.venv`.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository's root (this file is clients/js/dist/test/server.js once built). */
export const REPO = resolve(fileURLToPath(import.meta.url), "../../../../..");

/** The Python that runs `tenure`. */
export function python(): string {
  return process.env["TENURE_PYTHON"] ?? join(REPO, ".venv", "bin", "python");
}

/** One running server. */
export interface Server {
  readonly port: number;
  readonly url: string;
  readonly process: ChildProcess;
  /** Everything it logged so far. */
  log(): string;
  /** SIGKILL it and wait for its exit; the data directory stays (for a restart). */
  kill(): Promise<void>;
  /** Kill it and remove its data directory. */
  stop(): Promise<void>;
}

/** Start `tenure serve` with `args` (on top of a free port, a temp data dir and `--fsync off`). */
export async function startServer(args: readonly string[] = [], dataDir?: string): Promise<Server> {
  const dir = dataDir ?? mkdtempSync(join(tmpdir(), "tenure-js-"));
  const child = spawn(python(), ["-m", "tenure", "serve", "--port", "0", "--data-dir", join(dir, "data"), "--fsync", "off", ...args], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, PYTHONUNBUFFERED: "1" },
  });
  let output = "";
  child.stdout!.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<void>((done) => child.once("exit", () => done()));
  const port = await new Promise<number>((done, fail) => {
    const timer = setTimeout(() => fail(new Error(`tenure serve did not listen within 20 s:\n${output}`)), 20_000);
    const look = (): void => {
      for (const line of output.split("\n")) {
        if (line.includes('"msg": "listening"')) {
          clearTimeout(timer);
          done((JSON.parse(line) as { port: number }).port);
          return;
        }
      }
    };
    child.stdout!.on("data", look);
    child.stderr!.on("data", look);
    child.once("exit", (code) => {
      clearTimeout(timer);
      fail(new Error(`tenure serve exited ${code}:\n${output}`));
    });
  });
  const kill = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    await exited;
  };
  return {
    port,
    url: `tenure://127.0.0.1:${port}`,
    process: child,
    log: () => output,
    kill,
    stop: async () => {
      await kill();
      if (dataDir === undefined) rmSync(dir, { recursive: true, force: true });
    },
  };
}
