import type { ServiceEvent } from '../api/types.js';
import { BACKLOG_STEP_MS, backlogEvent, backlogType } from './backlog.js';
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

/**
 * The feed, in order: the synthetic backlog at positions 1..backlog, then the
 * real events as they were emitted. An id maps back to its position in O(1).
 */
export class EventLog {
  private backlog = 0;
  private backlogStartMs = 0;
  private readonly real: ServiceEvent[] = [];

  constructor(
    private readonly now: () => number,
    /** Named in the backlog's content; null for the default account's. */
    private readonly account: string | null = null,
  ) {}

  /** Events in the feed, backlog included. */
  get size(): number {
    return this.backlog + this.real.length;
  }

  get backlogSize(): number {
    return this.backlog;
  }

  /** Replaces the backlog. Its events end just before now, so real events follow in time too. */
  setBacklog(count: number): void {
    if (!Number.isSafeInteger(count) || count < 0 || count > 1e11) {
      throw new SimError(400, 'invalid_field', '"count" must be a whole number from 0 to 100000000000');
    }
    if (this.real.length > 0) {
      throw new SimError(409, 'backlog_locked', 'the backlog can only be set before the first real event');
    }
    this.backlog = count;
    this.backlogStartMs = this.now() - count * BACKLOG_STEP_MS;
  }

  append(type: string, data: Record<string, unknown>): ServiceEvent {
    const event: ServiceEvent = {
      type,
      id: eventIdAt(this.size + 1),
      created_at: new Date(this.now()).toISOString(),
      data,
    };
    this.real.push(event);
    return event;
  }

  /** The event at `position`, 1..size. */
  at(position: number): ServiceEvent {
    if (position <= this.backlog)
      return backlogEvent(position, eventIdAt(position), this.backlogStartMs, this.account);
    return this.real[position - this.backlog - 1]!;
  }

  /** The last `count` events of the feed, newest first. */
  newest(count: number): ServiceEvent[] {
    const events: ServiceEvent[] = [];
    for (let p = this.size; p >= 1 && events.length < count; p--) events.push(this.at(p));
    return events;
  }

  typeAt(position: number): string {
    if (position <= this.backlog) return backlogType(position);
    return this.real[position - this.backlog - 1]!.type;
  }
}
