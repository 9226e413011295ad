// A `sync --once` in a child process, with a crash point for the crash tests.
// It runs the built code (dist/, made by `npm test`'s pretest build) so that the
// process is exactly the one users run, plus one wrapper that kills it with
// SIGKILL at a chosen moment:
//   CRASH_AT=after-fetch:N     once the N-th page has been fetched, before it commits
//   CRASH_AT=after-commit:N    right after the N-th commit, before the relay publishes it
//   CRASH_AT=after-add:N       right after the N-th addBulk, before the rows are marked published
//   CRASH_AT=before-add:N      before the N-th addBulk: every earlier batch is marked published
// Configuration comes from the usual environment variables. Exit code as the CLI's.

import { ServiceClient } from '../../dist/api/client.js';
import { publisherFor } from '../../dist/compose/parts.js';
import { loadConfig } from '../../dist/config/config.js';
import { exitCodeOf } from '../../dist/errors.js';
import { createFeedClient } from '../../dist/feed/feed-client.js';
import { createLogger } from '../../dist/logger.js';
import { createSync } from '../../dist/sync/sync.js';

const [point, nth] = (process.env.CRASH_AT ?? 'none:0').split(':');
const limit = Number(nth);
const counts = { 'after-fetch': 0, 'after-commit': 0, 'after-add': 0, 'before-add': 0 };
const maybeCrash = (at) => {
  if (at !== point) return;
  counts[at] += 1;
  if (counts[at] === limit) process.kill(process.pid, 'SIGKILL');
};

const config = loadConfig();
const logger = createLogger({ level: config.logLevel, destination: process.stderr });
// Redis, or with QUEUE_BACKEND=postgres the queues in Postgres, as the CLI chooses.
const real = publisherFor(config);
const publisher = {
  ...real,
  async addBulk(queue, jobs) {
    maybeCrash('before-add');
    await real.addBulk(queue, jobs);
    maybeCrash('after-add');
  },
};
const client = new ServiceClient({
  baseUrl: config.feed.baseUrl,
  apiKey: config.feed.apiKey,
  timeoutMs: config.feed.timeoutMs,
});
const fetchFeed = createFeedClient({
  client,
  limit: config.feed.pageLimit,
  listField: config.feed.listField,
  types: config.feed.types,
  retry: { maxRetries: config.feed.maxRetries, maxRetryWaitMs: config.feed.maxRetryWaitMs },
});
const sync = createSync(config, {
  logger,
  publisher,
  fetchPage: async (after, signal) => {
    const page = await fetchFeed(after, signal);
    maybeCrash('after-fetch');
    return page;
  },
  hooks: { onCommit: () => maybeCrash('after-commit') },
});
try {
  const result = await sync.runOnce();
  process.stdout.write(`${JSON.stringify(result)}\n`);
  process.exitCode = result.drained ? 0 : 1;
} catch (err) {
  logger.error({ err }, 'run failed');
  process.exitCode = exitCodeOf(err);
} finally {
  await sync.close();
  await real.close();
  await client.close();
}
