import type { BodyRoom } from '../api/http.js';

/**
 * Bytes of the feed a process holds at once, over all its lanes: the answers being read,
 * the pages fetched ahead and the loads in commits, each counted from its first byte
 * until its commit ends. A request takes what its answer really weighs (its
 * `Content-Length` once the headers are in, else its bytes as they arrive), never the
 * worst case, so lanes of ordinary pages read side by side while lanes of huge pages
 * wait their turn.
 *
 * No two requests ever wait on each other half-read: the oldest request still reading
 * may always go on as long as what the others hold is within the capacity, and what
 * they hold then is pages that their commits give back, or parts of answers taken
 * within the capacity. So the bytes held never pass the capacity plus one answer
 * (`peak` keeps the most ever held); the others take room first come, first served.
 */
export class ByteBudget {
  readonly capacity: number;
  #held = 0;
  #peak = 0;
  /** Holds still reading, in the order their requests started: the first may go on. */
  readonly #reading = new Set<PageHold>();
  readonly #waiting: Waiter[] = [];

  constructor(capacity: number) {
    this.capacity = capacity;
  }

  /** Bytes held now. */
  get held(): number {
    return this.#held;
  }

  /** The most bytes held at once since the budget was made: never past capacity plus one answer. */
  get peak(): number {
    return this.#peak;
  }

  /** Whether a request waits for room: a commit that gives some back should not wait for a fuller load. */
  get wanted(): boolean {
    return this.#waiting.length > 0;
  }

  /** The hold of a request about to be sent: it reads, and its page is held, under this budget. */
  open(): PageHold {
    const hold = new PageHold(this);
    this.#reading.add(hold);
    return hold;
  }

  /** @internal PageHold's: takes `bytes` for `hold` once they may be taken. */
  take(hold: PageHold, bytes: number, signal: AbortSignal | undefined): Promise<void> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (bytes <= 0) return Promise.resolve();
    if (this.#mayTake(hold, bytes, this.#waiting.length === 0)) {
      this.#add(hold, bytes);
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        hold,
        bytes,
        grant: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
      };
      const onAbort = () => {
        this.#waiting.splice(this.#waiting.indexOf(waiter), 1);
        reject(signal?.reason);
        // The one that left may have been what held the others back.
        this.#grant();
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#waiting.push(waiter);
    });
  }

  /** @internal PageHold's: gives back `bytes` of `hold`'s; `leave` when it reads no more. */
  give(hold: PageHold, bytes: number, leave: boolean): void {
    this.#held -= bytes;
    if (leave) this.#reading.delete(hold);
    this.#grant();
  }

  /**
   * Whether `hold` may take `bytes` now: they fit (and it is first in line), or it is the
   * oldest request reading and the others hold no more than the capacity.
   */
  #mayTake(hold: PageHold, bytes: number, firstInLine: boolean): boolean {
    if (firstInLine && this.#held + bytes <= this.capacity) return true;
    const oldest = this.#reading.values().next().value;
    return oldest === hold && this.#held - hold.bytes <= this.capacity;
  }

  #add(hold: PageHold, bytes: number): void {
    hold.bytes += bytes;
    this.#held += bytes;
    if (this.#held > this.#peak) this.#peak = this.#held;
  }

  #grant(): void {
    for (;;) {
      const at = this.#waiting.findIndex((w, i) => this.#mayTake(w.hold, w.bytes, i === 0));
      if (at < 0) return;
      const [next] = this.#waiting.splice(at, 1);
      this.#add(next!.hold, next!.bytes);
      next!.grant();
    }
  }
}

interface Waiter {
  hold: PageHold;
  bytes: number;
  grant: () => void;
}

/**
 * What one feed request holds of the budget: the room its answer takes while it is
 * read (BodyRoom, given to the transport), then its page's bytes until the page's
 * commit ends (`release`).
 */
export class PageHold implements BodyRoom {
  /** Bytes held now (counted by the budget as it grants them). */
  bytes = 0;
  readonly #budget: ByteBudget;

  constructor(budget: ByteBudget) {
    this.#budget = budget;
  }

  take(bytes: number, signal?: AbortSignal): Promise<void> {
    return this.#budget.take(this, bytes, signal);
  }

  /** The attempt failed: what it took goes back; a retry takes again, still first in line if it was. */
  giveBack(): void {
    const bytes = this.bytes;
    this.bytes = 0;
    this.#budget.give(this, bytes, false);
  }

  /**
   * The answer is read: its page keeps `pageBytes` (taken now if the reader took less, as
   * a fetch function of a test's own does), and the next request is the oldest reading.
   */
  async read(pageBytes: number, signal?: AbortSignal): Promise<void> {
    await this.take(pageBytes - this.bytes, signal);
    this.#budget.give(this, 0, true);
  }

  /** The page's commit ended (or it will never commit): everything goes back. */
  release(): void {
    const bytes = this.bytes;
    this.bytes = 0;
    this.#budget.give(this, bytes, true);
  }
}
