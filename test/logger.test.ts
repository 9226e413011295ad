import { describe, expect, it } from 'vitest';
import { ServiceClient } from '../src/api/client.js';
import { redactUrl } from '../src/logger.js';
import { captureLogger } from './support/logs.js';

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

  it('redactUrl hides a password, in the user info and in query parameters', () => {
    expect(redactUrl('postgres://u:pw@h:5432/d')).toBe('postgres://u:REDACTED@h:5432/d');
    expect(redactUrl('postgres://u@h:5432/d?password=pw1&sslmode=require')).toBe(
      'postgres://u@h:5432/d?password=REDACTED&sslmode=require',
    );
    expect(redactUrl('redis://h:6379/?password=pw2')).toBe('redis://h:6379/?password=REDACTED');
    expect(redactUrl('redis://a:1,redis://:pw3@b:2')).toBe('redis://a:1,redis://:REDACTED@b:2');
    expect(redactUrl('postgres://h/d?sslpassword=x&sentinelPassword=y')).not.toMatch(/=x|=y/);
    expect(redactUrl('::')).toBe('[unparseable URL]');
  });

  it('scrubs query-parameter passwords from any text, even ones it was not told of', () => {
    const { logger, text } = captureLogger();
    logger.warn(
      { url: 'postgres://db/app?password=qp-secret-1' },
      'at redis://cache/?password=qp-secret-2 now',
    );
    expect(text()).not.toMatch(/qp-secret/);
    expect(text()).toContain('password=[REDACTED]');
  });

  it('logs stack traces at debug and trace only', () => {
    const err = new Error('a failure with a stack');
    const info = captureLogger({ level: 'info' });
    info.logger.error({ err }, 'failed');
    const line = JSON.parse(info.text()) as { err: Record<string, unknown> };
    expect(line.err).toMatchObject({ type: 'Error', message: 'a failure with a stack' });
    expect(line.err.stack).toBeUndefined();
    const debug = captureLogger({ level: 'debug' });
    debug.logger.error({ err }, 'failed');
    expect((JSON.parse(debug.text()) as { err: { stack: string } }).err.stack).toContain('logger.test.ts');
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

describe('the err serializer', () => {
  it('keeps message, code and command name of an ioredis error, never its arguments or earlier errors', () => {
    const { logger, text } = captureLogger({ level: 'trace' });
    const lua = '--[[ Adds a job ]] local rcall = redis.call';
    const reply = Object.assign(new Error('MOVED 1234 127.0.0.1:7001'), {
      name: 'ReplyError',
      command: { name: 'evalsha', args: ['sha', '8', lua, '{"to":["bob@example.test"]}'] },
      previousErrors: [new Error('bob@example.test')],
    });
    const allFailed = Object.assign(new Error('Failed to refresh slots cache.'), {
      name: 'ClusterAllFailedError',
      lastNodeError: Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:7000'), {
        code: 'ECONNREFUSED',
      }),
    });
    logger.error({ err: new Error('publish failed', { cause: reply }) }, 'relay');
    logger.warn({ err: allFailed }, 'connect');
    logger.error({ err: new Error('x'.repeat(5000)) }, 'long');
    const out = text();
    expect(out).not.toMatch(/bob@example\.test|redis\.call|--\[\[|"args"|previousErrors/);
    const [relay, connect, long] = out
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { err: Record<string, unknown> });
    expect(relay?.err.cause).toMatchObject({
      type: 'ReplyError',
      message: 'MOVED 1234 127.0.0.1:7001',
      command: 'evalsha',
    });
    expect(connect?.err.lastNodeError).toMatchObject({ code: 'ECONNREFUSED' });
    expect(String(long?.err.message).length).toBeLessThan(400);
    expect(String(long?.err.stack).length).toBeLessThan(3000);
  });
});
