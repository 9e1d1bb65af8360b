/**
 * The JavaScript side of tests/js_client/test_js_client.py's cross-language test:
 * `node dist/test/cross_waiter.js URL NODE NAME` queues for the mutex NAME, says so,
 * holds it when granted until told `release` on stdin, then releases it. Each step is
 * one JSON line on stdout (tokens as decimal strings: they are uint64).
 */
import { createInterface } from "node:readline";
import { connect } from "../src/index.js";

const [url, node, name] = process.argv.slice(2) as [string, string, string];
const say = (event: Record<string, unknown>): void => {
  process.stdout.write(`${JSON.stringify(event)}\n`);
};
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();

const client = await connect(url, { name: "cross-waiter" });
const session = await client.session(node, { description: "js waiter" });
say({ event: "session", id: session.sessionId });
const granted = session.mutex(name).lock();
say({ event: "asked" });
const lock = await granted;
say({ event: "granted", token: lock.token.toString() });
const order = await lines.next();
if (order.value !== "release") throw new Error(`expected "release", got ${String(order.value)}`);
await lock.release();
say({ event: "released" });
await client.close();
say({ event: "done" });
process.exit(0);
