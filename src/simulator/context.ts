import { type Logger, pino } from 'pino';
import type { ServiceEvent } from '../api/types.js';
import { Emails } from './emails.js';
import { EventLog } from './event-log.js';
import { DEFAULT_FAULTS, mergeFaults } from './faults.js';
import { Stats } from './stats.js';
import { Timers } from './timers.js';
import type { Faults, SimulatorOptions, SimulatorStats } from './types.js';
import { Deliverer } from './webhook-deliveries.js';
import { WebhookRegistry } from './webhooks.js';

/** The simulator's whole state, shared by the routes and the in-process API. */
export class SimContext {
  readonly now: () => number;
  readonly random: () => number;
  readonly logger: Logger;
  readonly timers = new Timers();
  readonly stats = new Stats();
  readonly log: EventLog;
  readonly emails: Emails;
  readonly webhooks: WebhookRegistry;
  readonly deliverer: Deliverer;
  faults: Faults;

  constructor(opts: SimulatorOptions) {
    this.now = opts.now ?? Date.now;
    this.random = opts.random ?? Math.random;
    this.logger = opts.logger ?? pino({ level: 'silent' });
    this.faults = mergeFaults({ ...DEFAULT_FAULTS }, opts.faults ?? {});
    this.log = new EventLog(this.now);
    this.log.setBacklog(opts.backlog ?? 0);
    this.emails = new Emails((type, data) => this.emit(type, data));
    this.webhooks = new WebhookRegistry(this.now);
    this.deliverer = new Deliverer({
      timeScale: opts.timeScale ?? 1,
      timeoutMs: opts.deliveryTimeoutMs ?? 10_000,
      now: this.now,
      timers: this.timers,
      stats: this.stats,
      logger: this.logger,
    });
  }

  /** Appends an event to the feed and starts its deliveries to the webhooks that want it. */
  emit(type: string, data: Record<string, unknown>): ServiceEvent {
    const event = this.log.append(type, data);
    for (const reg of this.webhooks.matching(type)) this.deliverer.deliver(reg, event);
    return event;
  }

  emitContactEvent(type: string, email: string): ServiceEvent {
    return this.emit(type, { email });
  }

  snapshot(): SimulatorStats {
    return this.stats.snapshot(this.emails.count, this.log.size);
  }
}
