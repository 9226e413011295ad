import { ConfigError } from '../errors.js';
import type { Logger } from '../logger.js';
import { defaultSleep } from '../sleep.js';
import type { OutboxEntry } from '../store/applier.js';
import type { Outbox, OutboxRow } from '../store/outbox.js';
import { inSpan, type Link, linksFrom, SpanKind } from '../tracing/tracing.js';
import { jobData, jobDataBytes } from './job-data.js';
import type { JobToAdd, Publisher } from './publisher.js';
import { jobIdFor } from './routes.js';

/** The relay's defaults, each in one place: RelayOptions names them. */
export const RELAY_DEFAULTS = Object.freeze({
  /**
   * Rows: a thousand jobs share one addBulk round trip and one read of the outbox (at
   * 1,000 rows a step the relay alone moved about 16,000 events/s, docs/BENCHMARKS.md).
   */
  batchSize: 1000,
  /** Bytes of job data, 512 KiB: with events of up to about 500 bytes the row count binds first. */
  batchBytes: 512 * 1024,
  /**
   * Failures in a row: a Redis failover measured four (docs/DEPLOYMENT.md,
   * REDIS_WAIT_REPLICAS) and a once run still ended well; five means Redis is gone for
   * longer than a failover, and the run gives up with its events stored.
   */
  drainAttempts: 5,
  /**
   * Milliseconds, 30 s: the backoff doubles from 250 ms up to this, so a Redis back after
   * an outage is found within half a minute, and one that stays down costs two tries a minute.
   */
  maxBackoffMs: 30_000,
  /**
   * Milliseconds, one minute: a catch-up committing while Redis is down would otherwise
   * log a failure per commit.
   */
  remindMs: 60_000,
  /**
   * Milliseconds, one minute: how late a row that nobody kicked may be published at worst
   * (feedsync_publish_delay_seconds); an empty outbox costs one index look-up a minute.
   */
  sweepMs: 60_000,
});

export interface RelayOptions {
  outbox: Outbox;
  publisher: Publisher;
  logger: Logger;
  /** Outbox rows per addBulk, and per read of the outbox. Default: RELAY_DEFAULTS.batchSize. */
  batchSize?: number;
  /**
   * Job data per addBulk, and per read of the outbox, in bytes of JSON (`jobDataBytes`):
   * a batch stops at the first job that reaches it (one job larger than this goes alone).
   * Default: RELAY_DEFAULTS.batchBytes.
   */
  batchBytes?: number;
  /** Consecutive failures after which drain() gives up (the loop itself goes on). Default: RELAY_DEFAULTS.drainAttempts. */
  drainAttempts?: number;
  /** Longest pause between retries while Redis is down, in ms. Default: RELAY_DEFAULTS.maxBackoffMs. */
  maxBackoffMs?: number;
  /**
   * While failures go on, a warning at most this often, in ms; the failures between are
   * logged at debug. The first failure of an outage and the recovery are one line each.
   * Default: RELAY_DEFAULTS.remindMs.
   */
  remindMs?: number;
  /**
   * How often the loop reads the outbox without a kick, busy or idle, in ms. Default:
   * RELAY_DEFAULTS.sweepMs. Rows can be committed with nobody left to kick: a webhook
   * delivery whose commit finished after its 503 went out, a worker that died before
   * publishing.
   */
  sweepMs?: number;
  /** Offered rows in memory past which ready() waits and offers are left to the outbox. Default 4 × batchSize. */
  maxOffered?: number;
  /**
   * Bytes of job data held past which ready() waits and offers are left to the outbox:
   * the rows on offer and the batch on its way to Redis, read from the outbox or not.
   * Default 4 × batchBytes. An offer is taken up to it, one row at a time; the rest is
   * left to the outbox, whose reads are bounded by batchBytes.
   */
  maxHeldBytes?: number;
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** The clock for the publish delay, in ms since the epoch. Default Date.now. */
  now?: () => number;
  onPublished?: (queue: string, count: number) => void;
  /** Seconds from a row's commit to its job's publication, once per job published. */
  onPublishDelay?: (seconds: number) => void;
}

/** A job to add, with the moment its row was committed. */
interface Pending {
  queue: string;
  job: JobToAdd;
  committedAt: number;
}

/** A row on offer: its event, when it was offered, the size of its job data. */
interface Offered {
  entry: OutboxEntry;
  at: number;
  bytes: number;
}

export interface Relay {
  /** New outbox rows were committed that nobody offers: look at the outbox soon. */
  kick(): void;
  /**
   * Outbox rows just committed, with their events: published from memory, without
   * reading the outbox back. Past a bound of rows waiting, they are left to the outbox.
   */
  offer(entries: readonly OutboxEntry[]): void;
  /**
   * Resolves once there is room for another offer, in rows and in bytes: a catch-up
   * waits here rather than run ahead of Redis and push the rows it stores into the
   * outbox's slow path, or hold more events than the budget. Never waits while the
   * relay is failing (Redis down: storing goes on, offers go to the outbox) or stopped.
   */
  ready(): Promise<void>;
  /** Resolves once every row committed before the call is published; rejects after `drainAttempts` failures in a row. */
  drain(): Promise<void>;
  /** Stops the loop after the step in hand. */
  stop(): Promise<void>;
  /** The last error, while failures go on; null after a success. */
  readonly lastError: unknown;
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
 * The relay loop. Its states:
 * - idle: nothing offered, no kick; sleeps until an offer, a kick, a stop, or the
 *   sweep (a sleep that ends by itself reads the outbox);
 * - publishing what was offered: rows the process just committed, from memory;
 * - reading the outbox (after a kick, a sweep or a failure): rows nobody offers,
 *   oldest first, until a read finds no full batch;
 * - backing off after a failure (Redis down), then reading the outbox again.
 *
 * Each step adds jobs first and marks their rows after, and no step holds a
 * transaction or a row lock while Redis answers: a crash or a second relay at the
 * same rows re-adds a jobId, which BullMQ ignores. Storing waits for the relay only
 * through ready(), while it keeps up and memory is full; never while Redis fails.
 */
export function startRelay(opts: RelayOptions): Relay {
  const { outbox, publisher } = opts;
  const batchSize = opts.batchSize ?? RELAY_DEFAULTS.batchSize;
  const batchBytes = Math.max(1, opts.batchBytes ?? RELAY_DEFAULTS.batchBytes);
  const drainAttempts = opts.drainAttempts ?? RELAY_DEFAULTS.drainAttempts;
  const maxBackoff = opts.maxBackoffMs ?? RELAY_DEFAULTS.maxBackoffMs;
  const sweepMs = opts.sweepMs ?? RELAY_DEFAULTS.sweepMs;
  const remindMs = opts.remindMs ?? RELAY_DEFAULTS.remindMs;
  const sleep = opts.sleep ?? defaultSleep;
  const now = opts.now ?? Date.now;
  const log = opts.logger.child({ module: 'relay' });
  // What may wait in memory: beyond it (Redis slower than Postgres) the outbox holds the rest.
  const maxOffered = opts.maxOffered ?? 4 * batchSize;
  const maxHeldBytes = opts.maxHeldBytes ?? 4 * batchBytes;

  let stopped = false;
  /** Aborted to end the idle sleep (an offer, a kick, a stop); one per sleep, so nothing gathers on a long-lived signal. */
  let wake = new AbortController();
  /** A read of the outbox is due and has not started yet. */
  let kicked = false;
  let offered: Offered[] = [];
  let offeredBytes = 0;
  /** Bytes of the batch on its way to Redis, from memory or read back: held until its step ends. */
  let sendingBytes = 0;
  /**
   * Rows asked of each outbox read. Postgres measures every row it is asked for before it
   * builds the data of those under the budget: with large events, asking for a thousand
   * would measure hundreds of MB to send a few; so the next read asks for about twice
   * what the last one's rows say fits.
   */
  let readRows = batchSize;
  let roomWaiters: (() => void)[] = [];
  let waiters: Waiter[] = [];
  let generation = 0;
  let failures = 0;
  let lastError: unknown = null;
  /** performance.now() of the last read of the outbox: the sweep is due sweepMs after it. */
  let lastRead = performance.now();
  /** When the failures in a row began, and when the last warning about them was logged. */
  let failingSince = 0;
  let warnedAt = 0;
  /** A backoff is under way: commits do not cut it short (only drain() and stop() do). */
  let backingOff = false;

  const rouse = (): void => wake.abort();
  /** No room for another offer: rows on offer, or bytes on offer and on their way, at their bound. */
  const full = (): boolean => offered.length >= maxOffered || offeredBytes + sendingBytes >= maxHeldBytes;
  /** How many of `rows`, from the first, make one batch: up to batchSize, stopping at the first that reaches batchBytes. */
  const batchLength = (rows: readonly { bytes: number }[]): number => {
    let n = 0;
    let bytes = 0;
    while (n < rows.length && n < batchSize && bytes < batchBytes) bytes += rows[n++]!.bytes;
    return n;
  };
  const roomMade = (): void => {
    const woken = roomWaiters;
    roomWaiters = [];
    for (const resolve of woken) resolve();
  };
  /** Resolves (or, given an error, rejects) the drain() calls that `due` picks. */
  const settle = (due: (w: Waiter) => boolean, err?: unknown): void => {
    const settled = waiters.filter(due);
    waiters = waiters.filter((w) => !due(w));
    for (const w of settled) {
      if (err === undefined) w.resolve();
      else w.reject(err);
    }
  };

  /** addBulk per queue, each queue's jobs in the order given. */
  const publish = async (pending: readonly Pending[]): Promise<void> => {
    const byQueue = new Map<string, Pending[]>();
    for (const p of pending) {
      const list = byQueue.get(p.queue) ?? [];
      byQueue.set(p.queue, list);
      list.push(p);
    }
    for (const [queue, list] of byQueue) {
      await inSpan(
        'publish',
        {
          'messaging.system': 'bullmq',
          'messaging.destination.name': queue,
          'messaging.batch.message_count': list.length,
        },
        () =>
          publisher.addBulk(
            queue,
            list.map((p) => p.job),
          ),
        { kind: SpanKind.PRODUCER, links: commitLinks(list) },
      );
      opts.onPublished?.(queue, list.length);
      if (opts.onPublishDelay) {
        const at = now();
        for (const p of list) opts.onPublishDelay(Math.max(0, at - p.committedAt) / 1000);
      }
    }
  };

  /** Rows on offer: those still unpublished (a relay elsewhere may have taken some) get their jobs, then their marks. */
  const publishOffered = async (): Promise<void> => {
    const batch = offered.splice(0, batchLength(offered));
    const bytes = sumBytes(batch);
    offeredBytes -= bytes;
    sendingBytes = bytes;
    // Room in rows; the bytes stay held until the batch is published.
    roomMade();
    try {
      const open = new Set(await outbox.unpublishedOf(batch.map((o) => o.entry.seq)));
      const pending = batch
        .filter((o) => open.has(o.entry.seq))
        .map(({ entry, at }) => ({
          queue: entry.queue,
          job: {
            name: entry.jobName,
            jobId: jobIdFor(entry.source, entry.event.id),
            data: jobData(entry.source, entry.event),
            trace: entry.trace,
          },
          committedAt: at,
        }));
      await publish(pending);
      await outbox.markPublished([...open]);
    } finally {
      sendingBytes = 0;
      roomMade();
    }
  };

  /** One batch read from the outbox, leaving out the rows on offer (the memory path has them). */
  const readOutbox = async (gen: number): Promise<void> => {
    // Consume the kick before the read: a kick that lands while it runs asks for one more.
    kicked = false;
    lastRead = performance.now();
    const skip = offered.map((o) => o.entry.seq);
    const asked = readRows;
    const rows = await outbox.unpublished(asked, skip, batchBytes);
    const bytes = sumBytes(rows);
    if (rows.length > 0) {
      readRows = Math.min(
        batchSize,
        Math.max(1, Math.ceil((2 * batchBytes * rows.length) / Math.max(1, bytes))),
      );
    }
    sendingBytes = bytes;
    try {
      await publishRead(rows);
    } finally {
      sendingBytes = 0;
      roomMade();
    }
    // Empty, with nothing held back for the memory path: every drain() asked before it is done.
    if (rows.length === 0 && skip.length === 0) settle((w) => w.generation < gen);
    // A full batch, by rows or by bytes: more may be waiting. A short one took every row
    // committed before it but those on offer; rows committed since are offered or kicked.
    if (rows.length === asked || bytes >= batchBytes) kicked = true;
  };

  /** Rows read from the outbox: their jobs, then their marks. */
  const publishRead = async (rows: readonly OutboxRow[]): Promise<void> => {
    const pending: Pending[] = [];
    const missing: { source: string; eventId: string }[] = [];
    for (const row of rows) {
      if (row.data === null) missing.push({ source: row.source, eventId: row.eventId });
      else
        pending.push({
          queue: row.queue,
          job: { name: row.jobName, jobId: jobIdFor(row.source, row.eventId), data: row.data },
          committedAt: row.committedAt,
        });
    }
    // The retention keeps every event with an unpublished row; a row without one has no job to give.
    if (missing.length > 0)
      log.error(
        { rows: missing.length, first: missing[0] },
        'outbox rows whose event is gone were marked published without a job: the events were deleted outside feedsync',
      );
    await publish(pending);
    await outbox.markPublished(rows.map((r) => r.seq));
  };

  const step = async (gen: number): Promise<void> => {
    if (kicked) await readOutbox(gen);
    else await publishOffered();
    if (waiters.length > 0 && !kicked) {
      const low = await outbox.lowestUnpublished();
      settle((w) => low === null || low > w.mark);
      // Rows that nobody offers (a crash's, another process's): read the outbox for them.
      if (waiters.length > 0 && offered.length === 0) kicked = true;
    }
  };

  const idle = async (): Promise<void> => {
    wake = new AbortController();
    // A sleep that ends by itself (no offer, kick or stop) is a sweep: an empty outbox costs one index look-up.
    await sleep(sweepMs, wake.signal).then(
      () => {
        kicked = true;
      },
      () => {},
    );
  };

  const backOff = async (err: unknown): Promise<void> => {
    // Whatever was offered is in the outbox: the retry reads it from there.
    offered = [];
    offeredBytes = 0;
    roomMade();
    kicked = true;
    failures++;
    lastError = err;
    // One line when an outage begins, then a reminder at most every remindMs.
    const at = now();
    if (failures === 1) {
      failingSince = at;
      warnedAt = at;
      log.warn({ err, failures }, 'outbox relay failed; retrying with backoff (the events are stored)');
    } else if (at - warnedAt >= remindMs) {
      warnedAt = at;
      log.warn(
        { err, failures, failingForMs: at - failingSince },
        'outbox relay still failing; retrying with backoff (the events are stored)',
      );
    } else log.debug({ err, failures }, 'outbox relay failed again');
    // Waiting cannot fix a configuration error (a cluster and a prefix without a hash tag).
    if (failures >= drainAttempts || err instanceof ConfigError) settle(() => true, err);
    const backoff = Math.min(maxBackoff, 250 * 2 ** failures);
    wake = new AbortController();
    backingOff = true;
    if (!stopped)
      await sleep(Math.floor(backoff / 2 + (Math.random() * backoff) / 2), wake.signal).catch(() => {});
    backingOff = false;
  };

  const loop = async (): Promise<void> => {
    while (!stopped) {
      // Offers keep a busy relay awake: the sweep comes on its time all the same.
      if (performance.now() - lastRead >= sweepMs) kicked = true;
      if (!kicked && offered.length === 0) {
        await idle();
        continue;
      }
      try {
        await step(++generation);
        if (failures > 0) log.info({ failures, failedForMs: now() - failingSince }, 'outbox relay recovered');
        failures = 0;
        lastError = null;
      } catch (err) {
        await backOff(err);
      }
    }
  };
  const running = loop();

  const relay: Relay = {
    kick() {
      kicked = true;
      if (!backingOff) rouse();
    },
    offer(entries) {
      if (entries.length === 0) return;
      // While the outbox is to be read anyway, or memory is full (an offer that did not wait
      // for ready()), the read takes these too: it leaves out only rows still in memory.
      if (kicked || full()) {
        relay.kick();
        return;
      }
      const at = now();
      for (const entry of entries) {
        // Past the budget, the rest of the offer is left to the outbox: a read takes it in batches.
        if (full()) {
          kicked = true;
          break;
        }
        const bytes = jobDataBytes(entry.source, entry.event);
        offered.push({ entry, at, bytes });
        offeredBytes += bytes;
      }
      rouse();
    },
    async ready() {
      // Woken whenever rows or bytes leave: look again, the room may already be taken.
      while (full() && lastError === null && !stopped) {
        await new Promise<void>((resolve) => roomWaiters.push(resolve));
      }
    },
    async drain() {
      if (stopped) throw new Error('the relay is stopped');
      // Nothing committed yet: every seq is at least 1, so the next step settles it.
      const mark = (await outbox.highestSeq()) ?? 0n;
      if (stopped) throw new Error('the relay is stopped');
      return new Promise<void>((resolve, reject) => {
        waiters.push({ generation, mark, resolve, reject });
        // Rows on offer are published from memory first; the step after them looks at the rest.
        // A drain tries at once, even in a backoff: a turn ends on its answer.
        if (offered.length === 0) kicked = true;
        rouse();
      });
    },
    async stop() {
      stopped = true;
      rouse();
      roomMade();
      await running;
      settle(() => true, new Error('the relay stopped before the outbox was drained'));
    },
    get lastError() {
      return lastError;
    },
  };
  return relay;
}

/** Links to the commits a batch's jobs came from (a few: a batch is a few commits' rows), none for rows read back. */
function commitLinks(list: readonly Pending[]): Link[] {
  const traces = new Set<string>();
  for (const p of list) if (p.job.trace !== undefined && traces.size < 32) traces.add(p.job.trace);
  return [...traces].flatMap(linksFrom);
}

function sumBytes(rows: readonly { bytes: number }[]): number {
  let bytes = 0;
  for (const r of rows) bytes += r.bytes;
  return bytes;
}
