/**
 * A hold's hand-off on the wire (docs/protocol.md, section 6: OfferHold and
 * AdoptHold, protocol version 7), as Python's `tenure.backends._engine_handoffs`
 * sends them: the offer carries only the SHA-256 digest of the secret, the adoption
 * the secret itself. The session keeps the leases; these are its calls.
 */
import { commands } from "./commands.js";
import { DisconnectedError, LeaseLostError, NotFoundError, UnsupportedError } from "./errors.js";
import { digestOf, formatHandoff, type Handoff } from "./handoff.js";
import { GRANTED, readAcquireResult } from "./replies.js";
import type { WireCommand } from "./codec.js";

/** What the calls need of a session. */
export interface HandoffSession {
  readonly node: string;
  readonly sessionId: number;
  /** The protocol version its link speaks. */
  readonly protocolVersion: number;
  /** Send `command` once attached; again after a lost connection if `retry`. */
  call(command: WireCommand, retry?: boolean): Promise<unknown>;
}

/** The hold as the server answered: its token and count. */
export interface Adopted {
  readonly token: bigint;
  readonly count: bigint;
}

/** UnsupportedError unless the link speaks protocol version 7 (OfferHold, AdoptHold). */
export function requireHandoffs(session: HandoffSession): void {
  if (session.protocolVersion < 7) {
    throw new UnsupportedError(`hand-offs need protocol version 7; this server speaks ${session.protocolVersion}`);
  }
}

/** OfferHold: hold `hold` of `name` offered with `secret`'s digest; the hand-off string. */
export async function offerHold(session: HandoffSession, name: string, hold: number, secret: Uint8Array): Promise<string> {
  requireHandoffs(session);
  let value: unknown;
  try {
    // Sending it again after a lost answer is harmless: the same offer, kept once.
    value = await session.call(commands.offerHold(session.sessionId, name, digestOf(secret), hold));
  } catch (error) {
    if (error instanceof NotFoundError) throw new LeaseLostError(`the hold on ${name} cannot be handed off: it is no longer held`);
    throw error;
  }
  const offered = readAcquireResult(value);
  if (offered.status !== GRANTED || offered.token === null) {
    throw new LeaseLostError(`the hold on ${name} cannot be handed off: it is no longer held`);
  }
  const handoff: Handoff = { scheme: "tenure", node: session.node, name, holder: session.sessionId, holderHold: hold, token: offered.token, secret };
  return formatHandoff(handoff);
}

/**
 * AdoptHold: `handoff`'s hold taken over as this session's hold `hold`. Never sent
 * again after a lost answer (a second would find the hold adopted already): a
 * `DisconnectedError` (an `UnavailableError`) says it may or may not have been
 * applied; if it was, the session's re-attach finds a hold nobody asked for and
 * releases it.
 */
export async function adoptHold(session: HandoffSession, handoff: Handoff, hold: number): Promise<Adopted> {
  requireHandoffs(session);
  const command = commands.adoptHold({
    sessionId: session.sessionId,
    name: handoff.name,
    holder: handoff.holder,
    holderHold: handoff.holderHold,
    token: handoff.token,
    secret: handoff.secret,
    hold,
  });
  let value: unknown;
  try {
    value = await session.call(command, false);
  } catch (error) {
    if (error instanceof DisconnectedError) {
      throw new DisconnectedError(`the adoption of the hold on ${handoff.name} may or may not have been applied: ${error.message}`);
    }
    throw error;
  }
  const adopted = readAcquireResult(value);
  if (adopted.status !== GRANTED || adopted.token === null) {
    throw new LeaseLostError(`the hold on ${handoff.name} was not adopted`);
  }
  return { token: adopted.token, count: adopted.count };
}
