/**
 * Bytes of feed responses a process holds at once, over all its lanes: one lane's pages
 * near FEED_MAX_RESPONSE_BYTES leave the others waiting, not the process over its
 * memory limit. A lane reserves an answer's worth before it asks for a page, keeps what
 * the page weighs until its commit is done, and waits in line (first come, first
 * served) while the budget is spent; only its abort signal ends the wait.
 */
export class ByteBudget {
  readonly capacity: number;
  #held = 0;
  readonly #waiting: { bytes: number; grant: () => void }[] = [];

  constructor(capacity: number) {
    this.capacity = capacity;
  }

  /** Bytes reserved now. */
  get held(): number {
    return this.#held;
  }

  /**
   * Takes `bytes`, or the whole capacity when more is asked (a page larger than the
   * budget is read alone), once they fit and nobody waits ahead. Resolves with what was
   * taken; rejects with the signal's reason when it aborts first, taking nothing.
   */
  reserve(bytes: number, signal: AbortSignal): Promise<number> {
    const want = Math.min(bytes, this.capacity);
    if (signal.aborted) return Promise.reject(signal.reason);
    if (this.#waiting.length === 0 && this.#held + want <= this.capacity) {
      this.#held += want;
      return Promise.resolve(want);
    }
    return new Promise((resolve, reject) => {
      const waiter = {
        bytes: want,
        grant: () => {
          signal.removeEventListener('abort', onAbort);
          resolve(want);
        },
      };
      const onAbort = () => {
        this.#waiting.splice(this.#waiting.indexOf(waiter), 1);
        reject(signal.reason);
        // The one that left may have been what held the others back.
        this.#grant();
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.#waiting.push(waiter);
    });
  }

  /** Gives back bytes taken by `reserve`. */
  release(bytes: number): void {
    this.#held -= bytes;
    this.#grant();
  }

  #grant(): void {
    while (this.#waiting.length > 0 && this.#held + this.#waiting[0]!.bytes <= this.capacity) {
      const next = this.#waiting.shift()!;
      this.#held += next.bytes;
      next.grant();
    }
  }
}
