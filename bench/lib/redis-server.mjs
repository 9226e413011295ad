import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';

/**
 * A redis-server of the bench's own, on a free loopback port (never the shared one,
 * which the bench must not stop), without persistence: for runs that freeze Redis.
 */
export async function startPrivateRedis() {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'feedsync-bench-redis-'));
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir],
    { stdio: 'ignore' },
  );
  const exited = new Promise((resolve) => child.once('close', resolve));
  const url = `redis://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    redis.on('error', () => {});
    try {
      await redis.connect();
      await redis.ping();
      break;
    } catch (err) {
      if (i >= 100) throw new Error(`redis-server on port ${port} did not answer: ${err.message}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    } finally {
      redis.disconnect();
    }
  }
  return {
    url,
    /** SIGSTOP: the server keeps its connections open and answers nothing. */
    freeze: () => process.kill(child.pid, 'SIGSTOP'),
    thaw: () => process.kill(child.pid, 'SIGCONT'),
    async stop() {
      process.kill(child.pid, 'SIGCONT');
      child.kill('SIGTERM');
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A free loopback TCP port. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}
