import { expect, it } from 'vitest';
import { redisAdvice } from '../../src/cli/redis-advice.js';
import { toRedisError } from '../../src/redis/errors.js';

it('says what a Redis that runs and refuses is refusing for, and "check that Redis runs" only when it may not run', () => {
  const oom = toRedisError(new Error("OOM command not allowed when used memory > 'maxmemory'."));
  const readonly = toRedisError(new Error("READONLY You can't write against a read only replica."));
  expect(redisAdvice(oom)).toMatch(/^Redis refused the jobs for want of memory \(OOM/);
  expect(redisAdvice(readonly)).toMatch(/^Redis answered READONLY: REDIS_URL reaches a replica/);
  for (const advice of [redisAdvice(oom), redisAdvice(readonly)])
    expect(advice).not.toContain('check that Redis runs');
  const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6390'), { code: 'ECONNREFUSED' });
  expect(redisAdvice(toRedisError(refused))).toBe('check that Redis runs');
  expect(redisAdvice(null)).toBe('check that Redis runs');
});
