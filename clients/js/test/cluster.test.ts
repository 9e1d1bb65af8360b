/**
 * A JS holder through a three-member cluster's failover: etcd and three
 * `tenure serve --cluster` members (leases of 2 s); the leader is killed with
 * SIGKILL while a JS client holds a lock and another waits. The hold survives on the
 * new leader (same session, same token), and tokens never go back. Without etcd the
 * test skips, saying so, and fails under `CI=true`.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { connect } from "../src/index.js";
import { etcdUnavailable, startCluster, type Cluster } from "../src/testing.js";
import { waiters } from "./helpers.js";

const missing = etcdUnavailable();
let cluster: Cluster | undefined;

before(async () => {
  if (missing === null) cluster = await startCluster(3);
});

after(async () => {
  await cluster?.stop();
});

test("a lock held through the leader's SIGKILL stays held, and the next tokens are greater", { timeout: 90_000 }, async (t) => {
  if (missing !== null) {
    if (process.env["CI"] === "true") assert.fail(`${missing} (CI=true: a missing etcd is a failure, never a skip)`);
    t.skip(missing);
    return;
  }
  const holderClient = await connect(cluster!.url);
  const waiterClient = await connect(cluster!.url);
  try {
    await holderClient.createNode("failover");
    const holder = await holderClient.session("failover", { recoveryWindow: 20_000 });
    const lock = await holder.mutex("job").lock();
    const waiter = await waiterClient.session("failover", { recoveryWindow: 20_000 });
    const waiting = waiter.mutex("job").lock();
    await waiters(holder.semaphore("job"), 1);

    const old = await cluster!.leader();
    await old.kill();
    const next = await cluster!.leader(old);
    assert.notEqual(next, old);

    // Through the new leader: the same session holds the same grant, the waiter waits.
    const state = await holder.semaphore("job").describe({ owners: true, waiters: true });
    assert.deepEqual(state.owners.map((o) => [o.sessionId, o.token]), [[holder.sessionId, lock.token]]);
    assert.deepEqual(state.waiters.map((w) => w.sessionId), [waiter.sessionId]);
    assert.equal(lock.signal.aborted, false);
    const other = await holder.mutex("other").lock();
    assert.ok(other.token > lock.token);
    await lock.release();
    const granted = await waiting;
    assert.ok(granted.token > other.token);
    await granted.release();
    await other.release();
  } finally {
    await holderClient.close();
    await waiterClient.close();
  }
});
