/**
 * Every timer the simulator sets, so that `close()` can cancel them all: pending
 * webhook retries, added latency, dripped bodies.
 */
export class Timers {
  private readonly pending = new Map<NodeJS.Timeout, () => void>();
  private closed = false;

  /** Runs `fn` after `ms`, unless cleared first. */
  later(ms: number, fn: () => void): void {
    if (this.closed) return;
    const timer = setTimeout(() => {
      this.pending.delete(timer);
      fn();
    }, ms);
    // A stray timer must not keep a test process alive; the server does that while it listens.
    timer.unref();
    this.pending.set(timer, () => {});
  }

  /** Resolves after `ms`, or at once when the timers are cleared. */
  sleep(ms: number): Promise<void> {
    if (ms <= 0 || this.closed) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.pending.delete(timer);
        resolve();
      }, ms);
      timer.unref();
      this.pending.set(timer, resolve);
    });
  }

  clear(): void {
    this.closed = true;
    for (const [timer, release] of this.pending) {
      clearTimeout(timer);
      release();
    }
    this.pending.clear();
  }
}
