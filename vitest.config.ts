import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The fault-injection suite runs on its own: `npm run test:faults`.
    exclude: ['test/faults/**', 'node_modules/**'],
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
    // CI runs the README's `npm test` exactly as written and still needs a JSON report
    // to count from: it names the file here.
    ...(process.env.FEEDSYNC_TEST_REPORT
      ? { reporters: ['default', 'json'], outputFile: { json: process.env.FEEDSYNC_TEST_REPORT } }
      : {}),
  },
});
