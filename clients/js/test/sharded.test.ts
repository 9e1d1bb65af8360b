/** `?sharded=true` against two real servers: each node lives on the one its hash picks. */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { NotFoundError, connect, type Client } from "../src/index.js";
import { startServer, type Server } from "../src/testing.js";
import { unique } from "./helpers.js";

let servers: Server[];
let sharded: Client;
let direct: Client[];

before(async () => {
  servers = await Promise.all([startServer(), startServer()]);
  sharded = await connect(`tenure://${servers.map((s) => `127.0.0.1:${s.port}`).join(",")}?sharded=true`);
  direct = await Promise.all(servers.map((s) => connect(s.url)));
});

after(async () => {
  await sharded?.close();
  await Promise.all((direct ?? []).map((c) => c.close()));
  await Promise.all((servers ?? []).map((s) => s.stop()));
});

async function where(node: string): Promise<number[]> {
  const found: number[] = [];
  for (const [i, client] of direct.entries()) {
    try {
      await client.describeNode(node);
      found.push(i);
    } catch (error) {
      if (!(error instanceof NotFoundError)) throw error;
    }
  }
  return found;
}

test("each node is created on exactly one server, the nodes spread over both, and each is used there", async () => {
  const names = Array.from({ length: 16 }, () => unique("shard"));
  for (const name of names) await sharded.createNode(name);
  const homes = await Promise.all(names.map(where));
  for (const home of homes) assert.equal(home.length, 1);
  assert.deepEqual(new Set(homes.map((home) => home[0])), new Set([0, 1])); // 2^-15 to fail by chance
  const listed = await sharded.listNodes();
  for (const name of names) assert.ok(listed.includes(name));
  // A session and a lock go to the node's server.
  const name = names[0]!;
  const session = await sharded.session(name);
  const lock = await session.mutex("job").lock();
  const home = direct[homes[0]![0]!]!;
  const watcher = await home.session(name);
  const state = await watcher.semaphore("job").describe({ owners: true });
  assert.deepEqual(state.owners.map((o) => o.token), [lock.token]);
  await lock.release();
  await watcher.close();
  await session.close();
});
