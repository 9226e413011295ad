import type { Logger } from '../logger.js';
import type { OutboxEntry } from '../store/applier.js';
import type { Outbox } from '../store/outbox.js';
import type { Publisher } from './publisher.js';

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
