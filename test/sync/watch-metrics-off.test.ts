import { describe, expect, it } from 'vitest';
import { runWorker } from '../../src/sync/worker.js';
import { testConfig } from '../support/config.js';
import { freePort, portOpen, waitFor } from '../support/processes.js';
import { useSimulator } from '../support/simulator.js';
import { captureLogger, useSandboxes } from './harness.js';

/** An embedded watch with serveMetrics: false opens no port: METRICS_PORT stays free while it runs. */
const sim = useSimulator({ backlog: 5 });
const sandbox = useSandboxes();

describe('runWorker watch with serveMetrics: false', () => {
  it('syncs without opening METRICS_PORT', async () => {
    const box = await sandbox('watch_no_metrics');
    const port = await freePort();
    const config = testConfig(
      { schema: box.schema, prefix: box.prefix, baseUrl: sim().baseUrl },
      { METRICS_PORT: String(port), METRICS_HOST: '127.0.0.1' },
    );
    const stop = new AbortController();
    let stored = -1;
    const running = runWorker(config, {
      mode: 'watch',
      signal: stop.signal,
      serveMetrics: false,
      logger: captureLogger().logger,
      hooks: {
        onOutcome: (o) => {
          if (o.ok) stored = o.result.stored;
        },
      },
    });
    try {
      await waitFor(() => stored === 5, { timeoutMs: 20_000, what: 'the first turn' });
      expect(await portOpen(port)).toBe(false);
    } finally {
      stop.abort();
      await running;
    }
  });
});
