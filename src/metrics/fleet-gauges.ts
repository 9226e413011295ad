import { Gauge, type GaugeConfiguration, type Registry } from 'prom-client';
import type { FleetCounts, WorstSource } from '../store/source-states.js';

/** The states of a fleet's sources, counted, and the worst of them (source-states.ts). */
export interface FleetStates {
  counts: FleetCounts;
  worst: WorstSource[];
}

/**
 * How many sources each list of the worst names: those failing (most turns in a row
 * first), the most lagging, and those longest without a success. At most three times
 * this many sources carry per-source series, whatever the size of the fleet.
 */
export const WORST_PER_LIST = 10;

/**
 * The gauges of a fleet (more than one source), read at scrape time from the rows kept
 * per source (one statement, source-states.ts), the same on every replica:
 * - how many sources are failing, lagging, never caught up, and how many there are;
 * - last success, cursor lag and failures in a row, with a `source` label, for the
 *   worst sources only, chosen again at every scrape: a source no longer among them
 *   loses its series, so a replica never keeps one of every source it ever held.
 * A read that fails (Postgres away) leaves the last values standing.
 */
export function fleetGauges(registry: Registry, read: (k: number) => Promise<FleetStates>): void {
  // A scrape calls every gauge's collect() before it awaits any (prom-client's
  // Registry.metrics), so the gauges of one scrape share the read in flight; the next
  // scrape reads again, however soon it comes.
  let inFlight: Promise<FleetStates | null> | null = null;
  const states = (): Promise<FleetStates | null> => {
    inFlight ??= read(WORST_PER_LIST)
      .catch(() => null)
      .finally(() => {
        inFlight = null;
      });
    return inFlight;
  };
  const perSource = (name: string, help: string, value: (w: WorstSource) => number | null): void => {
    new Gauge({
      name,
      help: `${help} Fleet: for the worst sources only (failing, most lagging, longest without a success).`,
      labelNames: ['source'],
      registers: [registry],
      async collect() {
        const now = await states();
        if (now === null) return;
        this.reset();
        for (const w of now.worst) {
          const v = value(w);
          if (v !== null) this.set({ source: w.source }, v);
        }
      },
    });
  };
  perSource(
    'feedsync_last_success_timestamp_seconds',
    'When a run of the source last caught up with the feed (unix seconds).',
    (w) => w.lastSuccessSeconds,
  );
  perSource(
    'feedsync_cursor_lag_seconds',
    "Now minus the newest stored event's created_at (events dated in the future left out), by source.",
    (w) => w.lagSeconds,
  );
  perSource(
    'feedsync_run_consecutive_failures',
    'Turns of the source in a row that failed (its lease row); 0 after a turn that did not fail.',
    (w) => w.failures,
  );
  const counted = (
    value: (c: FleetCounts) => number,
  ): Pick<GaugeConfiguration<string>, 'registers' | 'collect'> => ({
    registers: [registry],
    async collect() {
      const now = await states();
      if (now !== null) this.set(value(now.counts));
    },
  });
  new Gauge({ name: 'feedsync_sources', help: 'Sources of the sources file.', ...counted((c) => c.sources) });
  new Gauge({
    name: 'feedsync_sources_failing',
    help: 'Sources whose last turn failed.',
    ...counted((c) => c.failing),
  });
  new Gauge({
    name: 'feedsync_sources_lagging',
    help: 'Sources whose newest stored event is over 30 minutes old (LAGGING_AFTER_SECONDS).',
    ...counted((c) => c.lagging),
  });
  new Gauge({
    name: 'feedsync_sources_never_succeeded',
    help: 'Sources that have not caught up with their feed once.',
    ...counted((c) => c.neverSucceeded),
  });
}
