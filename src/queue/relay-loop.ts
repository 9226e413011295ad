import { ConfigError } from '../errors.js';
import type { Logger } from '../logger.js';
import { defaultSleep } from '../sleep.js';
import type { OutboxEntry } from '../store/applier.js';
import { jobDataBytes } from './job-data.js';
import { RELAY_DEFAULTS, type Relay, type RelayOptions } from './relay.js';
import { addJobs, jobOfOffer, jobsOfRows, type Pending } from './relay-jobs.js';

/** RelayOptions with every default filled in (startRelay does it), and the relay's own logger. */
type RelayLoopOptions = Required<Omit<RelayOptions, 'logger' | 'onPublished' | 'onPublishDelay'>> &
  Pick<RelayOptions, 'onPublished' | 'onPublishDelay'> & { log: Logger };

/**
 * What the loop is doing:
 * - idle: nothing offered, no kick; sleeps until an offer, a kick, a stop, or the
 *   sweep (a sleep that ends by itself reads the outbox);
 * - reading: the outbox (after a kick, a sweep or a failure) for rows nobody offers,
 *   oldest first, until a read finds no full batch; or, for rows on offer, which of
 *   them are still unpublished;
 * - publishing: adding the jobs of a batch, per queue;
 * - marking: marking the batch's rows published;
 * - settling: asking the outbox which drain() calls the step has settled;
 * - backingOff: after a failure (Redis down), before reading the outbox again;
 * - closed: stop() was called; the step in hand ends, and the loop with it.
 */
type RelayState = 'idle' | 'reading' | 'publishing' | 'marking' | 'settling' | 'backingOff' | 'closed';

/** A row on offer: its event, when it was offered, the size of its job data. */
interface Offered {
  entry: OutboxEntry;
  at: number;
  bytes: number;
}

/**
 * A drain() call: `mark` is the highest outbox seq committed when it was made. It is
 * settled once no unpublished row is at or below it, or once a read of the outbox
 * started after it finds it empty. Many sources share one relay, so the outbox is
 * seldom empty while they run: waiting for empty would hold each source's turn
 * until all paused.
 */
interface Waiter {
  generation: number;
  mark: bigint;
  resolve: () => void;
  reject: (err: unknown) => void;
}

/**
 * The relay loop: one object holds its state, each transition a method (see RelayState).
 *
 * Each step adds jobs first and marks their rows after, and no step holds a
 * transaction or a row lock while Redis answers: a crash or a second relay at the
 * same rows re-adds a jobId, which BullMQ ignores. Storing waits for the relay only
 * through ready(), while it keeps up and memory is full; never while Redis fails.
 */
class RelayLoop implements Relay {
  private state: RelayState = 'idle';
  /** Aborted to end a sleep (an offer, a kick, a stop); one per sleep, so nothing gathers on a long-lived signal. */
  private wake = new AbortController();
  /** A read of the outbox is due and has not started yet. */
  private kicked = false;
  private offered: Offered[] = [];
  private offeredBytes = 0;
  /** Bytes of the batch on its way to Redis, from memory or read back: held until its step ends. */
  private sendingBytes = 0;
  /**
   * Rows asked of each outbox read. Postgres measures every row it is asked for before it
   * builds the data of those under the budget: with large events, asking for a thousand
   * would measure hundreds of MB to send a few; so the next read asks for about twice
   * what the last one's rows say fits.
   */
  private readRows: number;
  private roomWaiters: (() => void)[] = [];
  private waiters: Waiter[] = [];
  /**
   * drain() calls the step in hand has settled: they resolve once it ends, its success
   * counted first, so a drain that resolves finds lastError cleared and the recovery logged.
   */
  private settled: Waiter[] = [];
  private generation = 0;
  private failures = 0;
  private failure: unknown = null;
  /** performance.now() of the last read of the outbox: the sweep is due sweepMs after it. */
  private lastRead = performance.now();
  /** When the failures in a row began, and when the last warning about them was logged. */
  private failingSince = 0;
  private warnedAt = 0;
  private running: Promise<void> = Promise.resolve();

  constructor(private readonly opts: RelayLoopOptions) {
    this.readRows = opts.batchSize;
  }

  /** Starts the loop; stop() waits for it. */
  start(): void {
    this.running = this.run();
  }

  get lastError(): unknown {
    return this.failure;
  }

  kick(): void {
    this.kicked = true;
    // A backoff is not cut short by commits (only drain() and stop() do that).
    if (this.state !== 'backingOff') this.rouse();
  }

  offer(entries: readonly OutboxEntry[]): void {
    if (entries.length === 0) return;
    // While the outbox is to be read anyway, or memory is full (an offer that did not wait
    // for ready()), the read takes these too: it leaves out only rows still in memory.
    if (this.kicked || this.full()) {
      this.kick();
      return;
    }
    const at = this.opts.now();
    for (const entry of entries) {
      // Past the budget, the rest of the offer is left to the outbox: a read takes it in batches.
      if (this.full()) {
        this.kicked = true;
        break;
      }
      const bytes = jobDataBytes(entry.source, entry.event);
      this.offered.push({ entry, at, bytes });
      this.offeredBytes += bytes;
    }
    this.rouse();
  }

  async ready(): Promise<void> {
    // Woken whenever rows or bytes leave: look again, the room may already be taken.
    while (this.full() && this.failure === null && !this.closed) {
      await new Promise<void>((resolve) => this.roomWaiters.push(resolve));
    }
  }

  async drain(): Promise<void> {
    if (this.closed) throw new Error('the relay is stopped');
    // Nothing committed yet: every seq is at least 1, so the next step settles it.
    const mark = (await this.opts.outbox.highestSeq()) ?? 0n;
    if (this.closed) throw new Error('the relay is stopped');
    return new Promise<void>((resolve, reject) => {
      this.waiters.push({ generation: this.generation, mark, resolve, reject });
      // Rows on offer are published from memory first; the step after them looks at the rest.
      // A drain tries at once, even in a backoff: a turn ends on its answer.
      if (this.offered.length === 0) this.kicked = true;
      this.rouse();
    });
  }

  async stop(): Promise<void> {
    this.state = 'closed';
    this.rouse();
    this.roomMade();
    await this.running;
    this.settle(() => true, new Error('the relay stopped before the outbox was drained'));
  }

  private get closed(): boolean {
    return this.state === 'closed';
  }

  /** Every transition but stop()'s: once closed, the step in hand runs on without leaving it. */
  private enter(state: Exclude<RelayState, 'closed'>): void {
    if (!this.closed) this.state = state;
  }

  private async run(): Promise<void> {
    while (!this.closed) {
      // Offers keep a busy relay awake: the sweep comes on its time all the same.
      if (performance.now() - this.lastRead >= this.opts.sweepMs) this.kicked = true;
      if (!this.kicked && this.offered.length === 0) {
        await this.idle();
        continue;
      }
      try {
        await this.step(++this.generation);
        this.recovered();
        this.resolveSettled();
      } catch (err) {
        await this.backOff(err);
      }
    }
  }

  private async idle(): Promise<void> {
    this.enter('idle');
    // A sleep that ends by itself (no offer, kick or stop) is a sweep: an empty outbox costs one index look-up.
    if (await this.nap(this.opts.sweepMs)) this.kicked = true;
  }

  private async step(gen: number): Promise<void> {
    if (this.kicked) await this.readOutbox(gen);
    else await this.publishOffered();
    if (this.waiters.length > 0 && !this.kicked) await this.settleDrains();
  }

  /** Rows on offer: those still unpublished (a relay elsewhere may have taken some) get their jobs, then their marks. */
  private async publishOffered(): Promise<void> {
    const batch = this.offered.splice(0, this.batchLength(this.offered));
    const bytes = sumBytes(batch);
    this.offeredBytes -= bytes;
    await this.sending(bytes, async () => {
      // Room in rows; the bytes stay held until the batch is published.
      this.roomMade();
      this.enter('reading');
      const open = new Set(await this.opts.outbox.unpublishedOf(batch.map((o) => o.entry.seq)));
      await this.publish(batch.filter((o) => open.has(o.entry.seq)).map((o) => jobOfOffer(o.entry, o.at)));
      await this.mark([...open]);
    });
  }

  /** One batch read from the outbox, leaving out the rows on offer (the memory path has them). */
  private async readOutbox(gen: number): Promise<void> {
    this.enter('reading');
    // Consume the kick before the read: a kick that lands while it runs asks for one more.
    this.kicked = false;
    this.lastRead = performance.now();
    const skip = this.offered.map((o) => o.entry.seq);
    const asked = this.readRows;
    const rows = await this.opts.outbox.unpublished(asked, skip, this.opts.batchBytes);
    const bytes = sumBytes(rows);
    if (rows.length > 0) {
      this.readRows = Math.min(
        this.opts.batchSize,
        Math.max(1, Math.ceil((2 * this.opts.batchBytes * rows.length) / Math.max(1, bytes))),
      );
    }
    await this.sending(bytes, async () => {
      await this.publish(jobsOfRows(rows, this.opts.log));
      await this.mark(rows.map((r) => r.seq));
    });
    // Empty, with nothing held back for the memory path: every drain() asked before it is done.
    if (rows.length === 0 && skip.length === 0) this.settle((w) => w.generation < gen);
    // A full batch, by rows or by bytes: more may be waiting. A short one took every row
    // committed before it but those on offer; rows committed since are offered or kicked.
    if (rows.length === asked || bytes >= this.opts.batchBytes) this.kicked = true;
  }

  private async publish(pending: readonly Pending[]): Promise<void> {
    this.enter('publishing');
    await addJobs(pending, this.opts);
  }

  private async mark(seqs: readonly string[]): Promise<void> {
    this.enter('marking');
    await this.opts.outbox.markPublished(seqs);
  }

  /** Resolves the drain() calls whose rows are all published; reads the outbox for the rest. */
  private async settleDrains(): Promise<void> {
    this.enter('settling');
    const low = await this.opts.outbox.lowestUnpublished();
    this.settle((w) => low === null || low > w.mark);
    // Rows that nobody offers (a crash's, another process's): read the outbox for them.
    if (this.waiters.length > 0 && this.offered.length === 0) this.kicked = true;
  }

  private async backOff(err: unknown): Promise<void> {
    this.enter('backingOff');
    // Their rows are published: the step failed after.
    this.resolveSettled();
    // Whatever was offered is in the outbox: the retry reads it from there.
    this.offered = [];
    this.offeredBytes = 0;
    this.roomMade();
    this.kicked = true;
    this.failures++;
    this.failure = err;
    this.warn(err);
    // Waiting cannot fix a configuration error (a cluster and a prefix without a hash tag).
    if (this.failures >= this.opts.drainAttempts || err instanceof ConfigError) this.settle(() => true, err);
    const backoff = Math.min(this.opts.maxBackoffMs, 250 * 2 ** this.failures);
    if (!this.closed) await this.nap(Math.floor(backoff / 2 + (Math.random() * backoff) / 2));
  }

  /** One line when an outage begins, then a reminder at most every remindMs. */
  private warn(err: unknown): void {
    const { log } = this.opts;
    const at = this.opts.now();
    if (this.failures === 1) {
      this.failingSince = at;
      this.warnedAt = at;
      log.warn(
        { err, failures: this.failures },
        'outbox relay failed; retrying with backoff (the events are stored)',
      );
    } else if (at - this.warnedAt >= this.opts.remindMs) {
      this.warnedAt = at;
      log.warn(
        { err, failures: this.failures, failingForMs: at - this.failingSince },
        'outbox relay still failing; retrying with backoff (the events are stored)',
      );
    } else log.debug({ err, failures: this.failures }, 'outbox relay failed again');
  }

  private recovered(): void {
    if (this.failures > 0) {
      this.opts.log.info(
        { failures: this.failures, failedForMs: this.opts.now() - this.failingSince },
        'outbox relay recovered',
      );
    }
    this.failures = 0;
    this.failure = null;
  }

  /** Sleeps until `ms` pass (true) or rouse() ends it early (false). */
  private nap(ms: number): Promise<boolean> {
    this.wake = new AbortController();
    return this.opts.sleep(ms, this.wake.signal).then(
      () => true,
      () => false,
    );
  }

  private rouse(): void {
    this.wake.abort();
  }

  /** Holds a batch's bytes against maxHeldBytes while `send` publishes it, and makes room after. */
  private async sending(bytes: number, send: () => Promise<void>): Promise<void> {
    this.sendingBytes = bytes;
    try {
      await send();
    } finally {
      this.sendingBytes = 0;
      this.roomMade();
    }
  }

  /** No room for another offer: rows on offer, or bytes on offer and on their way, at their bound. */
  private full(): boolean {
    return (
      this.offered.length >= this.opts.maxOffered ||
      this.offeredBytes + this.sendingBytes >= this.opts.maxHeldBytes
    );
  }

  /** How many of `rows`, from the first, make one batch: up to batchSize, stopping at the first that reaches batchBytes. */
  private batchLength(rows: readonly { bytes: number }[]): number {
    let n = 0;
    let bytes = 0;
    while (n < rows.length && n < this.opts.batchSize && bytes < this.opts.batchBytes)
      bytes += rows[n++]!.bytes;
    return n;
  }

  private roomMade(): void {
    const woken = this.roomWaiters;
    this.roomWaiters = [];
    for (const resolve of woken) resolve();
  }

  /** Settles the drain() calls that `due` picks: rejects them given an error, else resolves them when the step ends. */
  private settle(due: (w: Waiter) => boolean, err?: unknown): void {
    const settled = this.waiters.filter(due);
    this.waiters = this.waiters.filter((w) => !due(w));
    if (err === undefined) this.settled.push(...settled);
    else for (const w of settled) w.reject(err);
  }

  private resolveSettled(): void {
    const settled = this.settled;
    this.settled = [];
    for (const w of settled) w.resolve();
  }
}

function sumBytes(rows: readonly { bytes: number }[]): number {
  let bytes = 0;
  for (const r of rows) bytes += r.bytes;
  return bytes;
}

/**
 * Starts the relay loop (RelayLoop: its states and why each step adds jobs before it marks
 * rows), with the defaults filled in.
 */
export function startRelay(opts: RelayOptions): Relay {
  const batchSize = opts.batchSize ?? RELAY_DEFAULTS.batchSize;
  const batchBytes = Math.max(1, opts.batchBytes ?? RELAY_DEFAULTS.batchBytes);
  const loop = new RelayLoop({
    outbox: opts.outbox,
    publisher: opts.publisher,
    log: opts.logger.child({ module: 'relay' }),
    batchSize,
    batchBytes,
    drainAttempts: opts.drainAttempts ?? RELAY_DEFAULTS.drainAttempts,
    maxBackoffMs: opts.maxBackoffMs ?? RELAY_DEFAULTS.maxBackoffMs,
    remindMs: opts.remindMs ?? RELAY_DEFAULTS.remindMs,
    sweepMs: opts.sweepMs ?? RELAY_DEFAULTS.sweepMs,
    // What may wait in memory: beyond it (Redis slower than Postgres) the outbox holds the rest.
    maxOffered: opts.maxOffered ?? 4 * batchSize,
    maxHeldBytes: opts.maxHeldBytes ?? 4 * batchBytes,
    sleep: opts.sleep ?? defaultSleep,
    now: opts.now ?? Date.now,
    ...(opts.onPublished && { onPublished: opts.onPublished }),
    ...(opts.onPublishDelay && { onPublishDelay: opts.onPublishDelay }),
  });
  loop.start();
  return loop;
}
