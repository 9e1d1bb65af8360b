/**
 * `tenure-client/testing`: a real `tenure serve` for tests (this package's, and
 * yours): on a free loopback port (`--port 0`, read back from its "listening" log
 * line) and a temporary data directory, stopped by its PID. The interpreter is
 * `$TENURE_PYTHON`, else the `.venv` of the tenure checkout this package sits in,
 * else `python3` (which must have `tenure[server]` installed).
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
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

/**
 * How long a server (or a cluster's members) may take to start listening, ms: a
 * bound, not a measurement (an interpreter starting on a busy machine is slow).
 */
export const STARTUP_LIMIT_MS = 60_000;

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
    const timer = setTimeout(() => {
      child.kill("SIGKILL"); // (not left behind, listening later with nobody to stop it)
      fail(new Error(`tenure serve did not listen within ${STARTUP_LIMIT_MS} ms:\n${output}`));
    }, STARTUP_LIMIT_MS);
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

/** A free loopback TCP port, chosen as the Python tests choose theirs (below). */
export async function freePort(): Promise<number> {
  const [index, total] = workerShare();
  const ports = chosenPorts();
  for (let ask = 0; ask < MAX_ASKS; ask += 1) {
    const port = await candidate(ports === null ? 0 : ports[0] + Math.floor(Math.random() * (ports[1] - ports[0])));
    if (port === null || Math.floor(port / 2) % total !== index || handed.has(port)) continue;
    handed.add(port);
    return port;
  }
  throw new Error(`no free port of worker ${index}'s share in ${MAX_ASKS} asks`);
}

/*
 * Ports as tests/ports.py chooses them: from below the range the OS hands out by itself
 * (bind(0), and every outgoing connection's local port), so that nothing the OS picks
 * takes a port between its choice and the server's bind (the likely cause of ci23's
 * cluster member that never listened, its ports from bind(0)); of the pytest-xdist worker's share (the
 * environment the test command's processes inherit); never one this process had before.
 */
const MAX_ASKS = 200;
const LOWEST = 10_000;
const FEWEST = 2_000;
const handed = new Set<number>();

function workerShare(): [number, number] {
  const name = process.env["PYTEST_XDIST_WORKER"] ?? "";
  const count = process.env["PYTEST_XDIST_WORKER_COUNT"] ?? "";
  if (!/^gw\d+$/.test(name) || !/^\d+$/.test(count)) return [0, 1];
  const [index, total] = [Number(name.slice(2)), Number(count)];
  return index < total ? [index, total] : [0, 1];
}

/** [first, end) of the ports to choose from, or null (then bind(0) chooses). */
function chosenPorts(): [number, number] | null {
  let low: number, high: number;
  try {
    [low, high] = readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "ascii").trim().split(/\s+/).map(Number) as [number, number];
  } catch {
    return null;
  }
  if (low - LOWEST >= FEWEST) return [LOWEST, low];
  if (65535 - high >= FEWEST) return [Math.max(high + 1, LOWEST), 65536];
  return null;
}

/** `port` (0: any) if it can be bound on 127.0.0.1 now, else null. */
async function candidate(port: number): Promise<number | null> {
  const { createServer } = await import("node:net");
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(null));
    server.listen(port, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => resolve(typeof address === "object" && address !== null ? address.port : null));
    });
  });
}

/** Why a cluster cannot be started here (no etcd), or null. `$TENURE_ETCD` names the binary. */
export function etcdUnavailable(): string | null {
  const binary = process.env["TENURE_ETCD"] ?? "etcd";
  const probe = spawnSync(binary, ["--version"], { stdio: "ignore" });
  return probe.error === undefined && probe.status === 0 ? null : `${binary} is not installed (a cluster runs over etcd)`;
}

/** One member of a test cluster. */
export interface Member {
  readonly port: number;
  readonly httpPort: number;
  readonly process: ChildProcess;
  /** Whether it leads now (its `/readyz` answers 200). */
  leads(): Promise<boolean>;
  /** SIGKILL it. */
  kill(): Promise<void>;
}

/** A test cluster: one etcd member and `size` `tenure serve --cluster` members over it. */
export interface Cluster {
  /** Every member's door: `tenure://127.0.0.1:P1,127.0.0.1:P2,...`. */
  readonly url: string;
  readonly members: readonly Member[];
  /** The member that leads (waits until one does, bounded); not `excluding`. */
  leader(excluding?: Member): Promise<Member>;
  /** Kill every member and etcd, and remove their directories. */
  stop(): Promise<void>;
}

function spawned(args: readonly string[], binary: string): { child: ChildProcess; output: () => string; exited: Promise<void> } {
  const child = spawn(binary, args, { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, PYTHONUNBUFFERED: "1" } });
  let output = "";
  child.stdout!.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<void>((done) => child.once("exit", () => done()));
  return { child, output: () => output, exited };
}

async function waitFor(check: () => Promise<boolean> | boolean, what: string, limitMs = 20_000): Promise<void> {
  const end = Date.now() + limitMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`never happened within ${limitMs} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function answers(url: string): Promise<number | null> {
  try {
    return (await fetch(url)).status;
  } catch {
    return null;
  }
}

/**
 * Start etcd and `size` members of one cluster over it (leases of 2 s, so a killed
 * leader is replaced in about 2-3 s). Needs `etcd` (`$TENURE_ETCD`) and tenure.
 */
export async function startCluster(size = 3): Promise<Cluster> {
  const dir = mkdtempSync(join(tmpdir(), "tenure-js-cluster-"));
  const [client, peer] = [await freePort(), await freePort()];
  const etcd = spawned(
    [
      "--name", "js", "--data-dir", join(dir, "etcd"),
      "--listen-client-urls", `http://127.0.0.1:${client}`, "--advertise-client-urls", `http://127.0.0.1:${client}`,
      "--listen-peer-urls", `http://127.0.0.1:${peer}`, "--initial-advertise-peer-urls", `http://127.0.0.1:${peer}`,
      "--initial-cluster", `js=http://127.0.0.1:${peer}`,
    ],
    process.env["TENURE_ETCD"] ?? "etcd",
  );
  const started: { child: ChildProcess; exited: Promise<void> }[] = [etcd];
  const stop = async (): Promise<void> => {
    for (const { child } of started) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    await Promise.all(started.map(({ exited }) => exited));
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await waitFor(async () => (await answers(`http://127.0.0.1:${client}/health`)) === 200, `etcd healthy:\n${etcd.output()}`);
    const name = `js${process.pid}x${Date.now()}`;
    const members: Member[] = [];
    const logs: (() => string)[] = [];
    for (let i = 0; i < size; i += 1) {
      const [port, httpPort] = [await freePort(), await freePort()];
      const member = spawned(
        [
          "-m", "tenure", "serve", "--cluster", `etcd://127.0.0.1:${client}/${name}`,
          "--port", String(port), "--http-port", String(httpPort), "--data-dir", join(dir, `m${i}`),
          "--member-name", `m${i}`, "--cluster-lease-ttl", "2", "--fsync", "off",
        ],
        python(),
      );
      started.push(member);
      logs.push(member.output);
      members.push({
        port,
        httpPort,
        process: member.child,
        leads: async () => member.child.exitCode === null && member.child.signalCode === null && (await answers(`http://127.0.0.1:${httpPort}/readyz`)) === 200,
        kill: async () => {
          member.child.kill("SIGKILL");
          await member.exited;
        },
      });
    }
    try {
      await waitFor(() => logs.every((log) => log().includes('"msg": "listening"')), "every member listens", STARTUP_LIMIT_MS);
    } catch (error) {
      const said = logs.map((log, i) => `m${i}:\n${log().slice(-3000)}`).join("\n");
      throw new Error(`${(error as Error).message}; what the members said:\n${said}`);
    }
    const leader = async (excluding?: Member): Promise<Member> => {
      let found: Member | undefined;
      await waitFor(async () => {
        for (const member of members) if (member !== excluding && (await member.leads())) found = member;
        return found !== undefined;
      }, "a member leads");
      return found!;
    };
    await leader();
    return { url: `tenure://${members.map((m) => `127.0.0.1:${m.port}`).join(",")}`, members, leader, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
