import { Registry } from 'prom-client';
import { request } from 'undici';
import { afterAll, describe, expect, it } from 'vitest';
import { publisherFor, storeFor } from '../../src/compose/parts.js';
import { createLogger } from '../../src/logger.js';
import { startWorkerHealth } from '../../src/metrics/worker-health.js';
import { testConfig } from '../support/config.js';
import { uniquePrefix } from '../support/redis.js';

const config = testConfig({ schema: 'public', prefix: uniquePrefix('worker_health') });
const logger = createLogger({ level: 'silent' });
const store = storeFor(config, logger);
const publisher = publisherFor(config);

afterAll(async () => {
  await publisher.close();
  await store.close();
});

describe("the watch's /healthz", () => {
  it('fails while one lane shows no progress, though the loop beats, and passes again once it moves on', async () => {
    let stalled: string | null = null;
    const health = await startWorkerHealth({
      port: 0,
      host: '127.0.0.1',
      staleAfterMs: 60_000,
      registry: new Registry(),
      logger,
      store,
      publisher,
      lastBeat: () => Date.now(),
      stalledSource: () => stalled,
    });
    const live = async (): Promise<number> => {
      const res = await request(`http://127.0.0.1:${health.port}/healthz`);
      await res.body.dump();
      return res.statusCode;
    };
    try {
      expect(await live()).toBe(200);
      stalled = 'default';
      expect(await live()).toBe(503);
      stalled = null;
      expect(await live()).toBe(200);
    } finally {
      await health.close();
    }
  });
});
