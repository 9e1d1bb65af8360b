/**
 * Claims, as Python's `session.claim(name, at_least, at_most)`: a name taken once per
 * slot, held at least `atLeast` and at most `atMost` ms of the server's clock, not
 * tied to the session that took it; released by its id from any process
 * (`claim.release()`, or `client.releaseClaim(node, name, id)`). Needs protocol
 * version 6 (docs/protocol.md: ClaimName, ReleaseClaim).
 */
import { randomBytes } from "node:crypto";
import { commands } from "./commands.js";
import { readBool, readClaimRecord, type ClaimRecord } from "./replies.js";
import { DisconnectedError, UnsupportedError } from "./errors.js";

/** What a claim needs of the client: a request over the link, and its version. */
export interface ClaimLink {
  readonly protocolVersion: number;
  request(command: readonly unknown[]): Promise<unknown>;
}

/** A granted claim of `name` in `node`. */
export class Claim implements AsyncDisposable {
  constructor(
    private readonly link: ClaimLink,
    /** The node it lives in. */
    readonly node: string,
    /** The claimed name. */
    readonly name: string,
    /** What the server holds of it: id, token, times, data. */
    readonly record: ClaimRecord,
  ) {}

  /** Its id: what `client.releaseClaim` takes, from any process. */
  get id(): string {
    return this.record.id;
  }

  /** Its fencing token: greater than every grant's before it. */
  get token(): bigint {
    return this.record.token;
  }

  /** Release it: it ends at the later of now and `atLeast` after its grant. Whether it shortened a live claim. */
  async release(): Promise<boolean> {
    return releaseClaim(this.link, this.node, this.name, this.id);
  }

  /** `await using claim = ...` releases it. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.release();
  }
}

/** Release the claim `id` of `name` in `node`; whether it shortened a live claim. */
export async function releaseClaim(link: ClaimLink, node: string, name: string, id: string): Promise<boolean> {
  requireClaims(link);
  for (;;) {
    try {
      return readBool(await link.request(commands.releaseClaim(node, name, id)), "ReleaseClaim");
    } catch (error) {
      if (!(error instanceof DisconnectedError)) throw error; // sent again: a release is idempotent
    }
  }
}

/** Claim `name`: the claim, or null if another holds it. A retry after a lost answer is the same claim. */
export async function claimName(
  link: ClaimLink,
  call: (command: readonly unknown[]) => Promise<unknown>,
  node: string,
  sessionId: number,
  name: string,
  options: { atLeast: number; atMost: number; data?: Uint8Array },
): Promise<Claim | null> {
  requireClaims(link);
  const id = randomBytes(16).toString("hex");
  const command = commands.claimName(sessionId, name, id, options.atLeast, options.atMost, options.data ?? new Uint8Array(0));
  const record = readClaimRecord(await call(command));
  return record.id === id ? new Claim(link, node, name, record) : null;
}

function requireClaims(link: ClaimLink): void {
  if (link.protocolVersion < 6) {
    throw new UnsupportedError(`claims need protocol version 6; this server speaks ${link.protocolVersion}`);
  }
}
