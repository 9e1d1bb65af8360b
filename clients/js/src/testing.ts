/**
 * `tenure-client/testing`: a real `tenure serve` for tests (this package's, and
 * yours): on a free loopback port (`--port 0`, read back from its "listening" log
 * line) and a temporary data directory, stopped by its PID. The interpreter is
 * `$TENURE_PYTHON`, else the `.venv` of the tenure checkout this package sits in,
 * else `python3` (which must have `tenure[server]` installed).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** The tenure checkout this package sits in (its pyproject.toml's directory), or null. */
export function checkout(): string | null {
  for (let dir = dirname(fileURLToPath(import.meta.url)); dir !== dirname(dir); dir = dirname(dir)) {
    if (existsSync(join(dir, "pyproject.toml")) && existsSync(join(dir, "src", "tenure"))) return dir;
  }
  return null;
}

/** The Python that runs `tenure`. */
export function python(): string {
  const repo = checkout();
  return process.env["TENURE_PYTHON"] ?? (repo === null ? "python3" : join(repo, ".venv", "bin", "python"));
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
