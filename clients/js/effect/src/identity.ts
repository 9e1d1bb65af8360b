/**
 * What a holder's identifier (effect-distributed-lock's `identifier`, a random UUID
 * unless the caller gives one) becomes in tenure: the owner data of its hold (the
 * identifier itself, as the Redis backing's keys show it), the hold numbers it is
 * taken under, and the secret its hold is offered for adoption with. All three are
 * derived from the identifier alone, so another process that knows it (a process
 * restarted after a crash, or the one it was handed to) finds the hold and adopts
 * it: `acquiredExternally`.
 */
import { createHash } from "node:crypto";

/** How many hold numbers an identifier may be taken under (the first free one is). */
export const HOLD_CANDIDATES = 4;

const utf8 = new TextEncoder();
const HOLD_LABEL = "tenure-effect-distributed-lock hold\u0000";
const SECRET_LABEL = "tenure-effect-distributed-lock hand-off\u0000";

/** The owner data of the identifier's hold: its UTF-8 bytes. */
export function ownerData(identifier: string): Uint8Array {
  return utf8.encode(identifier);
}

/** Whether `data` is the owner data of `identifier`. */
export function isOwnerData(data: Uint8Array, identifier: string): boolean {
  return Buffer.compare(Buffer.from(data), Buffer.from(ownerData(identifier))) === 0;
}

/**
 * The hold numbers the identifier's hold is taken under, in order: a session takes
 * the first it does not use already (two identifiers of one session on one semaphore
 * share the first with odds of 1 in 2^32), and an adopter tries them in this order.
 */
export function holdCandidates(identifier: string): number[] {
  const digest = createHash("sha256").update(HOLD_LABEL).update(identifier, "utf8").digest();
  const holds: number[] = [];
  // Each a uint32: the protocol's range of hold numbers (0 to 2^32 - 1).
  for (let i = 0; i < HOLD_CANDIDATES; i += 1) holds.push(digest.readUInt32BE(4 * i));
  return holds;
}

/** The secret the identifier's hold on semaphore `name` is offered with (32 bytes). */
export function handoffSecret(name: string, identifier: string): Uint8Array {
  const digest = createHash("sha256").update(SECRET_LABEL).update(name, "utf8").update("\u0000").update(identifier, "utf8").digest();
  return new Uint8Array(digest);
}
