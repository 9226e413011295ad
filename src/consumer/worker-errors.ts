import type { Worker } from 'bullmq';
import type { Logger } from '../logger.js';
import { redacted } from './redacted.js';

/** Milliseconds between two 'worker error' lines of one queue at most; the errors between are counted. */
const LOG_EVERY_MS = 10_000;
/** Errors within a second of each other that make a burst, after which the Worker pauses. */
const BURST = 5;
/** The first pause after a burst, doubled at each burst that follows, up to the longest. */
const FIRST_PAUSE_MS = 1_000;
const LONGEST_PAUSE_MS = 30_000;
/** Milliseconds without an error after which the next burst starts from the first pause again. */
const QUIET_MS = 60_000;
/**
 * A job's lost lock ("could not renew lock for job …", "Missing lock for job …"): the
 * outcome of a stall, which BullMQ settles by handing the job on, not an error it retries
 * at once. Logged like the others, never a reason to pause: several replicas losing locks
 * together would otherwise pause each other for up to 30 s at a time.
 */
const JOB_LOCK = /\block\b/i;

/**
 * What a Worker's 'error' events do: BullMQ tries again at once after an error that is
 * not a lost connection (a function missing from the queues' schema, say), so a lasting
 * one came hundreds of times a second, each a log line and a statement. Here the errors
 * of one queue are logged one line per 10 s at most (with how many were left out), and a
 * burst pauses the Worker (its jobs in hand go on) for 1 s, then 2, 4 … 30 s while the
 * bursts go on.
 */
export class WorkerErrors {
  private readonly worker: Worker;
  private readonly queue: string;
  private readonly logger: Logger;
  private lastLogAt = Number.NEGATIVE_INFINITY;
  private unlogged = 0;
  private lastErrorAt = Number.NEGATIVE_INFINITY;
  private burst = 0;
  private pauseMs = 0;
  private resumeTimer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(worker: Worker, queue: string, logger: Logger) {
    this.worker = worker;
    this.queue = queue;
    this.logger = logger;
    worker.on('error', (err) => this.onError(err));
  }

  /** No more pauses nor resumes: the Worker is closing. */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.resumeTimer);
  }

  private onError(err: Error): void {
    const now = Date.now();
    if (now - this.lastLogAt >= LOG_EVERY_MS) {
      const more = this.unlogged > 0 ? { moreErrors: this.unlogged } : {};
      this.logger.error({ queue: this.queue, err: redacted(err), ...more }, 'worker error');
      this.lastLogAt = now;
      this.unlogged = 0;
    } else {
      this.unlogged++;
    }
    if (JOB_LOCK.test(err.message)) return;
    if (now - this.lastErrorAt > QUIET_MS) this.pauseMs = 0;
    this.burst = now - this.lastErrorAt < 1_000 ? this.burst + 1 : 1;
    this.lastErrorAt = now;
    if (this.burst >= BURST) this.pause();
  }

  private pause(): void {
    if (this.stopped || this.resumeTimer !== undefined) return;
    this.burst = 0;
    this.pauseMs = Math.min(Math.max(this.pauseMs * 2, FIRST_PAUSE_MS), LONGEST_PAUSE_MS);
    // Not waiting for the jobs in hand: they finish as they would.
    void this.worker.pause(true);
    this.resumeTimer = setTimeout(() => {
      this.resumeTimer = undefined;
      if (!this.stopped) void this.worker.resume();
    }, this.pauseMs);
  }
}
