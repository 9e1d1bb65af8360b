/**
 * The JavaScript side of tests/js_client/test_js_client.py's ticket test: `node
 * dist/test/ticket_holder.js URL NODE` locks the mutex `handed`, prints its session's
 * ticket and the lock's token as one JSON line, and exits without closing anything,
 * as a crashed process would: the session waits out its window for a resume.
 */
import { connect } from "../src/index.js";

const [url, node] = process.argv.slice(2) as [string, string];
const client = await connect(url, { name: "ticket-holder" });
const session = await client.session(node, { recoveryWindow: 30_000 });
const lock = await session.mutex("handed").lock();
process.stdout.write(`${JSON.stringify({ event: "held", ticket: session.ticket(), token: lock.token.toString(), session: session.sessionId })}\n`);
process.exit(0);
