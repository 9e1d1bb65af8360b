/**
 * The request deadline (src/deadline.ts) against a server that answers pings but not
 * (some) requests: what hung for ever now settles with a `RequestTimeoutError` and a
 * new connection, while a wait in a queue outlives any number of deadlines.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { performance } from "node:perf_hooks";
import {
  DEFAULT_REQUEST_TIMEOUT,
  InvalidArgumentError,
  MAX_COUNT,
  RequestTimeoutError,
  connect,
  parseUrl,
  type Lease,
} from "../src/index.js";
import { startSilentServer, within, type Received } from "./silent_server.js";
import { until } from "./helpers.js";

/** The deadline of these tests' clients, ms: short, so that a test takes little time. */
const DEADLINE = 1_000;
/** How long anything may take before it counts as a hang (a bound, not a measurement). */
const HANG = 20_000;
const SESSION_ID = 7;

/** What a working server replies to a session's own commands (its re-attach, its Release). */
function sessionReplies(command: readonly unknown[]): unknown {
  switch (command[0]) {
    case 10: // CreateSession: SessionInfo
      return [1, SESSION_ID, 30.0, 1];
    case 11: // AttachSession: SessionInfo with the seq_no sent
      return [1, SESSION_ID, 30.0, command[3]];
    case 13: // CloseSession
      return null;
    case 14: // DescribeSession: holds nothing, waits for nothing, missed nothing
      return [5, SESSION_ID, [], [], [], null];
    case 22: // Release: whether there was anything
      return false;
    default:
      return undefined;
  }
}

const isRelease = (r: Received, name: string, hold: number): boolean =>
  r.command[0] === 22 && r.command[2] === name && r.command[3] === hold;

test("session() on a server that answers pings but no request rejects with a RequestTimeoutError; the connection is replaced", async () => {
  const server = await startSilentServer();
  try {
    const client = await connect(server.url, { requestTimeout: DEADLINE });
    try {
      await within(
        assert.rejects(client.session("app"), (e: unknown) => {
          assert.ok(e instanceof RequestTimeoutError);
          assert.match(e.message, new RegExp(`^no answer to CreateSession from 127\\.0\\.0\\.1:\\d+ within ${DEADLINE} ms \\(requestTimeout\\)`));
          return true;
        }),
        HANG,
        "session()",
      );
      // The next call goes on a new connection: the timeout replaced the one it was on.
      await within(assert.rejects(client.listNodes(), RequestTimeoutError), HANG, "listNodes()");
      assert.equal(server.connections, 2);
      assert.deepEqual(
        server.received.map((r) => [r.connection, r.command[0]]),
        [
          [1, 10],
          [2, 5],
        ],
      );
    } finally {
      await client.close();
    }
  } finally {
    await server.close();
  }
});

test("lock() whose Acquire goes unanswered rejects with a RequestTimeoutError; the session re-attaches and releases that hold", async () => {
  const server = await startSilentServer(sessionReplies);
  try {
    const client = await connect(server.url, { requestTimeout: DEADLINE });
    try {
      const session = await client.session("app");
      await within(assert.rejects(session.mutex("job").lock(), RequestTimeoutError), HANG, "lock()");
      // The new connection re-attached the session (it lives on) and released whatever
      // the server made of the unanswered Acquire (hold 0 of "job") before anything else.
      await until(() => server.received.some((r) => r.connection === 2 && isRelease(r, "job", 0)), "the Release of the abandoned hold", HANG);
      const second = server.received.filter((r) => r.connection === 2).map((r) => r.command[0]);
      assert.deepEqual(second.slice(0, 3), [11, 14, 22]);
      assert.equal(session.signal.aborted, false);
      await session.close();
    } finally {
      await client.close();
    }
  } finally {
    await server.close();
  }
});

test("a hold given up on stays reserved until released: a lock() asked meanwhile takes another hold, not the old grant", async () => {
  const server = await startSilentServer((command, connection) => {
    if (command[0] === 21) return connection === 1 ? undefined : [2, 0, 10n, MAX_COUNT, null]; // GRANTED, token 10
    // The server had granted the unanswered Acquire (hold 0, token 9): the re-attach reads it back.
    if (command[0] === 14) return [5, SESSION_ID, [["job", 9n, MAX_COUNT, null, 0]], [], [], null];
    return sessionReplies(command);
  });
  try {
    const client = await connect(server.url, { requestTimeout: DEADLINE });
    try {
      const session = await client.session("app");
      await within(assert.rejects(session.mutex("job").lock(), RequestTimeoutError), HANG, "lock()");
      // Asked before the re-attach (which needs a new connection: I/O this turn has not done).
      const lease = await within(session.mutex("job").lock(), HANG, "the second lock()");
      assert.deepEqual([lease.token, lease.hold], [10n, 1]);
      const second = server.received.filter((r) => r.connection === 2);
      const release = second.findIndex((r) => isRelease(r, "job", 0));
      const acquire = second.findIndex((r) => r.command[0] === 21);
      assert.ok(release >= 0 && release < acquire, JSON.stringify(second.map((r) => r.command[0])));
      assert.equal(second[acquire]!.command[9], 1);
    } finally {
      await client.close();
    }
  } finally {
    await server.close();
  }
});

test("the end of an await using block whose Release goes unanswered settles, with the RequestTimeoutError", async () => {
  const server = await startSilentServer((command) => {
    if (command[0] === 21) return [2, 0, 1n, MAX_COUNT, null]; // Acquire: GRANTED, token 1
    if (command[0] === 10) return sessionReplies(command);
    return undefined; // the Release, and the re-attach after it, never
  });
  try {
    let token: bigint | null = null;
    const block = async (): Promise<void> => {
      await using client = await connect(server.url, { requestTimeout: DEADLINE });
      await using session = await client.session("app");
      await using lock = await session.mutex("job").lock();
      token = lock.token;
    };
    await within(assert.rejects(block(), RequestTimeoutError), HANG, "the block's end");
    assert.equal(token, 1n);
    assert.ok(server.received.some((r) => isRelease(r, "job", 0)));
  } finally {
    await server.close();
  }
});

test("an aborted lock() whose CancelAcquire goes unanswered rejects with the abort's reason; the re-attach releases the hold", async () => {
  const server = await startSilentServer((command) => {
    if (command[0] === 21) return [2, 1, null, 0n, null]; // Acquire: QUEUED
    return sessionReplies(command); // CancelAcquire (23): never
  });
  try {
    const client = await connect(server.url, { requestTimeout: DEADLINE });
    try {
      const session = await client.session("app");
      const giveUp = new AbortController();
      const lock = session.mutex("job").lock({ signal: giveUp.signal });
      await until(() => server.received.some((r) => r.command[0] === 21), "the Acquire", HANG);
      giveUp.abort(new Error("gave up"));
      await within(assert.rejects(lock, /gave up/), HANG, "the aborted lock()");
      await until(() => server.received.some((r) => r.connection === 2 && isRelease(r, "job", 0)), "the Release of the abandoned hold", HANG);
      assert.ok(server.received.some((r) => r.connection === 1 && r.command[0] === 23));
      assert.equal(session.signal.aborted, false);
    } finally {
      await client.close();
    }
  } finally {
    await server.close();
  }
});

test("a re-attach whose AttachSession goes unanswered is tried again on the next connection: the session lives", async () => {
  const server = await startSilentServer((command, connection) => (command[0] === 11 && connection === 2 ? undefined : sessionReplies(command)));
  try {
    const client = await connect(server.url, { requestTimeout: DEADLINE });
    try {
      const session = await client.session("app");
      client.dropConnection(); // connection 2 leaves the AttachSession unanswered, 3 answers it
      await until(() => server.received.some((r) => r.connection === 3 && r.command[0] === 14), "the re-attach on connection 3", HANG);
      assert.ok(server.received.some((r) => r.connection === 2 && r.command[0] === 11));
      assert.equal(session.signal.aborted, false, String(session.signal.reason));
      await session.close();
      // (On connection 3, or a later one if a busy machine let a deadline pass there too.)
      assert.ok(server.received.some((r) => r.connection >= 3 && r.command[0] === 13));
    } finally {
      await client.close();
    }
  } finally {
    await server.close();
  }
});

test("a lock() waiting in the queue outlives many deadlines: the QUEUED answer ended its request", async () => {
  const server = await startSilentServer((command) => {
    if (command[0] === 21) return [2, 1, null, 0n, null]; // Acquire: QUEUED, granted later by a push
    return sessionReplies(command);
  });
  try {
    const client = await connect(server.url, { requestTimeout: DEADLINE });
    try {
      const session = await client.session("app");
      let settled = false;
      const lock: Promise<Lease> = session.mutex("job").lock();
      lock.then(
        () => (settled = true),
        () => (settled = true),
      );
      await until(() => server.received.some((r) => r.command[0] === 21), "the Acquire", HANG);
      const queuedAt = performance.now();
      // Time passing is the point here: three deadlines, each checked every 50 ms.
      await until(() => performance.now() - queuedAt >= 3 * DEADLINE, "three deadlines", HANG);
      assert.equal(settled, false);
      assert.equal(server.connections, 1);
      const acquire = server.received.find((r) => r.command[0] === 21)!.command;
      server.send([15, [1, SESSION_ID, acquire[4], "job", 5n, MAX_COUNT, null, acquire[9]]]); // Granted
      const lease = await within(lock, HANG, "the granted lock()");
      assert.equal(lease.token, 5n);
      assert.equal(server.connections, 1);
      await session.close();
    } finally {
      await client.close();
    }
  } finally {
    await server.close();
  }
});

test("request_timeout: seconds in the URL, requestTimeout ms in the options (which win), validated", async () => {
  assert.equal(DEFAULT_REQUEST_TIMEOUT, 30_000);
  assert.equal(parseUrl("tenure://h").requestTimeout, 30_000);
  assert.equal(parseUrl("tenure://h?request_timeout=2.5").requestTimeout, 2_500);
  assert.equal(parseUrl("tenure://h?request_timeout=3600").requestTimeout, 3_600_000);
  assert.equal(parseUrl("tenure://h?request_timeout=nonsense", {}, { requestTimeout: 1_000 }).requestTimeout, 1_000);
  for (const bad of ["0", "-1", "", "abc", "inf", "nan", "3601", "1e9", "0x10", "5s"]) {
    assert.throws(
      () => parseUrl(`tenure://h?token=SECRET&request_timeout=${bad}`),
      (e: unknown) => {
        assert.ok(e instanceof InvalidArgumentError);
        assert.match(e.message, /^request_timeout must be a number of seconds in \(0, 3600\]; got /);
        assert.doesNotMatch(e.message, /SECRET/);
        return true;
      },
      bad,
    );
  }
  for (const bad of [0, -5, Number.NaN, Number.POSITIVE_INFINITY, 3_600_001, "30", null]) {
    await assert.rejects(
      connect("tenure://127.0.0.1:1", { requestTimeout: bad as number }),
      (e: unknown) => {
        assert.ok(e instanceof InvalidArgumentError);
        assert.match(e.message, /^requestTimeout must be a number of milliseconds in \(0, 3600000\]; got /);
        return true;
      },
      String(bad),
    );
  }
});
