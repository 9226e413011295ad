import { MAX_RETENTION_HOURS, MAX_TIMER_MS } from '../config/limits.js';
import { FeedsyncError } from '../errors.js';
import { CONTACT_EVENT_TYPES, EMAIL_EVENT_TYPES } from '../event-types.js';
import { CONSUMER_DEFAULTS } from './defaults.js';

/** A FeedsyncError (CONSUMER_BAD_OPTION, exit 2) naming the option. */
function badOption(option: string, problem: string): FeedsyncError {
  return new FeedsyncError(`${option}: ${problem}`, { code: 'CONSUMER_BAD_OPTION', exitCode: 2 });
}

/** `value` when it is a whole number from `min` to `max`, else a CONSUMER_BAD_OPTION error naming `option`. */
function wholeNumber(option: string, value: unknown, min: number, max: number, unit = ''): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw badOption(option, `must be a whole number${unit} from ${min} to ${max}; got ${describe(value)}`);
  }
  return value;
}

/** Milliseconds a timer can hold (1 to 2^31 - 1). */
export const milliseconds = (option: string, value: unknown): number =>
  wholeNumber(option, value, 1, MAX_TIMER_MS, ' of milliseconds');

/**
 * Hours an inbox row is kept: never under CONSUMER_DEFAULTS.minRetentionHours, since a
 * row pruned while BullMQ still knows the job's id lets a re-delivery be applied twice.
 */
export const retentionHours = (value: unknown): number =>
  wholeNumber('retentionHours', value, CONSUMER_DEFAULTS.minRetentionHours, MAX_RETENTION_HOURS, ' of hours');

/** The consumer's name: the inbox key. */
function consumerName(value: unknown): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > 200) {
    throw badOption('name', 'must be a non-empty string of at most 200 characters');
  }
  return value;
}

const TYPES: readonly string[] = [...EMAIL_EVENT_TYPES, ...CONTACT_EVENT_TYPES];

/** Handlers by type: an object whose every key is a routed type (a misspelt one would never run). */
function checkHandlers(value: unknown): void {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw badOption('handlers', 'must be an object of functions by event type');
  }
  for (const [type, fn] of Object.entries(value)) {
    if (!TYPES.includes(type)) {
      throw badOption('handlers', `${describe(type)} is not a type feedsync routes (${TYPES.join(', ')})`);
    }
    if (fn !== undefined && typeof fn !== 'function')
      throw badOption(`handlers['${type}']`, 'must be a function');
  }
}

/** Something used as a pg Pool: it connects and queries. */
function checkPool(value: unknown): void {
  const pool = value as { connect?: unknown; query?: unknown } | null | undefined;
  if (typeof pool?.connect !== 'function' || typeof pool.query !== 'function') {
    throw badOption('pool', "must be a pg Pool (the application's own)");
  }
}

/** A queue name or prefix, as feedsync's own QUEUE_* variables are checked. */
export function queueName(option: string, value: unknown): string {
  if (typeof value !== 'string' || !/^[^:\s]+$/.test(value)) {
    throw badOption(option, `must be non-empty, without ":" or spaces; got ${describe(value)}`);
  }
  return value;
}

/** BullMQ's stall settings as the consumer takes them: each checked, none required. */
export interface Stalls {
  readonly lockDuration?: number;
  readonly stalledInterval?: number;
  readonly maxStalledCount?: number;
}

/**
 * The ranges of the stall settings. A duration past a timer's limit fires at once (a
 * stalledInterval of 2^31 ms checked locks 1,200 times a second); a lock under a second
 * lapses between two renewals of a busy process, and 0 or less is no lock at all.
 */
const STALL_RANGES = {
  lockDuration: [1_000, MAX_TIMER_MS, ' of milliseconds'],
  stalledInterval: [100, MAX_TIMER_MS, ' of milliseconds'],
  maxStalledCount: [0, 1_000_000, ''],
} as const;

/** `stalls` checked: an object of the three settings, each a whole number in its range. */
function checkStalls(value: unknown): Stalls {
  if (value === undefined) return {};
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw badOption('stalls', 'must be an object of lockDuration, stalledInterval and maxStalledCount');
  }
  const checked: Record<string, number> = {};
  for (const [key, setting] of Object.entries(value)) {
    if (!Object.hasOwn(STALL_RANGES, key)) {
      throw badOption(
        `stalls.${key}`,
        'is not a stall setting (lockDuration, stalledInterval, maxStalledCount)',
      );
    }
    if (setting === undefined) continue;
    const [min, max, unit] = STALL_RANGES[key as keyof typeof STALL_RANGES];
    checked[key] = wholeNumber(`stalls.${key}`, setting, min, max, unit);
  }
  return checked;
}

/** The options of createConsumer that do not depend on the environment, as given. */
export interface GivenOptions {
  readonly name: unknown;
  readonly pool: unknown;
  readonly handlers: unknown;
  readonly concurrency?: number | undefined;
  readonly schema?: string | undefined;
  readonly handlerTimeoutMs?: number | undefined;
  readonly lockTimeoutMs?: number | undefined;
  readonly connectTimeoutMs?: number | undefined;
  readonly closeTimeoutMs?: number | undefined;
  readonly stalls?: unknown;
}

/** Those options checked (but the schema), with their defaults; a CONSUMER_BAD_OPTION error naming the first that is wrong. */
export function settled(opts: GivenOptions) {
  const name = consumerName(opts.name);
  checkPool(opts.pool);
  checkHandlers(opts.handlers);
  const ms = (option: 'handlerTimeoutMs' | 'lockTimeoutMs' | 'connectTimeoutMs' | 'closeTimeoutMs') =>
    milliseconds(option, opts[option] ?? CONSUMER_DEFAULTS[option]);
  return {
    name,
    // Checked as an identifier by inboxTable(), where the table's name is made.
    schema: opts.schema ?? CONSUMER_DEFAULTS.schema,
    concurrency: wholeNumber('concurrency', opts.concurrency ?? CONSUMER_DEFAULTS.concurrency, 1, 1_000),
    limits: { timeoutMs: ms('handlerTimeoutMs'), lockTimeoutMs: ms('lockTimeoutMs') },
    connectTimeoutMs: ms('connectTimeoutMs'),
    closeTimeoutMs: ms('closeTimeoutMs'),
    stalls: checkStalls(opts.stalls),
  };
}

/** A value as a message may show it: short, and never an object's contents. */
function describe(value: unknown): string {
  if (typeof value === 'number' || typeof value === 'boolean' || value === null || value === undefined) {
    return String(value);
  }
  if (typeof value === 'string') return JSON.stringify(value.slice(0, 40));
  return `a ${typeof value}`;
}
