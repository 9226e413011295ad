import { expect, it } from 'vitest';
import { startRedisServer } from './processes.js';

// FLUSHALL and CONFIG SET in the tests go through RedisServer.admin(): this keeps that
// client off the machine's shared Redis, whatever port a test passes.
it('startRedisServer refuses the shared Redis on 6379', async () => {
  await expect(startRedisServer({ port: 6379 })).rejects.toThrow("port 6379 is the shared Redis's");
});
