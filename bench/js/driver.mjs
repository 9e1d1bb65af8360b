// The Node side of `python -m bench.peers.js`: seq, par and cont from Node.js, as
// bench/peers/lockload.py runs them from Python, printing the same Measures (JSON).
//
//   node bench/js/driver.mjs --system js-tenure --url tenure://127.0.0.1:PORT \
//     --workload seq,par,cont --n seq=2000,par=10000,cont=3000 [--clients 32] \
//     [--timeout 120] [--max-seconds S]
//
// Systems:
// * js-tenure: tenure-client (clients/js, its built dist) against `tenure serve`:
//   `const lock = await session.mutex(key).lock({ timeout })`, then
//   `await lock.release()` (it waits for the server's answer: two round trips a pair,
//   as Python's seq-awaited). One client (one connection) shared by every session.
// * js-effect-redis: effect-distributed-lock 0.0.11's RedisBacking over one ioredis
//   connection: `DistributedSemaphore.make(key, { limit: 1 })` and `withPermits(1)`
//   around the critical section, every option at its default (30 s TTL refreshed by a
//   fiber, push-based waiting on Redis pub/sub raced with a 100 ms poll). Every
//   acquire, free key or not, starts the push side too: a `redis.duplicate()`
//   connection subscribed to the key's channel, closed after the grant.
// * js-effect-redis-poll: the same with `pushBasedAcquireEnabled: false` (a waiter
//   polls every 100 ms, the default policy; no connection per acquire).
//
// Workloads (bench/peers/lockload.py's):
// * seq: one session (one worker), acquire + release of distinct keys, one at a time.
// * par: --clients workers at once, distinct keys, n pairs in all.
// * cont: --clients workers loop acquire -> release on one key until n grants; while
//   holding, each checks no other worker holds it and yields one turn of the loop.
//
// Every loop is bounded by its count and by --max-seconds; the whole run by --timeout
// (exit status 2, the reason on stderr).

import { performance } from "node:perf_hooks";
import { randomUUID } from "node:crypto";

const NODE = "bench"; // bench/peers/clients.py's NODE: the same node as Python's client
const WORKLOADS = ["seq", "par", "cont"];

function parseArgs(argv) {
  const args = { clients: 32, timeout: 120, maxSeconds: Infinity };
  for (let i = 0; i < argv.length; i += 2) {
    const [flag, value] = [argv[i], argv[i + 1]];
    if (value === undefined) throw new Error(`${flag} needs a value`);
    if (flag === "--system") args.system = value;
    else if (flag === "--url") args.url = value;
    else if (flag === "--workload") args.workload = value.split(",").filter(Boolean);
    else if (flag === "--n") {
      args.n = {};
      for (const part of value.split(",")) {
        const [name, size] = part.split("=");
        if (size === undefined) for (const w of WORKLOADS) args.n[w] = Number(name);
        else args.n[name] = Number(size);
      }
    } else if (flag === "--clients") args.clients = Number(value);
    else if (flag === "--timeout") args.timeout = Number(value);
    else if (flag === "--max-seconds") args.maxSeconds = Number(value);
    else throw new Error(`unknown option ${flag}`);
  }
  for (const required of ["system", "url", "workload", "n"]) {
    if (args[required] === undefined) throw new Error(`--${required} is required`);
  }
  for (const w of args.workload) {
    if (!WORKLOADS.includes(w)) throw new Error(`unknown workload ${w}; one of ${WORKLOADS}`);
    if (!(args.n[w] > 0)) throw new Error(`--n gives no size for ${w}`);
  }
  return args;
}

/** Python's statistics.quantiles(values, n=100, method="inclusive") at `cuts`, in ms. */
function ms(values, ...cuts) {
  if (values.length < 2) return cuts.map(() => (values.length ? values[0] : NaN));
  const sorted = [...values].sort((a, b) => a - b);
  const m = sorted.length - 1;
  return cuts.map((c) => {
    const pos = (m * c) / 100;
    const j = Math.floor(pos);
    const delta = pos - j;
    return j + 1 < sorted.length ? sorted[j] * (1 - delta) + sorted[j + 1] * delta : sorted[j];
  });
}

const clock = () => performance.now(); // milliseconds
const turn = () => new Promise((resolve) => setImmediate(resolve));

// -- the lock clients: { session(): { acquire(key), release(handle), close() }, close() }

async function tenureClient(url, timeoutMs) {
  const { connect, AlreadyExistsError } = await import("tenure-client");
  const client = await connect(url);
  try {
    await client.createNode(NODE);
  } catch (error) {
    if (!(error instanceof AlreadyExistsError)) throw error;
  }
  return {
    async session() {
      const session = await client.session(NODE);
      return {
        acquire: (key) => session.mutex(key).lock({ timeout: timeoutMs }),
        release: (lease) => lease.release(),
        close: () => session.close(),
      };
    },
    close: () => client.close(),
  };
}

async function effectRedisClient(url, push) {
  const { Effect, ManagedRuntime } = await import("effect");
  const { DistributedSemaphore, RedisBacking } = await import("effect-distributed-lock");
  const { Redis } = await import("ioredis");
  const redis = new Redis(url, { lazyConnect: true });
  await redis.connect();
  const runtime = ManagedRuntime.make(RedisBacking.layer(redis, { keyPrefix: "bench:", pushBasedAcquireEnabled: push }));
  return {
    async session() {
      // withPermits holds for the duration of an effect: the pair is one run, whose
      // critical section (`inside`) the workload gives; acquire/release are not apart.
      return {
        pair: (key, inside) =>
          runtime.runPromise(
            Effect.flatMap(DistributedSemaphore.make(key, { limit: 1 }), (sem) =>
              Effect.promise(inside).pipe(sem.withPermits(1)),
            ),
          ),
        close: async () => {},
      };
    },
    async close() {
      await runtime.dispose();
      await redis.quit();
    },
  };
}

/** One acquire + release of `key`, running `inside` while holding. */
async function pair(session, key, inside) {
  if (session.pair) return session.pair(key, inside);
  const handle = await session.acquire(key);
  try {
    await inside();
  } finally {
    await session.release(handle);
  }
}

const nothing = async () => {};

// -- the workloads -----------------------------------------------------------------

async function warmUp(sessions, pairs, prefix) {
  await Promise.all(
    sessions.map(async (s, index) => {
      for (let i = 0; i < pairs; i++) await pair(s, `${prefix}-w${index}-${i}`, nothing);
    }),
  );
}

async function seq(client, load) {
  const session = await client.session();
  await warmUp([session], 50, load.prefix);
  const pairs = [];
  const cpuBefore = process.cpuUsage();
  const started = clock();
  const deadline = started + load.seconds * 1e3;
  for (let i = 0; i < load.n && clock() < deadline; i++) {
    const t0 = clock();
    await pair(session, `${load.prefix}-${i}`, nothing);
    pairs.push(clock() - t0);
  }
  const elapsed = (clock() - started) / 1e3;
  const cpu = process.cpuUsage(cpuBefore);
  await session.close();
  const [p50, p99] = ms(pairs, 50, 99);
  return [
    ["done", pairs.length, "pairs"],
    ["pairs_per_s", pairs.length / elapsed, "pairs/s"],
    ["pair_p50_ms", p50, "ms"],
    ["pair_p99_ms", p99, "ms"],
    ["client_cpu_us", (cpu.user + cpu.system) / pairs.length, "µs/pair"],
  ];
}

async function sessionsOf(client, count) {
  return Promise.all(Array.from({ length: count }, () => client.session()));
}

async function par(client, load) {
  const sessions = await sessionsOf(client, load.clients);
  await warmUp(sessions, 2, load.prefix);
  const pairs = [];
  const started = clock();
  const deadline = started + load.seconds * 1e3;
  await Promise.all(
    sessions.map(async (session, index) => {
      for (let i = index; i < load.n && clock() < deadline; i += load.clients) {
        const t0 = clock();
        await pair(session, `${load.prefix}-${i}`, nothing);
        pairs.push(clock() - t0);
      }
    }),
  );
  const elapsed = (clock() - started) / 1e3;
  await Promise.all(sessions.map((s) => s.close()));
  const [p50, p99] = ms(pairs, 50, 99);
  return [
    ["done", pairs.length, "pairs"],
    ["pairs_per_s", pairs.length / elapsed, "pairs/s"],
    ["p50_ms", p50, "ms"],
    ["p99_ms", p99, "ms"],
  ];
}

function jain(counts) {
  const total = counts.reduce((a, b) => a + b, 0);
  const squares = counts.reduce((a, b) => a + b * b, 0);
  return squares ? (total * total) / (counts.length * squares) : NaN;
}

/** Per grant: how many grants of waits that began later came before it (lockload's). */
function overtakes(grants) {
  const byStart = [...grants].sort((a, b) => a.from - b.from);
  return byStart.map((g, i) => {
    let ahead = 0;
    for (const h of byStart.slice(i + 1)) {
      if (h.from >= g.at) break;
      if (h.at < g.at) ahead++;
    }
    return ahead;
  });
}

async function cont(client, load) {
  const sessions = await sessionsOf(client, load.clients);
  await warmUp(sessions, 1, load.prefix);
  const key = `${load.prefix}-cont`;
  const grants = [];
  const holder = [];
  const started = clock();
  const deadline = started + load.seconds * 1e3;
  await Promise.all(
    sessions.map(async (session, index) => {
      while (grants.length < load.n && clock() < deadline) {
        const from = clock();
        await pair(session, key, async () => {
          grants.push({ client: index, from, at: clock() });
          if (holder.length) throw new Error(`clients ${holder[0]} and ${index} hold ${key} at once`);
          holder.push(index);
          await turn(); // let the other workers run while this one holds
          holder.pop();
        });
      }
    }),
  );
  await Promise.all(sessions.map((s) => s.close()));
  const ats = grants.map((g) => g.at).sort((a, b) => a - b);
  const n = Math.min(load.n, ats.filter((at) => at < deadline).length) || grants.length;
  const elapsed = (ats[n - 1] - started) / 1e3;
  const counts = new Array(load.clients).fill(0);
  for (const g of grants) counts[g.client]++;
  const [w50, w99] = ms(grants.map((g) => g.at - g.from), 50, 99);
  const overtaken = overtakes(grants);
  return [
    ["done", n, "grants"],
    ["grants_per_s", n / elapsed, "grants/s"],
    ["wait_p50_ms", w50, "ms"],
    ["wait_p99_ms", w99, "ms"],
    ["jain", jain(counts), "index"],
    ["max_overtaken", Math.max(...overtaken), "grants"],
    ["overtaken_share", overtaken.filter((o) => o).length / overtaken.length, "fraction"],
  ];
}

const RUN = { seq, par, cont };

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const timer = setTimeout(() => {
    process.stderr.write(`timeout: the run took more than ${args.timeout}s\n`);
    process.exit(2);
  }, args.timeout * 1e3);
  let client;
  if (args.system === "js-tenure") client = await tenureClient(args.url, args.timeout * 1e3);
  else if (args.system === "js-effect-redis") client = await effectRedisClient(args.url, true);
  else if (args.system === "js-effect-redis-poll") client = await effectRedisClient(args.url, false);
  else throw new Error(`unknown system ${args.system}; js-tenure, js-effect-redis(-poll)`);
  const measures = [];
  try {
    for (const workload of args.workload) {
      const prefix = `b${randomUUID().slice(0, 8)}`; // fresh keys per repeat
      const load = { n: args.n[workload], clients: args.clients, prefix, seconds: args.maxSeconds };
      const outcome = await RUN[workload](client, load);
      const done = outcome.find(([metric]) => metric === "done")[1];
      let note = `node ${process.version}`;
      if (done < load.n) note = `quick mode: at most ${args.maxSeconds} s per repeat; ${note}`;
      for (const [metric, value, unit] of outcome) {
        if (metric === "done") continue;
        measures.push({ workload, system: args.system, metric, value, unit, samples: [value], note });
      }
    }
  } finally {
    await client.close();
  }
  clearTimeout(timer);
  // NaN and Infinity as strings: Python's float() reads them back (JSON has no NaN).
  const finite = (_key, v) => (typeof v === "number" && !Number.isFinite(v) ? String(v) : v);
  process.stdout.write(JSON.stringify(measures, finite) + "\n");
  process.exit(0); // any handle left (a subscriber's socket closing) must not hold the run
}

main().catch((error) => {
  process.stderr.write(`${error?.stack ?? error}\n`);
  process.exit(1);
});
