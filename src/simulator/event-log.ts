import type { ServiceEvent } from '../api/types.js';
import { BACKLOG_STEP_MS, backlogEventAt, backlogType } from './backlog.js';
import { SimError } from './errors.js';

const ID_PREFIX = 'evt_';
const ID_DIGITS = 12;
const ID_PATTERN = /^evt_(\d{12})$/;

/** The id of the event at feed position `position` (1-based): `evt_` and the zero-padded position. */
export function eventIdAt(position: number): string {
  return `${ID_PREFIX}${String(position).padStart(ID_DIGITS, '0')}`;
}

/** The position an id stands for, or null when it is not a feed id at all. */
export function positionOfId(id: string): number | null {
  const match = ID_PATTERN.exec(id);
  return match ? Number(match[1]) : null;
}

/** A run of synthetic events, generated on the fly from their ordinal. */
interface SyntheticRun {
  /** Feed position of its first event. */
  start: number;
  count: number;
  /** Synthetic ordinal of its first event: the content goes on where the previous run stopped. */
  ordinal: number;
  /** `created_at` of its first event, and the gap between two of its events. */
  startMs: number;
  stepMs: number;
}

/** Real events, emitted one by one, that follow one another in the feed. */
interface RealRun {
  start: number;
  events: ServiceEvent[];
}

type Run = SyntheticRun | RealRun;

const MAX_BACKLOG = 1e11;

/**
 * The feed, in order: runs of synthetic backlog events and of real events, as they
 * were added. An event, once in the feed, never changes (the one exception is
 * `setBacklog`, before any real event); an id maps back to its position in
 * O(log runs).
 */
export class EventLog {
  private runs: Run[] = [];
  private synthetic = 0;

  constructor(
    private readonly now: () => number,
    /** Named in the backlog's content; null for the default account's. */
    private readonly account: string | null = null,
  ) {}

  /** Events in the feed, backlog included. */
  get size(): number {
    const last = this.runs.at(-1);
    if (last === undefined) return 0;
    return last.start - 1 + ('events' in last ? last.events.length : last.count);
  }

  /** Synthetic events in the feed, over every run. */
  get backlogSize(): number {
    return this.synthetic;
  }

  /**
   * Replaces the feed with a backlog of `count` events ending just before now, so real
   * events follow in time too. It rewrites what may have been served, so only before
   * the first real event: for a test or a benchmark that starts a feed over.
   */
  setBacklog(count: number): void {
    checkCount(count);
    if (this.runs.some((run) => 'events' in run)) {
      throw new SimError(
        409,
        'backlog_locked',
        'the backlog can only be replaced before the first real event',
      );
    }
    this.runs = [];
    this.synthetic = 0;
    this.addBacklog(count);
  }

  /**
   * Adds `count` synthetic events at the end of the feed; what is already there keeps
   * its ids and `created_at`. The new events end just before now, 100 ms apart, and
   * none is older than the last event already there (closer together if need be).
   */
  addBacklog(count: number): void {
    checkCount(count);
    if (count === 0) return;
    const size = this.size;
    const lastMs = size === 0 ? Number.NEGATIVE_INFINITY : Date.parse(this.at(size).created_at);
    const now = this.now();
    const startMs = Math.max(now - count * BACKLOG_STEP_MS, Math.min(lastMs, now));
    const stepMs = Math.min(BACKLOG_STEP_MS, (now - startMs) / count);
    this.runs.push({ start: size + 1, count, ordinal: this.synthetic + 1, startMs, stepMs });
    this.synthetic += count;
  }

  append(type: string, data: Record<string, unknown>): ServiceEvent {
    const event: ServiceEvent = {
      type,
      id: eventIdAt(this.size + 1),
      created_at: new Date(this.now()).toISOString(),
      data,
    };
    const last = this.runs.at(-1);
    if (last !== undefined && 'events' in last) last.events.push(event);
    else this.runs.push({ start: this.size + 1, events: [event] });
    return event;
  }

  /** The events emitted one by one (sends, contact events, tests), in feed order; not the backlog. */
  *realEvents(): Generator<ServiceEvent> {
    for (const run of this.runs) if ('events' in run) yield* run.events;
  }

  /** The event at `position`, 1..size. */
  at(position: number): ServiceEvent {
    const run = this.runAt(position);
    const i = position - run.start;
    if ('events' in run) return run.events[i]!;
    const createdAtMs = Math.floor(run.startMs + i * run.stepMs);
    return backlogEventAt(run.ordinal + i, eventIdAt(position), createdAtMs, this.account);
  }

  /** The last `count` events of the feed, newest first. */
  newest(count: number): ServiceEvent[] {
    const events: ServiceEvent[] = [];
    for (let p = this.size; p >= 1 && events.length < count; p--) events.push(this.at(p));
    return events;
  }

  typeAt(position: number): string {
    const run = this.runAt(position);
    const i = position - run.start;
    return 'events' in run ? run.events[i]!.type : backlogType(run.ordinal + i);
  }

  /** The run holding `position` (1..size): the last run that starts at or before it. */
  private runAt(position: number): Run {
    let lo = 0;
    let hi = this.runs.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.runs[mid]!.start <= position) lo = mid;
      else hi = mid - 1;
    }
    return this.runs[lo]!;
  }
}

function checkCount(count: number): void {
  if (!Number.isSafeInteger(count) || count < 0 || count > MAX_BACKLOG) {
    throw new SimError(400, 'invalid_field', '"count" must be a whole number from 0 to 100000000000');
  }
}
