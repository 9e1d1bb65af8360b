/**
 * The JavaScript side of tests/js_client/test_js_client.py's hand-off tests:
 * `node dist/test/handoff_peer.js URL NODE adopt` reads a hand-off string (Python's
 * `lease.handoff()`) on stdin and adopts it; `... offer NAME` takes a permit of the
 * semaphore NAME (owner data `from-js`), hands it off, and says when its lease is lost
 * (adopted by Python). Either holds until told `release`. One JSON line a step
 * (tokens as decimal strings: they are uint64).
 */
import { createInterface } from "node:readline";
import { connect, type Lease } from "../src/index.js";

const [url, node, mode, name] = process.argv.slice(2) as [string, string, "adopt" | "offer", string | undefined];
const say = (event: Record<string, unknown>): void => {
  process.stdout.write(`${JSON.stringify(event)}\n`);
};
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const client = await connect(url, { name: "handoff-peer" });
const session = await client.session(node, { description: "js hand-off peer" });
say({ event: "session", id: session.sessionId });

let lease: Lease;
if (mode === "adopt") {
  const text = (await lines.next()).value as string;
  lease = await session.adopt(text);
  say({ event: "adopted", token: lease.token.toString(), count: lease.count.toString(), name: lease.name });
} else {
  lease = await session.semaphore(name!).acquire({ data: new TextEncoder().encode("from-js") });
  const text = await lease.handoff();
  lease.signal.addEventListener("abort", () => say({ event: "lost", reason: String((lease.signal.reason as Error).name), message: (lease.signal.reason as Error).message }));
  say({ event: "offered", text, token: lease.token.toString() });
}
const order = await lines.next();
if (order.value !== "release") throw new Error(`expected "release", got ${String(order.value)}`);
await lease.release();
say({ event: "released" });
await client.close();
process.exit(0);
