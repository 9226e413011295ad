import type { Logger } from '../logger.js';
import type { Store } from '../store/db.js';
import { type Claimed, type ClaimScope, claimDue } from '../store/lease.js';
import type { LeaseOptions } from '../store/lease-renewal.js';
import { ensureLeaseRows } from '../store/lease-statements.js';

export interface FleetClaimsOptions {
  store: Store;
  /** The sources this worker runs (its file, or the one source). */
  sources: readonly string[];
  /** Whether they come from a sources file (FEED_SOURCES_FILE), else FEED_SOURCE's one: the log says which. */
  fromFile: boolean;
  lease: LeaseOptions;
  /** How often the lease rows of the sources are made where missing. */
  everyMs: number;
  logger: Logger;
  /** Lease rows made again after the first round: rows deleted while the worker ran. */
  onRowsMade?: (count: number) => void;
}

export interface FleetClaims {
  /** Claims up to `limit` due sources of this worker's file (watchSources' claim). */
  claim(limit: number): Promise<Claimed>;
  /** Stops the timer after the round in hand. */
  stop(): Promise<void>;
}

/**
 * A watch replica's claims over the lease rows, which follow its sources file: the
 * rows missing are made at start and then on a timer (in batches, ON CONFLICT DO
 * NOTHING), so a row deleted by hand comes back within `everyMs` and its source is
 * claimed again. The claim names no source of the file: it reads the due rows in order
 * and leaves out only the sources this worker met that are not in its file (removed
 * from it, or another deployment's), each handed back untouched the first time. When
 * those outnumber the file (a worker of one source among many) the claim names the
 * file's sources instead.
 */
export async function startFleetClaims(opts: FleetClaimsOptions): Promise<FleetClaims> {
  const { store, sources, lease } = opts;
  const log = opts.logger.child({ module: 'scheduler' });
  const listed = new Set(sources);
  const whose = opts.fromFile ? "in this worker's sources file" : "this worker's FEED_SOURCE";
  const foreign = new Set<string>();
  let foreignList: readonly string[] = [];
  const made = await ensureLeaseRows(store, sources);
  log.debug({ made, sources: sources.length }, 'lease rows of the sources file made where missing');

  let round: Promise<void> = Promise.resolve();
  const timer = setInterval(() => {
    round = round.then(async () => {
      try {
        const again = await ensureLeaseRows(store, sources);
        if (again === 0) return;
        log.warn(
          { made: again },
          'lease rows of sources of the file were missing (deleted by hand?) and were made again; ' +
            'those sources are claimed from now on',
        );
        opts.onRowsMade?.(again);
      } catch (err) {
        log.warn({ err }, 'could not make the missing lease rows; the next round tries again');
      }
    });
  }, opts.everyMs);
  timer.unref();

  const scope = (): ClaimScope =>
    foreign.size > sources.length ? { only: sources } : { except: foreignList };

  return {
    async claim(limit) {
      const claimed = await claimDue(store, limit, lease, scope());
      const mine = claimed.leases.filter((held) => listed.has(held.source));
      for (const held of claimed.leases) {
        if (listed.has(held.source)) continue;
        foreign.add(held.source);
        foreignList = [...foreign];
        log.info(
          { source: held.source },
          `a lease row names a source that is not ${whose}; it is left to the workers that run it`,
        );
        await held.putBack();
      }
      return { leases: mine, nextDueInMs: claimed.nextDueInMs };
    },
    async stop() {
      clearInterval(timer);
      await round;
    },
  };
}
