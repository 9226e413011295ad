import { defineConfig } from 'vitest/config';

// The fault-injection suite (`npm run test:faults`): kills, stops and floods real
// services, so one file at a time, with room for slow machines. It writes
// docs/RELIABILITY.md when every item has run.
export default defineConfig({
  test: {
    include: ['test/faults/**/*.test.ts'],
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
