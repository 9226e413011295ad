import { defineConfig } from 'vitest/config';

/**
 * The files that run a second time with the queues in BullMQ's Postgres backend
 * (FEEDSYNC_TEST_QUEUE_BACKEND=postgres, test/support/queues.ts): the sync, consumer and
 * queue tests that do not concern Redis itself. Each takes its queues from the support.
 */
export const POSTGRES_QUEUE_FILES = [
  'test/consumer/consumer.test.ts',
  'test/sync/cli.test.ts',
  'test/sync/crash.test.ts',
  'test/sync/once.test.ts',
  'test/sync/embedding.test.ts',
  'test/sync/worker.test.ts',
  'test/sync/replicas.test.ts',
  'test/sync/two-workers.test.ts',
  'test/sync/sigterm.test.ts',
  'test/sync/sources.test.ts',
  'test/sync/foreign-feed.test.ts',
  'test/queue/requeue.test.ts',
  'test/queue/job-retries.test.ts',
  'test/tracing/traces.test.ts',
  'test/sync/reconcile.test.ts',
  'test/webhooks/receiver.test.ts',
  'test/webhooks/hybrid.test.ts',
  'test/metrics/watch-metrics.test.ts',
];

export default defineConfig({
  test: {
    // Creates the database TEST_DATABASE_URL names when the server has none of that name.
    globalSetup: ['test/support/global-setup.ts'],
    // Files share one Postgres and one Redis (each in its own schema and queue
    // prefix); two at a time keeps the two cores busy without starving the servers.
    // Fails a file that leaves a socket, server, child process or timer open.
    setupFiles: ['test/support/leaked-handles.ts'],
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 30_000,
    projects: [
      {
        extends: true,
        test: {
          name: 'redis',
          include: ['test/**/*.test.ts'],
          // The fault-injection suite runs on its own: `npm run test:faults`. Its support's
          // own unit tests (test/faults/support/) run here.
          exclude: ['test/faults/*.test.ts', 'node_modules/**'],
        },
      },
      {
        extends: true,
        test: {
          name: 'postgres-queues',
          include: POSTGRES_QUEUE_FILES,
          env: { FEEDSYNC_TEST_QUEUE_BACKEND: 'postgres' },
          // Each CLI run there checks the queues' schema on a connection of its own: a case
          // of many CLI runs (test/sync/cli.test.ts) takes longer on a busy machine.
          testTimeout: 60_000,
        },
      },
    ],
    // CI runs the README's `npm test` exactly as written and still needs a JSON report
    // to count from: it names the file here.
    ...(process.env.FEEDSYNC_TEST_REPORT
      ? { reporters: ['default', 'json'], outputFile: { json: process.env.FEEDSYNC_TEST_REPORT } }
      : {}),
  },
});
