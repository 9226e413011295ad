/**
 * The addresses whose last delivery failed its signature, for a while: their next bodies
 * are read last (body-budget.ts). Bounded whatever the senders: at most `max` addresses,
 * the one marked longest ago forgotten first; a delivery that verifies clears its sender.
 */
export class SuspectSenders {
  /** Address → when its mark lapses (ms, monotonic), in the order they were marked. */
  private readonly marks = new Map<string, number>();

  constructor(
    private readonly opts: { max: number; forMs: number; now?: () => number } = { max: 4096, forMs: 600_000 },
  ) {}

  has(address: string | undefined): boolean {
    if (address === undefined) return false;
    const until = this.marks.get(address);
    if (until === undefined) return false;
    if (until > this.now()) return true;
    this.marks.delete(address);
    return false;
  }

  /** After a delivery's answer: a 401 marks its sender, any other answer clears it. */
  answered(address: string | undefined, status: number): void {
    if (address === undefined) return;
    this.marks.delete(address);
    if (status !== 401) return;
    this.marks.set(address, this.now() + this.opts.forMs);
    if (this.marks.size > this.opts.max) {
      const oldest = this.marks.keys().next().value;
      if (oldest !== undefined) this.marks.delete(oldest);
    }
  }

  private now(): number {
    return this.opts.now ? this.opts.now() : performance.now();
  }
}
