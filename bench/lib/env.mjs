import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import pg from 'pg';

/**
 * Where the benchmark runs: the same local Postgres and Redis as feedsync's
 * defaults (DATABASE_URL and REDIS_URL override them), loopback only. Every
 * schema and queue prefix it makes carries this run's tag and is dropped at the end.
 */
export const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
export const API_KEY = 'sim_test_bench';
export const SOURCE = 'default';
export const CLI = new URL('../../dist/bin/feedsync.js', import.meta.url).pathname;

/**
 * The node flags the image runs the worker with (the Dockerfile's ENTRYPOINT, between
 * `node` and `dist/bin/feedsync.js`): the bench measures the worker as it is deployed.
 */
export const IMAGE_NODE_FLAGS = (() => {
  const dockerfile = readFileSync(new URL('../../Dockerfile', import.meta.url), 'utf8');
  const entrypoint = /^ENTRYPOINT\s+(\[.*\])\s*$/m.exec(dockerfile);
  if (!entrypoint) throw new Error('the Dockerfile has no ENTRYPOINT in exec form');
  const args = JSON.parse(entrypoint[1]);
  return args.slice(1, args.indexOf('dist/bin/feedsync.js'));
})();

const tag = randomBytes(3).toString('hex');
const schemas = new Set();
const prefixes = new Set();

/** A schema name of this run's own, remembered for cleanup. */
export function benchSchema(label) {
  const name = `bench_${tag}_${label}`;
  schemas.add(name);
  return name;
}

/** A BullMQ prefix of this run's own, remembered for cleanup. */
export function benchPrefix(label) {
  const name = `bench-${tag}-${label}`;
  prefixes.add(name);
  return name;
}

export async function withPg(fn) {
  const client = new pg.Client({ connectionString: DATABASE_URL });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

export async function dropSchema(name) {
  await withPg((c) => c.query(`DROP SCHEMA IF EXISTS "${name}" CASCADE`));
  schemas.delete(name);
}

/** Deletes every key under the prefix, SCAN by SCAN (never KEYS on a shared Redis). */
export async function deletePrefix(prefix) {
  const redis = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
  await redis.connect();
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 5000);
      cursor = next;
      if (keys.length > 0) await redis.unlink(...keys);
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
  prefixes.delete(prefix);
}

/** Drops whatever this run still holds. */
export async function cleanUp() {
  for (const s of [...schemas])
    await dropSchema(s).catch((err) => console.error(`drop ${s}: ${err.message}`));
  for (const p of [...prefixes])
    await deletePrefix(p).catch((err) => console.error(`delete ${p}: ${err.message}`));
}
