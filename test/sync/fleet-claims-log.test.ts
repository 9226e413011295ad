import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureLeaseRows } from '../../src/store/lease-statements.js';
import { startFleetClaims } from '../../src/sync/fleet-claims.js';
import { migratedStore } from '../store/migrated-store.js';
import { captureLogger } from '../support/logs.js';

/** A lease row of a source the worker does not run is named by where the worker's sources come from. */
let db: Awaited<ReturnType<typeof migratedStore>>;
beforeAll(async () => {
  db = await migratedStore('fleet_claims_log');
  await ensureLeaseRows(db.store, ['someone-else']);
});
afterAll(() => db.dispose());

describe("a lease row of another worker's source", () => {
  it.each([
    [false, "not this worker's FEED_SOURCE"],
    [true, "not in this worker's sources file"],
  ])('fromFile %s: the log says "%s"', async (fromFile, words) => {
    const logs = captureLogger({ level: 'info' });
    const claims = await startFleetClaims({
      store: db.store,
      sources: ['mine'],
      fromFile,
      lease: { holder: 'test/1', leaseMs: 30_000 },
      everyMs: 60_000,
      logger: logs.logger,
    });
    try {
      await claims.claim(10);
    } finally {
      await claims.stop();
    }
    expect(logs.text()).toContain(words);
    expect(logs.text()).not.toContain(fromFile ? 'FEED_SOURCE' : 'sources file;');
  });
});
