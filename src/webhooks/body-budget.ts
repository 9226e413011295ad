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
 *
 * Bodies from a sender whose last delivery failed its signature (`suspect`) are read
 * last: together they hold at most `suspectShare` of the budget, and any other body may
 * take their room whatever their age. So a flood of bodies under a fresh-looking wrong
 * signature cannot crowd out deliveries that can be verified.
 */
export interface BodyBudget {
  /**
   * Opens the account of a body about to be read; `evict` tells its reader that its room
   * is gone. `suspect`: its sender's last delivery failed its signature.
   */
  open(evict: () => void, suspect?: boolean): BodyAccount;
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
  /** The most of `maxBytes` that suspect senders' bodies hold together. Default 0.25. */
  suspectShare?: number;
  /** Milliseconds, monotonic. Default performance.now. */
  now?: () => number;
}

interface Reading {
  started: number;
  held: number;
  suspect: boolean;
  evict: () => void;
}

export function bodyBudget(opts: BodyBudgetOptions): BodyBudget {
  const now = opts.now ?? (() => performance.now());
  const suspectMax = opts.maxBytes * (opts.suspectShare ?? 0.25);
  let held = 0;
  let suspectHeld = 0;
  /** Bodies still arriving, in the order they started: the first is the oldest. */
  const reading = new Set<Reading>();

  /**
   * The body that gives up its room to `self`: the oldest suspect one still arriving, when
   * `self` is not suspect; else the oldest one of all, if it has been arriving long enough.
   */
  const evictable = (self: Reading): Reading | undefined => {
    if (!self.suspect) {
      for (const r of reading) if (r !== self && r.suspect) return r;
    }
    for (const r of reading) {
      if (r === self) continue;
      return now() - r.started >= opts.evictAfterMs ? r : undefined;
    }
    return undefined;
  };

  const take = (r: Reading, bytes: number): void => {
    held += bytes;
    r.held += bytes;
    if (r.suspect) suspectHeld += bytes;
  };
  const giveBack = (r: Reading): void => {
    held -= r.held;
    if (r.suspect) suspectHeld -= r.held;
    r.held = 0;
  };

  return {
    open(evict, suspect = false) {
      const self: Reading = { started: now(), held: 0, suspect, evict };
      reading.add(self);
      return {
        reserve(bytes) {
          if (self.suspect && suspectHeld + bytes > suspectMax) return false;
          while (held + bytes > opts.maxBytes) {
            const victim = evictable(self);
            if (!victim) return false;
            // Its room is freed here, whatever its reader does when told.
            reading.delete(victim);
            giveBack(victim);
            victim.evict();
          }
          take(self, bytes);
          return true;
        },
        complete() {
          reading.delete(self);
        },
        release() {
          reading.delete(self);
          giveBack(self);
        },
      };
    },
    held: () => held,
  };
}
