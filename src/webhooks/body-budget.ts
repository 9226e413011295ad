/**
 * The bytes of request bodies held at once, over every connection. A body takes its
 * room chunk by chunk as it arrives, never from the length it declares: a sender that
 * announces 256 KiB and sends a byte holds one byte.
 */
export interface BodyBudget {
  /** Takes room for `bytes`; false, taking nothing, when they do not fit. */
  reserve(bytes: number): boolean;
  /** Gives back room taken before. */
  release(bytes: number): void;
  /** Bytes held now. */
  held(): number;
}

export function bodyBudget(maxBytes: number): BodyBudget {
  let held = 0;
  return {
    reserve(bytes) {
      if (held + bytes > maxBytes) return false;
      held += bytes;
      return true;
    },
    release(bytes) {
      held -= bytes;
    },
    held: () => held,
  };
}
