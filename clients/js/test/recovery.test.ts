/**
 * A session across a lost connection (docs/protocol.md, section 11), against a real
 * `tenure serve`: within its window it re-attaches and keeps its holds; past it, its
 * leases' signals fire and the next waiter is served with a greater token. Also the
 * ways in: a token of an auth file (`?token=`), and `tenures://` with a CA.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AuthenticationError, LostError, SessionClosedError, SessionExpiredError, connect, type Client } from "../src/index.js";
import { startServer, type Server } from "../src/testing.js";
import { unique, until, waiters } from "./helpers.js";

let server: Server;
let client: Client;
let observer: Client;

before(async () => {
  server = await startServer();
  client = await connect(server.url);
  observer = await connect(server.url);
});

after(async () => {
  await client?.close();
  await observer?.close();
  await server?.stop();
});

test("a lost connection within the window: the session re-attaches and keeps its hold", async () => {
  const n = unique("node");
  await client.createNode(n);
  const holder = await client.session(n, { recoveryWindow: 10_000 });
  const lock = await holder.mutex("kept").lock();
  const other = await observer.session(n);
  const waiting = other.mutex("kept").lock();
  await waiters(other.semaphore("kept"), 1);
  for (let drop = 0; drop < 3; drop += 1) {
    client.dropConnection();
    // Requests wait for the re-attach, then go on: the hold is the same grant.
    const state = await holder.semaphore("kept").describe({ owners: true, waiters: true });
    assert.deepEqual(state.owners.map((o) => [o.sessionId, o.token]), [[holder.sessionId, lock.token]]);
    assert.equal(state.waiters.length, 1);
  }
  assert.equal(lock.signal.aborted, false);
  assert.equal(holder.signal.aborted, false);
  await lock.release();
  const next = await waiting;
  assert.ok(next.token > lock.token);
  await next.release();
  await holder.close();
  await other.close();
});

test("an acquire whose answer was lost with its connection is settled on re-attach", async () => {
  const n = unique("node");
  await client.createNode(n);
  const waiter = await client.session(n, { recoveryWindow: 10_000 });
  const holder = await observer.session(n);
  const first = await holder.mutex("settled").lock();
  const waiting = waiter.mutex("settled").lock();
  await waiters(holder.semaphore("settled"), 1);
  client.dropConnection(); // the Granted push may now come on the next connection only
  await first.release();
  const lease = await waiting;
  assert.ok(lease.token > first.token);
  const state = await holder.semaphore("settled").describe({ owners: true });
  assert.deepEqual(state.owners.map((o) => o.token), [lease.token]);
  await lease.release();
  await waiter.close();
  await holder.close();
});

test("past the window the lease's signal fires, and the next waiter gets a greater token", async () => {
  // Its own server: stopped (SIGSTOP) for longer than the window, so that neither the
  // client nor the server hears from the other; then resumed (SIGCONT).
  const lone = await startServer();
  const holderClient = await connect(lone.url);
  const waiterClient = await connect(lone.url);
  try {
    const n = unique("node");
    await holderClient.createNode(n);
    const holder = await holderClient.session(n, { recoveryWindow: 1_500 });
    const lock = await holder.mutex("lost").lock();
    const waiter = await waiterClient.session(n, { recoveryWindow: 30_000 });
    const next = waiter.mutex("lost").lock();
    await waiters(waiter.semaphore("lost"), 1);
    lone.process.kill("SIGSTOP");
    try {
      await until(() => lock.signal.aborted, "the lease's signal fired", 20_000);
    } finally {
      lone.process.kill("SIGCONT");
    }
    assert.ok(lock.signal.reason instanceof LostError);
    assert.ok(holder.signal.reason instanceof SessionExpiredError);
    assert.equal(lock.lostReason, lock.signal.reason);
    const lease = await next;
    assert.ok(lease.token > lock.token, `${lease.token} after ${lock.token}`);
    await lease.release();
  } finally {
    await holderClient.close();
    await waiterClient.close();
    await lone.stop();
  }
});

test("?token= reaches a server with an auth file; a wrong one is AuthenticationError", async () => {
  const dir = mkdtempSync(join(tmpdir(), "tenure-js-auth-"));
  const auth = join(dir, "auth.toml");
  writeFileSync(auth, '[[token]]\nname = "js"\nsecret = "js-secret-1"\naccess = "read-write"\n');
  const guarded = await startServer(["--auth-file", auth]);
  try {
    await assert.rejects(connect(`${guarded.url}?token=wrong`), AuthenticationError);
    await assert.rejects(connect(guarded.url), AuthenticationError);
    const authed = await connect(`${guarded.url}?token=js-secret-1`);
    await authed.createNode(unique("node"));
    await authed.close();
  } finally {
    await guarded.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("tenures:// with a CA (?ca= or the ca option) speaks TLS to the server", async () => {
  const dir = mkdtempSync(join(tmpdir(), "tenure-js-tls-"));
  const [cert, key] = [join(dir, "cert.pem"), join(dir, "key.pem")];
  execFileSync("openssl", [
    "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
    "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=localhost",
    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
  ], { stdio: "ignore" });
  const secure = await startServer(["--tls-cert", cert, "--tls-key", key]);
  try {
    const byQuery = await connect(`tenures://localhost:${secure.port}?ca=${cert}`);
    const n = unique("node");
    await byQuery.createNode(n);
    const session = await byQuery.session(n);
    const lock = await session.mutex("over-tls").lock();
    assert.ok(lock.token > 0n);
    await byQuery.close();
    const byOption = await connect(`tenures://localhost:${secure.port}`, { ca: cert });
    assert.equal((await byOption.describeNode(n)).name, n);
    await byOption.close();
    // Without the CA the self-signed certificate is not trusted.
    await assert.rejects(connect(`tenures://localhost:${secure.port}`), /certificate/);
  } finally {
    await secure.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("closing a client whose server is gone ends its sessions at once", { timeout: 30_000 }, async () => {
  const lone = await startServer();
  const gone = await connect(lone.url);
  const n = unique("node");
  await gone.createNode(n);
  const attached = await gone.session(n, { recoveryWindow: 120_000 });
  await lone.kill(); // the session is left waiting to re-attach, far within its window
  await gone.close();
  assert.ok(attached.signal.reason instanceof SessionClosedError);
  await lone.stop();
});

test("an acquire asked while the connection is down is sent once, and queues in its turn", async () => {
  const n = unique("node");
  await client.createNode(n);
  const holder = await observer.session(n);
  const first = await holder.mutex("once").lock();
  const session = await client.session(n, { recoveryWindow: 10_000 });
  client.dropConnection();
  const waiting = session.mutex("once").lock(); // sent once re-attached, and only once
  await waiters(holder.semaphore("once"), 1);
  await first.release();
  const lease = await waiting;
  assert.ok(lease.token > first.token);
  await lease.release();
  await session.close();
  await holder.close();
});
