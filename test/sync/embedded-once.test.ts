import { describe, expect, it } from 'vitest';
import { createSync } from '../../src/sync/sync.js';
import { testConfig } from '../support/config.js';
import { useSimulator } from '../support/simulator.js';
import {
  CONTACT_QUEUE,
  captureLogger,
  EMAIL_QUEUE,
  queuedJobIds,
  storedCount,
  useSandboxes,
} from './harness.js';

// createSync().runOnce(), an application's embedded once run: its relay is made once
// for every run, and what it publishes is the run's, in its summary line and its result.
const BACKLOG = 120;
const sim = useSimulator({ backlog: BACKLOG });
const sandbox = useSandboxes();

describe('createSync().runOnce()', () => {
  it('counts the jobs it published in its result and in its summary line', async () => {
    const box = await sandbox('embedded_once');
    const { logger, text } = captureLogger('info');
    const sync = createSync(testConfig({ schema: box.schema, prefix: box.prefix, baseUrl: sim().baseUrl }), {
      logger,
    });
    try {
      const first = await sync.runOnce();
      expect(first).toMatchObject({ stored: BACKLOG, drained: true });
      const jobs =
        (await queuedJobIds(box.prefix, EMAIL_QUEUE)).length +
        (await queuedJobIds(box.prefix, CONTACT_QUEUE)).length;
      expect(jobs).toBeGreaterThan(0);
      expect(first.published).toBe(jobs);
      const again = await sync.runOnce();
      expect(again).toMatchObject({ stored: 0, published: 0 });
    } finally {
      await sync.close();
    }
    expect(await storedCount(box.store)).toBe(BACKLOG);
    const summaries = text()
      .split('\n')
      .filter((l) => l.includes('"jobs_published"'))
      .map((l) => (JSON.parse(l) as { jobs_published: number }).jobs_published);
    expect(summaries).toHaveLength(2);
    // The first run's jobs, as its result counts them.
    expect(summaries[0]).toBeGreaterThan(0);
    expect(summaries[1]).toBe(0);
  });
});
