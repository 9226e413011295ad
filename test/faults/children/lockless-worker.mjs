// A sync worker that never takes the source's lease: only the cursor's compare-and-set
// keeps it right, as for a replica of a version before leases during a rolling update
// (docs/SCALING.md). It runs the built code (dist/) and pages until caught up, starting again from
// the stored cursor whenever another worker moved it first, then drains its outbox.
// Prints {stored, duplicates, conflicts} as JSON. Configuration: the usual environment.

import { ServiceClient } from '../../../dist/api/client.js';
import { publisherFor } from '../../../dist/compose/parts.js';
import { loadConfig } from '../../../dist/config/config.js';
import { createFeedClient } from '../../../dist/feed/feed-client.js';
import { createLogger } from '../../../dist/logger.js';
import { startRelay } from '../../../dist/queue/relay-loop.js';
import { routeFor } from '../../../dist/queue/routes.js';
import { createApplier } from '../../../dist/store/applier.js';
import { ensureCursor, isStored } from '../../../dist/store/cursor.js';
import { createStore } from '../../../dist/store/db.js';
import { pgOutbox } from '../../../dist/store/outbox.js';
import { catchUp } from '../../../dist/sync/catch-up.js';

const config = loadConfig();
const logger = createLogger({ level: config.logLevel, destination: process.stderr });
const store = createStore({ ...config.database, logger });
// Redis, or with QUEUE_BACKEND=postgres the queues in Postgres, as the CLI chooses.
const publisher = publisherFor(config);
const relay = startRelay({ outbox: pgOutbox(store), publisher, logger });
const applier = createApplier(store, routeFor(config.queues));
const client = new ServiceClient({ baseUrl: config.feed.baseUrl, apiKey: config.feed.apiKey });
const fetchPage = createFeedClient({
  client,
  limit: config.feed.pageLimit,
  listField: config.feed.listField,
  types: config.feed.types,
  retry: { maxRetries: config.feed.maxRetries, maxRetryWaitMs: config.feed.maxRetryWaitMs },
});

const totals = { stored: 0, duplicates: 0, conflicts: 0 };
try {
  // Bounded: every conflict means another worker committed, and the feed is finite.
  for (let round = 0; round < 100_000; round++) {
    const cursor = await ensureCursor(store, config.feed.source, config.feed.types);
    const result = await catchUp({
      source: config.feed.source,
      start: cursor.afterId,
      fetchPage,
      apply: (batch) => applier.apply(batch),
      isStored: (id) => isStored(store, config.feed.source, id),
      signal: new AbortController().signal,
      onCommit: () => relay.kick(),
    });
    totals.stored += result.stored;
    totals.duplicates += result.duplicates;
    if (result.status !== 'cursor-conflict') break;
    totals.conflicts++;
  }
  await relay.drain();
  process.stdout.write(`${JSON.stringify(totals)}\n`);
} finally {
  await relay.stop();
  await client.close();
  await publisher.close();
  await store.close();
}
