import type { SourceLease } from '../store/lease-renewal.js';

/**
 * A worker's turns in flight, by source (one turn of a source at a time): their feed
 * responses, retries and commits are their progress, which keeps their leases renewed
 * (SourceLease.progress), and a turn with none for too long is what /healthz reports.
 */
export class TurnsInFlight {
  readonly #leases = new Map<string, SourceLease>();

  /** Runs `turn` under `lease`, counted as in flight until it ends. */
  async run<T>(lease: SourceLease, turn: () => Promise<T>): Promise<T> {
    this.#leases.set(lease.source, lease);
    try {
      return await turn();
    } finally {
      this.#leases.delete(lease.source);
    }
  }

  /** The turn of `source` moved on, or is about to wait `waitMs` on purpose (a retry's back-off). */
  progress(source: string, waitMs = 0): void {
    this.#leases.get(source)?.progress(waitMs);
  }

  /** A turn in flight that has shown no progress for longer than its lease's stallMs, or null. */
  stalledSource(): string | null {
    for (const [source, lease] of this.#leases) if (lease.stalled) return source;
    return null;
  }
}
