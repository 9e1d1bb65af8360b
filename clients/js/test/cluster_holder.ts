/**
 * The JavaScript side of tests/js_client/test_js_cluster.py: `node
 * dist/test/cluster_holder.js URL NODE` holds the mutex `job` of a cluster (URL lists
 * its three members) and says so; told `check` on stdin (after the test killed the
 * leader), it works on through the new leader: takes the mutex `other`, reads who
 * holds `job`, says what it saw, releases both. One JSON line per step; tokens as
 * decimal strings (uint64).
 */
import { createInterface } from "node:readline";
import { AlreadyExistsError, connect } from "../src/index.js";

const [url, node] = process.argv.slice(2) as [string, string];
const say = (event: Record<string, unknown>): void => {
  process.stdout.write(`${JSON.stringify(event)}\n`);
};
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();

const client = await connect(url, { name: "cluster-holder" });
try {
  await client.createNode(node);
} catch (error) {
  if (!(error instanceof AlreadyExistsError)) throw error;
}
const session = await client.session(node, { recoveryWindow: 20_000 });
const job = await session.mutex("job").lock();
say({ event: "granted", token: job.token.toString(), session: session.sessionId });
const order = await lines.next();
if (order.value !== "check") throw new Error(`expected "check", got ${String(order.value)}`);
const other = await session.mutex("other").lock({ timeout: 30_000 });
const owners = (await session.semaphore("job").describe({ owners: true })).owners;
say({
  event: "checked",
  other: other.token.toString(),
  jobLost: job.signal.aborted,
  sessionLost: session.signal.aborted,
  jobOwners: owners.map((o) => [o.sessionId, o.token.toString()]),
});
await other.release();
await job.release();
say({ event: "released" });
await client.close();
say({ event: "done" });
process.exit(0);
