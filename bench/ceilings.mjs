import { Pool } from 'undici';
import { parseRedisSettings } from '../dist/config/redis-settings.js';
import { createLogger } from '../dist/logger.js';
import { createRedisPublisher } from '../dist/queue/redis-publisher.js';
import { startRelay } from '../dist/queue/relay-loop.js';
import { jobIdFor, jobOptionsFor } from '../dist/queue/routes.js';
import { createApplier } from '../dist/store/applier.js';
import { ensureCursor } from '../dist/store/cursor.js';
import { outboxBacklog, pgOutbox } from '../dist/store/outbox.js';
import { backendMeter, cpuMs } from './lib/cpu.mjs';
import { API_KEY, benchPrefix, deletePrefix, dropSchema, REDIS_URL, SOURCE } from './lib/env.mjs';
import { backlogEvents, defaultQueues, migratedStore, route } from './lib/store.mjs';

/**
 * The three ceilings: what each part alone can do with the same events, one
 * request or statement at a time as feedsync issues them. The slowest one bounds
 * the whole. Each also reports the CPU time it took, in ms, of this process and of
 * the server it drives (`cpu`: {pg, redisPid, simPid}).
 */

/** Runs `fn`, measuring this process's CPU and, through `others`, that of servers. */
async function measured(fn, others = {}) {
  const own0 = process.cpuUsage();
  const from = Object.fromEntries(Object.entries(others).map(([k, pid]) => [k, cpuMs(pid)]));
  const started = performance.now();
  const value = await fn();
  const seconds = (performance.now() - started) / 1000;
  const own = process.cpuUsage(own0);
  const cpu = { bench: (own.user + own.system) / 1000 };
  for (const [k, pid] of Object.entries(others)) cpu[k] = cpuMs(pid) - from[k];
  return { value, seconds, cpu };
}

/**
 * `measured`, plus the CPU time of this process's own Postgres backends (`cpu.pg`
 * finds them), in `cpu.postgres`. The backends are followed from before the call.
 */
async function measuredWithPostgres(cpu, fn, others = {}) {
  const backends = backendMeter(cpu.pg, process.pid);
  const timer = setInterval(() => void backends.sample(), 50);
  try {
    await backends.sample();
    const before = backends.totalMs();
    const result = await measured(fn, others);
    await backends.sample();
    return { ...result, cpu: { ...result.cpu, postgres: backends.totalMs() - before } };
  } finally {
    clearInterval(timer);
  }
}

/** Feed paging alone: sequential cursor requests with next_after, the body parsed and nothing else. */
export async function feedPaging(sim, count, limit, cpu) {
  await sim.setLatency(0);
  await sim.setBacklog(count);
  const base = new URL(sim.baseUrl);
  const pool = new Pool(base.origin, { connections: 1 });
  let requests = 0;
  try {
    const {
      value: events,
      seconds,
      cpu: used,
    } = await measured(
      async () => {
        let after = null;
        let n = 0;
        for (let i = 0; i <= Math.ceil(count / limit); i++) {
          const query = new URLSearchParams({ limit: String(limit) });
          if (after) query.set('after', after);
          const res = await pool.request({
            method: 'GET',
            path: `${base.pathname}/events?${query}`,
            headers: { authorization: `Bearer ${API_KEY}`, accept: 'application/json' },
          });
          if (res.statusCode !== 200) throw new Error(`feed answered ${res.statusCode}`);
          const page = await res.body.json();
          requests++;
          n += page.data.length;
          if (page.data.length < limit) break;
          after = page.next_after;
        }
        return n;
      },
      { simulator: cpu.simPid },
    );
    if (events !== count) throw new Error(`paged ${events} events, expected ${count}`);
    return {
      eventsPerSec: events / seconds,
      seconds,
      roundTripMs: (seconds * 1000) / requests,
      requests,
      cpu: used,
    };
  } finally {
    await pool.close();
  }
}

/** Feed paging alone with `latencyMs` added to each response: `pages` sequential requests. */
export async function feedPagingWithLatency(sim, latencyMs, pages, limit) {
  await sim.setLatency(0);
  await sim.setBacklog(pages * limit);
  await sim.setLatency(latencyMs);
  const base = new URL(sim.baseUrl);
  const pool = new Pool(base.origin, { connections: 1 });
  try {
    let after = null;
    const started = performance.now();
    for (let i = 0; i < pages; i++) {
      const query = new URLSearchParams({ limit: String(limit) });
      if (after) query.set('after', after);
      const res = await pool.request({
        method: 'GET',
        path: `${base.pathname}/events?${query}`,
        headers: { authorization: `Bearer ${API_KEY}`, accept: 'application/json' },
      });
      after = (await res.body.json()).next_after;
    }
    const seconds = (performance.now() - started) / 1000;
    return { eventsPerSec: (pages * limit) / seconds, roundTripMs: (seconds * 1000) / pages };
  } finally {
    await pool.close();
    await sim.setLatency(0);
  }
}

/** The same events in batches like feedsync's catch-up (pages of `limit`, `pagesPerCommit` per transaction). */
function batchesOf(count, size) {
  const startMs = Date.now() - count * 100;
  const batches = [];
  for (let p = 1; p <= count; p += size)
    batches.push(backlogEvents(p, Math.min(count, p + size - 1), startMs));
  return batches;
}

/** Postgres ingest alone: the applier's own statement (createApplier), one batch after the other, cursor moves included. */
export async function postgresIngest(count, batchSize, cpu) {
  const batches = batchesOf(count, batchSize);
  const store = await migratedStore('ingest');
  try {
    await ensureCursor(store, SOURCE, null);
    const applier = createApplier(store, route);
    const { seconds, cpu: used } = await measuredWithPostgres(cpu, async () => {
      let prev = null;
      for (const events of batches) {
        const next = events.at(-1).id;
        const r = await applier.apply({
          source: SOURCE,
          receivedVia: 'feed',
          events,
          quarantine: [],
          cursor: { prev, next },
        });
        if (r.status !== 'applied' || r.inserted.length !== events.length)
          throw new Error('ingest did not apply');
        prev = next;
      }
    });
    return { eventsPerSec: count / seconds, seconds, cpu: used };
  } finally {
    await store.close();
    await dropSchema(store.schema);
  }
}

/** BullMQ addBulk alone: the relay's job names, ids, data and options, `batchSize` jobs a call. */
export async function bullmqAddBulk(count, batchSize, cpu) {
  const batches = batchesOf(count, batchSize).map((events) =>
    events.map((e) => ({
      name: e.type,
      jobId: jobIdFor(SOURCE, e.id),
      data: { source: SOURCE, id: e.id, type: e.type, created_at: e.created_at, data: e.data },
    })),
  );
  const prefix = benchPrefix('addbulk');
  const publisher = createRedisPublisher({
    redis: parseRedisSettings({ REDIS_URL }),
    prefix,
    jobOptions: jobOptionsFor({ jobAttempts: 5, jobBackoffMs: 1_000 }),
  });
  try {
    if (!(await publisher.ping())) throw new Error('Redis does not answer');
    const { seconds, cpu: used } = await measured(
      async () => {
        for (const jobs of batches) await publisher.addBulk(defaultQueues.emailEvents, jobs);
      },
      { redis: cpu.redisPid },
    );
    return { eventsPerSec: count / seconds, seconds, cpu: used };
  } finally {
    await publisher.close();
    await deletePrefix(prefix);
  }
}

/**
 * The outbox relay alone: `count` events stored by the applier with their outbox rows
 * (untimed), then the relay reading them back (select a batch of unpublished rows,
 * addBulk per queue, mark them published) `batchSize` rows at a time until the
 * outbox is empty.
 */
export async function relayAlone(count, batchSize, cpu) {
  const store = await migratedStore('relay');
  const prefix = benchPrefix('relay');
  const publisher = createRedisPublisher({
    redis: parseRedisSettings({ REDIS_URL }),
    prefix,
    jobOptions: jobOptionsFor({ jobAttempts: 5, jobBackoffMs: 1_000 }),
  });
  try {
    const applier = createApplier(store, route);
    for (const events of batchesOf(count, 1000)) {
      await applier.apply({ source: SOURCE, receivedVia: 'feed', events, quarantine: [] });
    }
    await store.pool.query(`VACUUM ANALYZE "${store.schema}".outbox`);
    if (!(await publisher.ping())) throw new Error('Redis does not answer');
    let published = 0;
    const { seconds, cpu: used } = await measuredWithPostgres(
      cpu,
      async () => {
        const relay = startRelay({
          outbox: pgOutbox(store),
          publisher,
          logger: createLogger({ level: 'silent' }),
          batchSize,
          onPublished: (_queue, n) => {
            published += n;
          },
        });
        try {
          await relay.drain();
        } finally {
          await relay.stop();
        }
      },
      { redis: cpu.redisPid },
    );
    const left = await outboxBacklog(store);
    if (published !== count || left > 0)
      throw new Error(`the relay published ${published} jobs of ${count}, with ${left} rows left`);
    return { eventsPerSec: count / seconds, seconds, cpu: used };
  } finally {
    await publisher.close();
    await deletePrefix(prefix);
    await store.close();
    await dropSchema(store.schema);
  }
}
