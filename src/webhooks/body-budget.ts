/**
 * The bytes of request bodies held at once, over every connection. A body takes its
 * room chunk by chunk as it arrives, never from the length it declares: a sender that
 * announces 256 KiB and sends a byte holds one byte.
 *
 * When bytes find the budget full, the body that has been arriving the longest (at
 * least `evictAfterMs`) is evicted to make room: senders that send most of a body and
 * then stall can fill the budget, but not keep it, so a delivery that comes whole is
 * still read. Only while every body in the budget is younger than that, or whole and
 * being answered, are the new bytes refused.
 */
export interface BodyBudget {
  /** Opens the account of a body about to be read; `evict` tells its reader that its room is gone. */
  open(evict: () => void): BodyAccount;
  /** Bytes held now. */
  held(): number;
}

export interface BodyAccount {
  /** Takes room for `bytes`, evicting older bodies if need be; false, taking nothing, when there is none. */
  reserve(bytes: number): boolean;
  /** The body is whole: it keeps its room until released, and is no longer evicted. */
  complete(): void;
  /** Gives back all the room it took. Safe to call twice. */
  release(): void;
}

export interface BodyBudgetOptions {
  /** The most bytes held at once. */
  maxBytes: number;
  /** How long a body must have been arriving before it can be evicted, in ms. */
  evictAfterMs: number;
  /** Milliseconds, monotonic. Default performance.now. */
  now?: () => number;
}

interface Reading {
  started: number;
  held: number;
  evict: () => void;
}

export function bodyBudget(opts: BodyBudgetOptions): BodyBudget {
  const now = opts.now ?? (() => performance.now());
  let held = 0;
  /** Bodies still arriving, in the order they started: the first is the oldest. */
  const reading = new Set<Reading>();

  /** The oldest body still arriving, other than `self`, if it has been arriving long enough. */
  const evictable = (self: Reading): Reading | undefined => {
    for (const r of reading) {
      if (r === self) continue;
      return now() - r.started >= opts.evictAfterMs ? r : undefined;
    }
    return undefined;
  };

  return {
    open(evict) {
      const self: Reading = { started: now(), held: 0, evict };
      reading.add(self);
      return {
        reserve(bytes) {
          while (held + bytes > opts.maxBytes) {
            const victim = evictable(self);
            if (!victim) return false;
            // Its room is freed here, whatever its reader does when told.
            reading.delete(victim);
            held -= victim.held;
            victim.held = 0;
            victim.evict();
          }
          held += bytes;
          self.held += bytes;
          return true;
        },
        complete() {
          reading.delete(self);
        },
        release() {
          reading.delete(self);
          held -= self.held;
          self.held = 0;
        },
      };
    },
    held: () => held,
  };
}
