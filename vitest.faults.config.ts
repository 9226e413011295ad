import { defineConfig } from 'vitest/config';

/**
 * The fault files that run a second time with the queues in BullMQ's Postgres backend
 * (`npm run test:faults:postgres`, FEEDSYNC_TEST_QUEUE_BACKEND=postgres): every sandbox's
 * queues go to Postgres (test/faults/support/sandbox.ts), and the jobs are counted there.
 * Item numbers stay the items' own; the run writes the Postgres column of docs/RELIABILITY.md.
 *
 * Left out, because their faults or their assertions are about Redis itself:
 * redis-down (Redis stopped and flushed), redis-frozen, redis-sentinel-failover and
 * redis-cluster-failover (Redis topologies), relay-memory (a private redis-server frozen
 * with SIGSTOP while the relay publishes to it). pg-queues (items 37-41) puts its queues
 * in Postgres in either run already; so does item 42 of pgbouncer, which runs in both.
 */
export const POSTGRES_QUEUE_FAULT_FILES = [
  'test/faults/kill-loop.test.ts',
  'test/faults/concurrent-workers.test.ts',
  'test/faults/pg-terminate.test.ts',
  'test/faults/postgres-down.test.ts',
  'test/faults/retry-after.test.ts',
  'test/faults/hung-response.test.ts',
  'test/faults/bad-pages.test.ts',
  'test/faults/sigterm.test.ts',
  'test/faults/interleavings.test.ts',
  'test/faults/poison.test.ts',
  'test/faults/many-sources.test.ts',
  'test/faults/leases.test.ts',
  'test/faults/pgbouncer.test.ts',
  'test/faults/feed-unreachable.test.ts',
  'test/faults/slow-senders.test.ts',
  'test/faults/retention.test.ts',
  'test/faults/statement-timeout.test.ts',
  'test/faults/postgres-silent.test.ts',
  'test/faults/endless-feed.test.ts',
  'test/faults/trickling-senders.test.ts',
  'test/faults/consumer.test.ts',
  'test/faults/unsigned-flood.test.ts',
  'test/faults/postgres-frozen.test.ts',
  'test/faults/renamed-sources.test.ts',
];

const queuesInPostgres = process.env.FEEDSYNC_TEST_QUEUE_BACKEND === 'postgres';

// The fault-injection suite (`npm run test:faults`): kills, stops and floods real
// services, so one file at a time, with room for slow machines. When every item of its
// files has run, it records its backend's results in docs/reliability/results.json and
// rewrites docs/RELIABILITY.md from both backends' (the files above with the queues in
// Postgres, every file with them in Redis). The support's unit tests run in `npm test`.
export default defineConfig({
  test: {
    include: queuesInPostgres ? POSTGRES_QUEUE_FAULT_FILES : ['test/faults/*.test.ts'],
    globalSetup: ['test/faults/support/global-setup.ts'],
    // As in vitest.config.ts: a file that leaves a socket, server, child or timer open fails.
    setupFiles: ['test/support/leaked-handles.ts'],
    pool: 'forks',
    maxWorkers: 1,
    fileParallelism: false,
    testTimeout: 240_000,
    hookTimeout: 120_000,
  },
});
