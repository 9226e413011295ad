import { describe, expect, it } from 'vitest';
import { ServiceClient } from '../../src/api/client.js';
import { redactUrl } from '../../src/logger.js';
import { captureLogger } from '../support/logs.js';

describe('logger redaction', () => {
  it('scrubs secret values wherever they appear, and secret keys by name', () => {
    const { logger, text } = captureLogger({
      secrets: ['svc_live_topsecret', 'whsec_rotating'],
      level: 'trace',
    });
    logger.info(
      { apiKey: 'svc_live_topsecret', nested: { secret: 'x', password: 'y' } },
      'key svc_live_topsecret',
    );
    logger.error({ err: new Error('failed with whsec_rotating inside') }, 'oops');
    logger.warn({ url: 'postgres://app:dbpass123@db:5432/app' }, 'connecting to redis://:r3dis@cache:6379');
    const out = text();
    for (const secret of ['svc_live_topsecret', 'whsec_rotating', 'dbpass123', 'r3dis']) {
      expect(out).not.toContain(secret);
    }
    expect(out).toContain('[REDACTED]');
    expect(
      out
        .trim()
        .split('\n')
        .every((l) => JSON.parse(l)),
    ).toBe(true);
  });

  it('redactUrl hides a password', () => {
    expect(redactUrl('postgres://u:pw@h:5432/d')).toBe('postgres://u:REDACTED@h:5432/d');
    expect(redactUrl('::')).toBe('[unparseable URL]');
  });

  it('errors from the API client never carry the key', async () => {
    const key = 'svc_test_neverleak';
    const client = new ServiceClient({
      baseUrl: 'http://127.0.0.1:1/api',
      apiKey: key,
      retry: { maxRetries: 0, maxRetryWaitMs: 0 },
    });
    const err = (await client.listWebhooks().then(
      () => null,
      (e: unknown) => e,
    )) as Error;
    await client.close();
    expect(err).toBeInstanceOf(Error);
    expect(
      JSON.stringify({ message: err.message, stack: err.stack, cause: String(err.cause) }),
    ).not.toContain(key);
  });
});
